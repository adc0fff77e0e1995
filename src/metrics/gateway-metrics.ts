// Prometheus metrics of one gateway instance: a prom-client Registry of its own (several gateways
// run in one test process, so nothing is registered globally), fed by one sink of the request
// record (http/access-log.ts): each finished record, a /blitz prompt's included, is read once at
// its release. Observations are counter/histogram updates only (fast-metrics.ts); a scrape
// serialises what is there and reads one number (the usage-queue depth), nothing more.
import { collectDefaultMetrics, Gauge, Registry } from "prom-client";
import type { AccessEntry, LaneTry } from "../http/access-log.ts";
import { affinityLabel, endpointLabel, errorCodeLabel, outcomeLabel, providerLabel, statusLabel } from "./label-sets.ts";
import { FastCounter, FastHistogram, type CounterSeries, type HistogramSeries } from "./fast-metrics.ts";

/** Seconds; fine at the bottom (the gateway adds well under a millisecond), long at the top (streams). */
const LATENCY_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];
const TTFB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

/** Label value for "no provider was reached" (auth, validation and budget failures). */
export const NO_PROVIDER = "none";

export interface GatewayMetrics {
  registry: Registry;
  /** The record sink: a finished request's (or /blitz prompt's) counts, durations, lanes, fallbacks and refusal. */
  record(e: AccessEntry): void;
  /** Where the usage-queue depth gauge reads from (the usage queue registers itself). */
  setUsageQueueDepthSource(read: () => number): void;
  /** Where the cooling-lanes gauge reads from: lanes cooling now, by provider (relay/routing/cooldowns.ts). */
  setCoolingSource(read: () => Map<string, number>): void;
  /** A lane's cooldown started on this instance. */
  laneCooled(provider: string): void;
  /** The exposition text and its content type. */
  render(): Promise<{ body: string; contentType: string }>;
}

/** What the in-flight gauges read at scrape time (src/http/access-log.ts RequestTracker). */
export interface InFlightSource {
  inFlight: number;
  streams: number;
}

