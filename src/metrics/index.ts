// The metrics service: one registry per gateway instance, built at boot (src/services.ts) as
// `ctx.services.metrics`, with its RelayObserver as `ctx.services.relayObserver` for the hot path.
export { createGatewayMetrics, NO_PROVIDER, type GatewayMetrics } from "./gateway-metrics.ts";
