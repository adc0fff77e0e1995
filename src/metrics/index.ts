// The metrics service: one registry per gateway instance, installed at boot (src/services.ts) as
// `ctx.services.metrics`, with its RelayObserver as `ctx.services.relayObserver` for the hot path.
import type { Ctx } from "../context.ts";
import { trackerOf } from "../http/access-log.ts";
import { createGatewayMetrics, type GatewayMetrics } from "./gateway-metrics.ts";

export { createGatewayMetrics, NO_PROVIDER, type GatewayMetrics } from "./gateway-metrics.ts";

export function installMetrics(ctx: Ctx): GatewayMetrics {
  const metrics = createGatewayMetrics(trackerOf(ctx));
  ctx.services.metrics = metrics;
  ctx.services.relayObserver = metrics.observer;
  // The relay registers its usage queue as `ctx.services.usageQueue`; the gauge asks it for its
  // depth at scrape time (it may be registered after this runs, so it is looked up then).
  metrics.setUsageQueueDepthSource(() => (ctx.services.usageQueue as { depth?(): number } | undefined)?.depth?.() ?? 0);
  return metrics;
}

export function metricsOf(ctx: Ctx): GatewayMetrics {
  const m = ctx.services.metrics as GatewayMetrics | undefined;
  if (!m) throw new Error("the metrics service is not installed (src/services.ts)");
  return m;
}
