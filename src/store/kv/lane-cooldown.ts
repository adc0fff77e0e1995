// The arithmetic of a lane's cooldown (docs/behaviour.md "Lane cooldowns"), in process. The Redis
// scripts (lane-scripts.ts) do the same steps on the same record, so both stores cool a lane alike:
//   - a retryable failure counts in a window; the threshold-th failure within it cools the lane;
//   - a failure with a vendor Retry-After, a refused connection, or a failed probe cools at once;
//   - each cooldown in a row is twice the last (base, 2 × base, … up to max); a Retry-After sets it;
//   - once a cooldown ends, one probe at a time may try the lane: the others keep skipping it until
//     the probe succeeds (the record goes: the next cooldown starts from base again) or fails (the
//     next, longer cooldown starts at once).

/** How failures cool a lane: the threshold and window, and the cooldown's first and longest length. */
export interface CooldownPolicy {
  threshold: number;
  windowMs: number;
  baseMs: number;
  maxMs: number;
}

/** One retryable failure of a lane, as the store is told of it. */
export interface LaneFailCall extends CooldownPolicy {
  /** The vendor's Retry-After in ms (sets the cooldown's length, capped at maxMs); null when none. */
  retryAfterMs: number | null;
  /** Cool at once (a refused connection: nothing is listening). */
  immediate: boolean;
  /** The failed request was the lane's probe: the next cooldown starts at once. */
  probe: boolean;
  /** The clock (ms) for tests that step it; the store's own clock otherwise. */
  now?: number;
}

/** What the store answers a failure with. */
export interface LaneVerdict {
  /** The end of the lane's cooldown (ms since epoch), 0 when it is not cooling. */
  untilMs: number;
  /** Cooldowns in a row (0: none yet). */
  level: number;
  /** Failures counted in the current window (0 once the lane cooled). */
  failures: number;
  /** This failure started the cooldown (the caller tells the other instances). */
  cooled: boolean;
}

/** What the store answers a probe request with. */
export interface ProbeVerdict {
  /** This request may try the lane (it is the probe, or the lane is not cooling at all). */
  granted: boolean;
  /** Not granted: until when to keep skipping it (the cooldown's end, or the running probe's expiry). */
  untilMs: number;
  level: number;
}

/** A lane's stored state: failures f counted since w, cooling until u, level l, a probe out until p. */
export interface LaneRecord {
  f: number;
  w: number;
  u: number;
  l: number;
  p: number;
}

/** How long the record outlives its cooldown: the level is remembered this long for a lane nobody probes. */
export const levelMemoryMs = (policy: CooldownPolicy) => 2 * policy.maxMs;

/** The cooldown's length at `level` (1 = the first): base doubling, at most max; a Retry-After sets it. */
export function cooldownMs(level: number, policy: CooldownPolicy, retryAfterMs: number | null): number {
  if (retryAfterMs !== null && retryAfterMs >= 0) return Math.floor(Math.min(retryAfterMs, policy.maxMs));
  return Math.floor(Math.min(policy.baseMs * 2 ** Math.max(0, level - 1), policy.maxMs));
}

/**
 * One failure applied to `rec` at `now`: the new record, how long to keep it (ms), and the verdict.
 * A failure reported while the lane already cools (requests that were in flight when it cooled)
 * changes nothing, unless it brings a Retry-After or is the probe's.
 */
export function applyFailure(rec: LaneRecord | null, call: LaneFailCall, now: number): { rec: LaneRecord; ttlMs: number; verdict: LaneVerdict } {
  const r: LaneRecord = rec ? { ...rec } : { f: 0, w: now, u: 0, l: 0, p: 0 };
  const retryAfter = call.retryAfterMs !== null && call.retryAfterMs >= 0;
  if (r.u > now && !call.probe && !retryAfter) {
    return { rec: r, ttlMs: r.u - now + levelMemoryMs(call), verdict: { untilMs: r.u, level: r.l, failures: 0, cooled: false } };
  }
  let cool = call.probe || call.immediate || retryAfter;
  if (!cool) {
    if (now - r.w > call.windowMs) {
      r.f = 0;
      r.w = now;
    }
    r.f += 1;
    cool = r.f >= call.threshold;
  }
  if (!cool) {
    // Still counting: kept for the window (and the level, while one is remembered).
    const ttlMs = Math.max(call.windowMs, r.l > 0 ? levelMemoryMs(call) : 0);
    return { rec: r, ttlMs, verdict: { untilMs: 0, level: r.l, failures: r.f, cooled: false } };
  }
  r.l += 1;
  const d = cooldownMs(r.l, call, call.retryAfterMs);
  r.u = now + d;
  r.f = 0;
  r.w = now;
  r.p = 0;
  return { rec: r, ttlMs: d + levelMemoryMs(call), verdict: { untilMs: r.u, level: r.l, failures: 0, cooled: true } };
}

/**
 * A request asks to try a lane this instance holds as cooling: granted when there is nothing to wait
 * for (no record, or a record that only counts failures), or when the cooldown ended and no probe is
 * out (it becomes the probe, held for `probeTtlMs`: a probe whose instance died frees itself).
 */
export function applyProbe(rec: LaneRecord | null, now: number, probeTtlMs: number): { rec: LaneRecord | null; verdict: ProbeVerdict } {
  if (!rec || rec.l === 0) return { rec, verdict: { granted: true, untilMs: 0, level: 0 } };
  if (rec.u > now) return { rec, verdict: { granted: false, untilMs: rec.u, level: rec.l } };
  if (rec.p > now) return { rec, verdict: { granted: false, untilMs: rec.p, level: rec.l } };
  return { rec: { ...rec, p: now + probeTtlMs }, verdict: { granted: true, untilMs: rec.u, level: rec.l } };
}
