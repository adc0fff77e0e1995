// The key-value interface that budgets, rate limits and cache invalidation use.
// Two implementations: Redis (shared by every gateway instance) and in-process (one instance).
// Budget operations are semantic rather than raw scripts so both backends keep them atomic.

export interface ReserveResult {
  /** False when the reservation would pass the limit; nothing was added then. */
  ok: boolean;
  /** Counter value after the call (or the value that refused it). */
  total: number;
  /** What was added: `amount` when it fits, else what remained below the limit (at least `min`). */
  granted: number;
  /** True when the counter did not exist: the caller seeds it from Postgres and calls again. */
  missing: boolean;
}

/** The in-flight ledger entry the reservation writes in the same atomic step (see redis.ts RESERVE). */
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
   * Integers only (the budget module counts nano-dollars).
   */
  reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number, entry?: LedgerEntry): Promise<ReserveResult>;
  /** Atomically add delta (may be negative) to an existing counter; a missing counter stays missing. */
  adjust(key: string, delta: number, ttlSeconds: number): Promise<number | null>;
  /** Set the counter only if it does not exist (seeding from Postgres after Redis lost it). */
  seed(key: string, value: number, ttlSeconds: number): Promise<void>;
  getNumber(key: string): Promise<number | null>;

  publish(channel: string, message: string): Promise<void>;
  subscribe(channel: string, handler: (message: string) => void): Promise<void>;

  ping(): Promise<void>;
  close(): Promise<void>;
}
