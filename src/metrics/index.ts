// The metrics service: one registry per gateway instance, built at boot (src/services.ts) as
// `ctx.services.metrics`, fed by its sink of the request record
// (`metrics.record`, attached to the request tracker in src/services.ts).
export { createGatewayMetrics, NO_PROVIDER, type GatewayMetrics } from "./gateway-metrics.ts";
