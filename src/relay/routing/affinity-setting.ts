// A routing key's session affinity (CONTRACT §9) from its stored column: one rule for the relay and
// the management API that shows it.

/** The default of keys with more than one lane: a session keeps its lane for an hour after its last request. */
export const AFFINITY_DEFAULT_TTL_SECONDS = 3600;

/**
 * The effective TTL in seconds, or null when affinity is off. `stored`: null = the default (on for
 * keys with more than one lane, where there is a choice to remember), 0 = turned off, N = N seconds.
 */
export function affinityTtlSeconds(stored: number | null, lanes: number): number | null {
  if (stored === null) return lanes > 1 ? AFFINITY_DEFAULT_TTL_SECONDS : null;
  return stored > 0 ? stored : null;
}
