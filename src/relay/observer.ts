// Observability hook of the hot path. The relay calls these at fixed points; the metrics module
// installs an implementation as `ctx.services.relayObserver`. Calls are synchronous and must be
// cheap (counters, histograms), never I/O.

export interface RelayObserver {
  requestDone(i: { endpoint: string; provider: string | null; outcome: string; status: number; latencyMs: number; ttfbMs: number | null }): void;
  fallback(i: { endpoint: string; fromProvider: string; reason: string }): void;
  budgetRejected(i: { endpoint: string }): void;
  upstreamError(i: { provider: string; status: number; code: string }): void;
  /** One upstream attempt ended (per-lane latency and time to first byte). */
  laneAttempt?(i: { provider: string; outcome: string; latencyMs: number; ttfbMs: number | null }): void;
  usageQueueDepth?(): number;
}
