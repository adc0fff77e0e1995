// The rate-limit arithmetic of one routing key (CONTRACT §8), in process. Redis runs the same
// arithmetic in its admission script (redis.ts ADMIT); this copy serves the embedded
// mode and, with the limits divided among instances, a limited key while Redis is unreachable.
//
// Requests and tokens are counted over a sliding 60 s window: each admission is one entry (its
// time, its request count and its reserved tokens); an entry stops counting 60 s after it was
// admitted, and a settlement lowers its tokens to the real count (the refund is usable at once).
// Why a window of entries and not a GCRA bucket: a bucket that allows a burst of the whole limit
// (what an agent fleet needs: a /blitz of 50 on a 60 RPM key) also allows up to twice the limit
// in some 60 s window; a window log allows the same bursts and never more than the limit in any
// 60 s window. Its cost is one entry per request in the last minute, bounded by rpm_limit.
//
// Concurrency is a set of leases keyed by request id, each with an expiry that the holder renews
// while its request runs; a lease of a holder that died stops counting when it expires.

export const WINDOW_MS = 60_000;

export interface KeyLimits {
  rpm: number | null;
  tpm: number | null;
  concurrency: number | null;
}

/** What one admission asks for. */
export interface LimitAsk {
  /** Requests (1, or N for a /blitz batch). */
  requests: number;
  /** Tokens reserved up front (prompt estimate + output limit, at most tpm). */
  tokens: number;
  /** Concurrency leases to take (0 when the key has no cap). */
  leases: number;
  /** The entry's id (the money call's uid); leases are `<entry>:<i>`. */
  entry: string;
}

export type LimitKind = "requests" | "tokens" | "concurrency";

/** What the admission answered; remaining/reset are -1/0 for limits the key does not have. */
export interface LimitVerdict {
  refused: LimitKind | null;
  /** When refused: ms until the ask can fit (-1: never, the ask is larger than the limit). */
  retryMs: number;
  remainingRequests: number;
  resetRequestsMs: number;
  remainingTokens: number;
  resetTokensMs: number;
}

interface Entry {
  id: string;
  at: number;
  requests: number;
  tokens: number;
}

/** One routing key's window and leases. `now` is passed in so tests can step the clock. */
export class LimitWindow {
  private log: Entry[] = [];
  private byId = new Map<string, Entry>();
  private usedRequests = 0;
  private usedTokens = 0;
  private leases = new Map<string, number>();

  private expire(now: number): void {
    let i = 0;
    while (i < this.log.length && this.log[i]!.at <= now - WINDOW_MS) {
      const e = this.log[i++]!;
      this.usedRequests -= e.requests;
      this.usedTokens -= e.tokens;
      this.byId.delete(e.id);
    }
    if (i) this.log.splice(0, i);
  }

  /** Ms until `over` units (requests or tokens) have left the window, oldest first; -1 when never. */
  private waitFor(over: number, field: "requests" | "tokens", now: number): number {
    let freed = 0;
    for (const e of this.log) {
      freed += e[field];
      if (freed >= over) return e.at + WINDOW_MS - now;
    }
    return -1;
  }

  /** `aheadMs`: the entry counts from now until aheadMs + 60 s (a slice used over the next aheadMs). */
  admit(limits: KeyLimits, ask: LimitAsk, now: number, leaseTtlMs: number, aheadMs = 0): LimitVerdict {
    this.expire(now);
    const { rpm, tpm, concurrency: cap } = limits;
    let refused: LimitKind | null = null;
    let retryMs = 0;
    if (rpm !== null && this.usedRequests + ask.requests > rpm) {
      refused = "requests";
      retryMs = ask.requests > rpm ? -1 : this.waitFor(this.usedRequests + ask.requests - rpm, "requests", now);
    } else if (tpm !== null && this.usedTokens + ask.tokens > tpm) {
      refused = "tokens";
      retryMs = ask.tokens > tpm ? -1 : this.waitFor(this.usedTokens + ask.tokens - tpm, "tokens", now);
    } else if (cap !== null) {
      for (const [id, until] of this.leases) if (until <= now) this.leases.delete(id);
      if (this.leases.size + ask.leases > cap) {
        refused = "concurrency";
        retryMs = ask.leases > cap ? -1 : 1000;
      }
    }
    if (refused === null) {
      if (rpm !== null || tpm !== null) {
        const e: Entry = { id: ask.entry, at: now + aheadMs, requests: ask.requests, tokens: ask.tokens };
        // Sorted by time, as Redis's sorted set keeps them (a clock step back inserts earlier).
        let i = this.log.length;
        while (i > 0 && this.log[i - 1]!.at > e.at) i--;
        this.log.splice(i, 0, e);
        this.byId.set(e.id, e);
        this.usedRequests += ask.requests;
        this.usedTokens += ask.tokens;
      }
      if (cap !== null) for (let i = 1; i <= ask.leases; i++) this.leases.set(`${ask.entry}:${i}`, now + leaseTtlMs);
    }
    const resetMs = this.log.length ? Math.max(0, this.log[0]!.at + WINDOW_MS - now) : 0;
    return {
      refused,
      retryMs,
      remainingRequests: rpm === null ? -1 : Math.max(0, rpm - this.usedRequests),
      resetRequestsMs: rpm === null ? 0 : resetMs,
      remainingTokens: tpm === null ? -1 : Math.max(0, tpm - this.usedTokens),
      resetTokensMs: tpm === null ? 0 : resetMs,
    };
  }

  /** Settlement: the entry's requests and tokens change by the deltas (never below 0); the leases are given back. */
  release(entry: string, tokenDelta: number, leaseIds: readonly string[], requestDelta = 0): void {
    const e = this.byId.get(entry);
    if (e && tokenDelta !== 0) {
      const next = Math.max(0, e.tokens + tokenDelta);
      this.usedTokens += next - e.tokens;
      e.tokens = next;
    }
    if (e && requestDelta !== 0) {
      const next = Math.max(0, e.requests + requestDelta);
      this.usedRequests += next - e.requests;
      e.requests = next;
    }
    for (const id of leaseIds) this.leases.delete(id);
  }

  /** Leases held now (tests and the Redis-down floor). */
  leasesHeld(now: number): number {
    let n = 0;
    for (const until of this.leases.values()) if (until > now) n++;
    return n;
  }

  /** True when nothing is counted any more (the owner may drop this window). */
  idle(now: number): boolean {
    this.expire(now);
    return this.log.length === 0 && this.leasesHeld(now) === 0;
  }
}