export function createGatewayMetrics(inFlight?: InFlightSource): GatewayMetrics {
  const registry = new Registry();
  // Process CPU, memory, open handles and file descriptors, event-loop lag, GC: prom-client's own
  // collectors, read at scrape time (the lag monitor samples in the background at no request cost).
  collectDefaultMetrics({ register: registry });
  const requests = new FastCounter("gateway_requests_total",
    "Inference requests answered, by endpoint, provider that served (or last tried) and outcome.",
    ["endpoint", "provider", "outcome"], registry);
  const duration = new FastHistogram("gateway_request_duration_seconds",
    "Time from receiving an inference request to its last byte sent, by endpoint, provider and outcome.",
    ["endpoint", "provider", "outcome"], LATENCY_BUCKETS, registry);
  const ttfb = new FastHistogram("gateway_time_to_first_byte_seconds",
    "Time from receiving an inference request to the first byte of its answer, by endpoint, provider and outcome.",
    ["endpoint", "provider", "outcome"], TTFB_BUCKETS, registry);
  const fallbacks = new FastCounter("gateway_fallbacks_total",
    "Lanes given up on and passed to the next lane, by endpoint, the provider that failed and why.",
    ["endpoint", "from_provider", "reason"], registry);
  const budgetRejections = new FastCounter("gateway_budget_rejections_total",
    "Inference requests refused with 402 budget_exceeded, by endpoint.",
    ["endpoint"], registry);
  const upstreamErrors = new FastCounter("gateway_upstream_errors_total",
    "Failed upstream attempts, by provider, HTTP status (0 = no answer) and error code.",
    ["provider", "status", "code"], registry);
  const laneDuration = new FastHistogram("gateway_upstream_duration_seconds",
    "Duration of one upstream attempt (one lane), from sending to its last byte, by provider and outcome.",
    ["provider", "outcome"], LATENCY_BUCKETS, registry);
  const laneTtfb = new FastHistogram("gateway_upstream_time_to_first_byte_seconds",
    "Time from sending one upstream attempt to its first byte (headers, or first event of a stream), by provider and outcome.",
    ["provider", "outcome"], TTFB_BUCKETS, registry);
  new Gauge({
    name: "gateway_requests_in_flight",
    help: "HTTP requests being answered now (streams count until their last byte).",
    registers: [registry],
    collect() {
      this.set(inFlight?.inFlight ?? 0);
    },
  });
  new Gauge({
    name: "gateway_streams_in_flight",
    help: "Streaming answers being relayed now.",
    registers: [registry],
    collect() {
      this.set(inFlight?.streams ?? 0);
    },
  });
  const laneSkips = new FastCounter("gateway_lane_skips_total",
    "Lanes passed over by a request because they were cooling down, by provider.",
    ["provider"], registry);
  const cooldowns = new FastCounter("gateway_lane_cooldowns_total",
    "Lane cooldowns started by this instance (a lane failing for a retryable cause), by provider.",
    ["provider"], registry);
  const affinity = new FastCounter("gateway_session_affinity_total",
    "Requests carrying a session on keys with session affinity, by endpoint and result: followed (the session's lane served), moved (another lane served), new (no lane remembered).",
    ["endpoint", "result"], registry);
  let readCooling: (() => Map<string, number>) | null = null;
  new Gauge({
    name: "gateway_lanes_cooling",
    help: "Lanes cooling down now (skipped by every instance), by provider, as this instance knows them.",
    labelNames: ["provider"],
    registers: [registry],
    collect() {
      this.reset();
      if (readCooling) for (const [p, n] of readCooling()) this.labels(providerLabel(p)).inc(n);
    },
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

  // The three series of one (endpoint, provider, outcome), resolved together once.
  const requestSeries = new Map<string, { count: CounterSeries; duration: HistogramSeries; ttfb: HistogramSeries }>();
  // Keyed by the mapped labels, so this cache is as bounded as the label sets (label-sets.ts).
  const seriesFor = (rawEndpoint: string, rawProvider: string, rawOutcome: string) => {
    const endpoint = endpointLabel(rawEndpoint), provider = providerLabel(rawProvider), outcome = outcomeLabel(rawOutcome);
    const k = `${endpoint}\u0000${provider}\u0000${outcome}`;
    let s = requestSeries.get(k);
    if (!s) {
      s = { count: requests.labels(endpoint, provider, outcome), duration: duration.labels(endpoint, provider, outcome), ttfb: ttfb.labels(endpoint, provider, outcome) };
      requestSeries.set(k, s);
    }
    return s;
  };

  const laneSeries = new Map<string, { duration: HistogramSeries; ttfb: HistogramSeries }>();

  const lane = (endpoint: string | null, t: LaneTry) => {
    if (t.outcome) {
      // One upstream attempt ended: its duration and time to first byte.
      const provider = providerLabel(t.provider), outcome = outcomeLabel(t.outcome);
      const k = `${provider}\u0000${outcome}`;
      let s = laneSeries.get(k);
      if (!s) laneSeries.set(k, (s = { duration: laneDuration.labels(provider, outcome), ttfb: laneTtfb.labels(provider, outcome) }));
      if (t.latencyMs! >= 0) s.duration.observe(t.latencyMs! / 1000);
      if (t.ttfbMs != null && t.ttfbMs >= 0) s.ttfb.observe(t.ttfbMs / 1000);
    }
    if (t.upstreamCode) upstreamErrors.labels(providerLabel(t.provider), statusLabel(t.upstreamStatus ?? 0), errorCodeLabel(t.upstreamCode)).inc();
    if (t.fellBack && endpoint !== null) fallbacks.labels(endpointLabel(endpoint), providerLabel(t.provider), errorCodeLabel(t.code ?? "")).inc();
  };

  const record = (e: AccessEntry) => {
    if (e.lanes) for (const t of e.lanes) lane(e.endpoint, t);
    if (e.asides) for (const t of e.asides) lane(e.endpoint, t);
    if (e.budgetRefused !== null) budgetRejections.labels(endpointLabel(e.budgetRefused)).inc();
    if (e.skipped !== null) for (const t of e.skipped) laneSkips.labels(providerLabel(t.provider)).inc();
    if (e.affinity !== null && e.endpoint !== null) affinity.labels(endpointLabel(e.endpoint), affinityLabel(e.affinity)).inc();
    // An inference request (or prompt) that ended with an outcome: counted once, by the provider that served or was last tried.
    if (e.endpoint === null || e.outcome === null) return;
    const s = seriesFor(e.endpoint, e.provider ?? NO_PROVIDER, e.outcome);
    s.count.inc();
    const ms = e.endedAt - e.startedAt;
    if (ms >= 0) s.duration.observe(ms / 1000);
    if (e.ttfbMs !== null && e.ttfbMs >= 0) s.ttfb.observe(e.ttfbMs / 1000);
  };

  return {
    registry,
    record,
    setUsageQueueDepthSource(read) {
      readDepth = read;
    },
    setCoolingSource(read) {
      readCooling = read;
    },
    laneCooled(provider) {
      cooldowns.labels(providerLabel(provider)).inc();
    },
    async render() {
      return { body: await registry.metrics(), contentType: registry.contentType };
    },
  };
}
