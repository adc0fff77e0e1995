// The instance's shutdown state, read by /readyz (health.ts) and set by the graceful stop (gateway.ts).
/** Set by the graceful shutdown: from then on /readyz answers 503 while in-flight requests finish. */
export interface Lifecycle {
  draining: boolean;
}
