// Prometheus metrics of one gateway instance: a prom-client Registry of its own (several gateways
// run in one test process, so nothing is registered globally) and the RelayObserver that feeds it
// from the hot path. Observations are counter/histogram updates only; a scrape serialises what is
// there and reads one number (the usage-queue depth), nothing more.
import { Counter, Gauge, Histogram, Registry } from "prom-client";
import type { RelayObserver } from "../relay/observer.ts";

/** Seconds; fine at the bottom (the gateway adds well under a millisecond), long at the top (streams). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const TTFB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Label value for "no provider was reached" (auth, validation and budget failures). */
export const NO_PROVIDER = "none";

export interface GatewayMetrics {
  registry: Registry;
  observer: RelayObserver;
  /** Where the usage-queue depth gauge reads from (the usage queue registers itself). */
  setUsageQueueDepthSource(read: () => number): void;
  /** The exposition text and its content type. */
  render(): Promise<{ body: string; contentType: string }>;
}

type Observe = { observe(v: number): void };
type Inc = { inc(v?: number): void };

export function createGatewayMetrics(): GatewayMetrics {
  const registry = new Registry();
  const requests = new Counter({
    name: "gateway_requests_total",
    help: "Inference requests answered, by endpoint, provider that served (or last tried) and outcome.",
    labelNames: ["endpoint", "provider", "outcome"] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: "gateway_request_duration_seconds",
    help: "Time from receiving an inference request to its last byte sent, by endpoint, provider and outcome.",
    labelNames: ["endpoint", "provider", "outcome"] as const,
    buckets: LATENCY_BUCKETS,
    registers: [registry],
  });
  const ttfb = new Histogram({
    name: "gateway_time_to_first_byte_seconds",
    help: "Time from receiving an inference request to the first byte of its answer, by endpoint, provider and outcome.",
    labelNames: ["endpoint", "provider", "outcome"] as const,
    buckets: TTFB_BUCKETS,
    registers: [registry],
  });
  const fallbacks = new Counter({
    name: "gateway_fallbacks_total",
    help: "Lanes given up on and passed to the next lane, by endpoint, the provider that failed and why.",
    labelNames: ["endpoint", "from_provider", "reason"] as const,
    registers: [registry],
  });
  const budgetRejections = new Counter({
    name: "gateway_budget_rejections_total",
    help: "Inference requests refused with 402 budget_exceeded, by endpoint.",
    labelNames: ["endpoint"] as const,
    registers: [registry],
  });
  const upstreamErrors = new Counter({
    name: "gateway_upstream_errors_total",
    help: "Failed upstream attempts, by provider, HTTP status (0 = no answer) and error code.",
    labelNames: ["provider", "status", "code"] as const,
    registers: [registry],
  });
  let readDepth: (() => number) | null = null;
  new Gauge({
    name: "gateway_usage_queue_depth",
    help: "Usage records waiting to be written to the database.",
    registers: [registry],
    collect() {
      // One read of a length at scrape time; the queue itself is never walked.
      this.set(readDepth ? readDepth() : 0);
    },
  });

  // Label children are looked up once per label combination and reused: the hot path then does a
  // Map lookup and the prom-client update, no label-object building per request.
  const requestChildren = new Map<string, { count: Inc; duration: Observe; ttfb: Observe }>();
  const requestChild = (endpoint: string, provider: string, outcome: string) => {
    const k = `${endpoint}\u0000${provider}\u0000${outcome}`;
    let c = requestChildren.get(k);
    if (!c) {
      c = {
        count: requests.labels(endpoint, provider, outcome),
        duration: duration.labels(endpoint, provider, outcome),
        ttfb: ttfb.labels(endpoint, provider, outcome),
      };
      requestChildren.set(k, c);
    }
    return c;
  };
  const counterChildren = new Map<string, Inc>();
  const counterChild = (metric: Counter<string>, name: string, ...values: string[]) => {
    const k = `${name}\u0000${values.join("\u0000")}`;
    let c = counterChildren.get(k);
    if (!c) {
      c = metric.labels(...values);
      counterChildren.set(k, c);
    }
    return c;
  };

  const observer: RelayObserver = {
    requestDone(i) {
      const c = requestChild(i.endpoint, i.provider ?? NO_PROVIDER, i.outcome);
      c.count.inc();
      if (Number.isFinite(i.latencyMs) && i.latencyMs >= 0) c.duration.observe(i.latencyMs / 1000);
      if (i.ttfbMs !== null && Number.isFinite(i.ttfbMs) && i.ttfbMs >= 0) c.ttfb.observe(i.ttfbMs / 1000);
    },
    fallback(i) {
      counterChild(fallbacks, "f", i.endpoint, i.fromProvider, i.reason).inc();
    },
    budgetRejected(i) {
      counterChild(budgetRejections, "b", i.endpoint).inc();
    },
    upstreamError(i) {
      counterChild(upstreamErrors, "u", i.provider, String(i.status), i.code).inc();
    },
  };

  return {
    registry,
    observer,
    setUsageQueueDepthSource(read) {
      readDepth = read;
    },
    async render() {
      return { body: await registry.metrics(), contentType: registry.contentType };
    },
  };
}
