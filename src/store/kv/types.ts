// The key-value interface that budgets, rate limits and cache invalidation use.
// Two implementations: Redis (shared by every gateway instance) and in-process (one instance).
// Budget operations are semantic rather than raw scripts so both backends keep them atomic.
import type { KeyLimits, LimitAsk, LimitKind, LimitVerdict } from "./limit-window.ts";
import type { LaneFailCall, LaneVerdict, ProbeVerdict } from "./lane-cooldown.ts";

export interface ReserveResult {
  /** False when the reservation would pass the limit; nothing was added then. */
  ok: boolean;
  /** Counter value after the call (or the value that refused it). */
  total: number;
  /** What was added: `amount` when it fits, else what remained below the limit (at least `min`). */
  granted: number;
  /** True when the counter did not exist: the caller seeds it from Postgres and calls again. */
  missing: boolean;
  /** The rate limits' verdict when the call carried limits. */
  limits?: LimitVerdict;
}

/** The three keys of one routing key's rate limits (all under its hash tag). */
export interface LimitKeys {
  log: string;
  amounts: string;
  leases: string;
}

/** Rate limits admitted in the same atomic step as the budget (CONTRACT §8). */
export interface LimitCall {
  keys: LimitKeys;
  limits: KeyLimits;
  ask: LimitAsk;
  leaseTtlMs: number;
  /** The clock (ms) for tests that step it; the store's own clock otherwise. */
  now?: number;
  /** A slice used over the next `aheadMs`: its entry counts from now until aheadMs + 60 s. */
  aheadMs?: number;
}

const KINDS: Array<LimitKind | null> = [null, "requests", "tokens", "concurrency"];

/** The verdict from the admission script's numbers. */
export function verdict(refused: number, retryMs: number, remainingRequests: number, resetRequestsMs: number, remainingTokens: number, resetTokensMs: number): LimitVerdict {
  return { refused: KINDS[refused] ?? null, retryMs, remainingRequests, resetRequestsMs, remainingTokens, resetTokensMs };
}

/**
 * A settlement's change to one rate-window entry: requests and token deltas (≤ 0: a token refund
 * down to the real count, or a slice's unused part going back).
 */
export interface LimitDelta {
  entry: string;
  requests: number;
  tokens: number;
}

/** The in-flight ledger entry the reservation writes in the same atomic step (see redis.ts ADMIT). */
export interface LedgerEntry {
  ledger: string;
  id: string;
  value: string;
}

export interface KV {
  readonly kind: "redis" | "memory";
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlSeconds?: number): Promise<void>;
  del(key: string): Promise<void>;
  /** INCR with the TTL set on first increment (fixed window counters). Returns the new value. */
  incrWindow(key: string, ttlSeconds: number): Promise<number>;

  /**
   * Atomically: when the counter is missing → {missing}; when total + amount ≤ limit → add amount;
   * else when total + min ≤ limit → add what remains (limit − total); else refuse.
   * Integers only (the budget module counts nano-dollars). `limit` -1: no budget (only the limits
   * and the ledger entry). With `limits`, the rate limits are admitted in the same step, after
   * the budget, and nothing is added unless both fit.
   */
  reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number, entry?: LedgerEntry, limits?: LimitCall): Promise<ReserveResult>;
  /** Settlements: window entries' request and token deltas, and the leases given back. */
  releaseLimits(keys: LimitKeys, deltas: readonly LimitDelta[], leaseIds: readonly string[]): Promise<void>;
  /** Pushes out the expiry of leases still held (their requests are running). */
  renewLeases(keys: LimitKeys, ttlMs: number, ids: string[]): Promise<void>;
  /** Atomically add delta (may be negative) to an existing counter; a missing counter stays missing. */
  adjust(key: string, delta: number, ttlSeconds: number): Promise<number | null>;
  /** Set the counter only if it does not exist (seeding from Postgres after Redis lost it). */
  seed(key: string, value: number, ttlSeconds: number): Promise<void>;
  /** The members of a month's adding set (store/spend-counters.ts): calls whose records a rebuild leaves out. */
  addingMembers(adding: string): Promise<string[]>;
  /**
   * Rebuilds a missing counter at `value` (the records' sum less the records of `seen`, the adding
   * set as read before that sum) plus the reservations of the set's members still in flight in
   * `inflight`, atomically, and only while the set is exactly `seen`. True when the counter is set
   * (by this call or an earlier one); false when the set changed: read it and sum again.
   */
  seedExcept(key: string, adding: string, inflight: string, value: number, ttlSeconds: number, seen: readonly string[]): Promise<boolean>;
  getNumber(key: string): Promise<number | null>;

  /** A lane's retryable failure, counted and perhaps cooling it, atomically (lane-cooldown.ts). A recovered lane's record is del()eted. */
  laneFailed(key: string, call: LaneFailCall): Promise<LaneVerdict>;
  /** Whether a request may try a lane held as cooling: the probe once its cooldown ended, one at a time (lane-cooldown.ts). */
  laneProbe(key: string, probeTtlMs: number, now?: number): Promise<ProbeVerdict>;

  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, handler: (message: string) => void): Promise<void>;

  ping(): Promise<void>;
  close(): Promise<void>;
}
