// Per-key rate limits and concurrency caps (CONTRACT §8), admitted in the budget's own script
// call (money/counters.ts → store ADMIT): requests and tokens over a sliding 60 s window,
// concurrency as leases. This module builds what one admission asks for, gives it back at
// settlement (token refunds and leases, one RELEASE call per key per event-loop turn), renews the
// leases of running requests, and admits on its own while Redis is unreachable:
//   - keys with a budget follow the budget's rule (503 budget_unavailable);
//   - keys with limits and no budget admit against an in-process window whose limits are the
//     key's divided by the live instances (floor, at least 1), never the full limit on each.
// Two ways a busy key costs less than a round trip per request:
//   - slices (relay/slices.ts, the mechanism budget leases share): an instance seeing a hot key (a
//     second admission within SLICE_MS) with headroom takes, in its next admission, a slice of
//     requests and tokens (a tenth of the limit shared among the live instances, at most a quarter
//     of what remains) and serves the next requests from it locally for SLICE_MS. The slice's window entry counts from its admission until
//     SLICE_MS + 60 s, so every request served from it is counted at least 60 s after it was sent:
//     the shared limit still holds in every window. What the slice did not use goes back at its
//     end. Keys with a budget (the budget needs its own reservation) or a concurrency cap (each
//     request needs its lease) are not sliced.
//   - a key refused for requests is remembered until the window frees a slot, so a runaway client
//     hammering a key over its limit costs no round trip.
import type { Base } from "../../base.ts";
import type { Json } from "../../protocols/types.ts";
import { LimitWindow, type KeyLimits, type LimitAsk, type LimitVerdict } from "../../store/kv/limit-window.ts";
import type { LimitCall, LimitDelta, LimitKeys } from "../../store/kv/types.ts";
import type { KeyContext } from "../key-context.ts";
import { candidateModels } from "../routing/model.ts";
import { choicesOf, clientOutputLimit, worstOutputTokens } from "../../money/output-limits.ts";
import { rateLimited } from "./headers.ts";
import { HotKeys, sliceSize, SLICE_MS } from "../slices.ts";

/** A lease of an instance that died stops counting this long after its last renewal (≤ 90 s). */
export const LEASE_TTL_MS = 60_000;
const RENEW_EVERY_MS = 20_000;
export { SLICE_MS };

export const limitKeys = (keyId: string): LimitKeys => ({
  log: `gw:{k:${keyId}}:rl:w`,
  amounts: `gw:{k:${keyId}}:rl:a`,
  leases: `gw:{k:${keyId}}:rl:l`,
});

/**
 * Tokens one request reserves: the prompt at about four bytes a token (the estimate OpenAI's own
 * limiter uses; the real count replaces it at settlement) plus its output limit (the client's,
 * else the model's cap from the catalog, the largest over the lanes it may use), at most the whole
 * limit so a request without max_tokens can still run alone.
 */
export function tokenAsk(key: KeyContext, request: Json, bytes: number, embeddings = false): number {
  const tpm = key.limits?.tpm;
  if (!tpm) return 0;
  let out = 0;
  if (!embeddings) {
    const cap = clientOutputLimit(request);
    const model = typeof request.model === "string" ? request.model : "";
    for (const lane of key.lanes) for (const m of candidateModels(model, lane)) out = Math.max(out, worstOutputTokens(cap, m));
    out *= choicesOf(request);
  }
  return Math.min(tpm, Math.ceil(bytes / 4) + out);
}

/** What a money call holds on the limits until it settles. */
export interface RateHold {
  keyId: string;
  limits: KeyLimits;
  verdict: LimitVerdict;
  /** The window entry (the call's uid, or its batch's). */
  entry: string;
  tokens: number;
  /** Leases this call gives back; a /blitz batch's are given back by its last prompt. */
  leaseIds: string[];
  batch?: { left: number; leaseIds: string[] };
  /** Admitted by the in-process window while Redis was unreachable. */
  local: boolean;
}

/** Requests and tokens an instance took ahead for a hot key, served locally until `until`. */
interface Slice {
  keyId: string;
  entry: string;
  limits: KeyLimits;
  /** The verdict when the slice was taken (its remaining counts exclude the whole slice). */
  verdict: LimitVerdict;
  requests: number;
  tokens: number;
  until: number;
}

interface Pending {
  keys: LimitKeys;
  deltas: LimitDelta[];
  leases: string[];
}

export class RateLimits {
  private pending = new Map<string, Pending>();
  private scheduled = false;
  /** Leases held by this instance's running requests, by key (renewed until given back). */
  private held = new Map<string, Set<string>>();
  /** The Redis-down fallback: one in-process window per key. */
  private local = new Map<string, LimitWindow>();
  /** Keys refused for requests, until the moment their window frees a slot (ms). */
  private over = new Map<string, number>();
  private renewTimer: ReturnType<typeof setInterval> | null = null;
  private slices = new Map<string, Slice>();
  private seen = new HotKeys<{ remainingRequests: number; remainingTokens: number }>();

  /** Told of every 429 this class answers (the usage rollup counts refusals). */
  onRefused: (key: KeyContext) => void = () => {};

  constructor(private ctx: Pick<Base, "kv" | "log">, private liveInstances: () => number) {}

  /** The admission's limit part: what to ask the store for. */
  call(key: KeyContext, ask: Omit<LimitAsk, "leases">, leases = 1): LimitCall {
    const limits = key.limits!;
    return {
      keys: limitKeys(key.id),
      limits,
      ask: { ...ask, leases: limits.concurrency === null ? 0 : leases },
      // In process a lease lives until its request settles.
      leaseTtlMs: this.ctx.kv.kind === "redis" ? LEASE_TTL_MS : Number.MAX_SAFE_INTEGER,
    };
  }

  /**
   * Serves a single request of a key without a budget from this instance's slice, without a
   * round trip, when one is open and holds enough; else null.
   */
  fromSlice(key: KeyContext, c: LimitCall): RateHold | null {
    const s = this.slices.get(key.id);
    if (!s || c.ask.requests !== 1 || c.ask.leases !== 0) return null;
    if (Date.now() >= s.until || s.requests < 1 || s.tokens < c.ask.tokens) return null;
    s.requests -= 1;
    s.tokens -= c.ask.tokens;
    const v = s.verdict;
    const verdict: LimitVerdict = {
      ...v,
      remainingRequests: v.remainingRequests < 0 ? v.remainingRequests : v.remainingRequests + (Number.isFinite(s.requests) ? s.requests : 0),
      remainingTokens: v.remainingTokens < 0 ? v.remainingTokens : v.remainingTokens + (Number.isFinite(s.tokens) ? s.tokens : 0),
    };
    return { keyId: key.id, limits: s.limits, verdict, entry: s.entry, tokens: c.ask.tokens, leaseIds: [], local: false };
  }

  /**
   * On a hot key with headroom (Redis mode, no budget, no cap), enlarges a single request's ask by
   * a slice; returns the slice's size (0: not enlarged).
   */
  widen(key: KeyContext, c: LimitCall): { requests: number; tokens: number } {
    const none = { requests: 0, tokens: 0 };
    const l = c.limits;
    if (this.ctx.kv.kind !== "redis" || l.concurrency !== null || c.ask.requests !== 1) return none;
    const seen = this.seen.hot(key.id);
    if (!seen) return none;
    const n = this.liveInstances();
    const requests = l.rpm === null ? Infinity : sliceSize(l.rpm, seen.remainingRequests, n);
    const tokens = l.tpm === null ? Infinity : sliceSize(l.tpm, seen.remainingTokens, n);
    // Worth it only when the slice serves at least one more request like this one.
    if (requests < 1 || tokens < Math.max(1, c.ask.tokens)) return none;
    const take = { requests: Number.isFinite(requests) ? requests : 0, tokens: Number.isFinite(tokens) ? tokens : 0 };
    c.ask = { ...c.ask, requests: 1 + take.requests, tokens: c.ask.tokens + take.tokens };
    c.aheadMs = SLICE_MS;
    return { requests, tokens };
  }

  /** Refuses at once, without a round trip, a key known to be over its request limit. */
  checkKnownOver(key: KeyContext): void {
    const until = this.over.get(key.id);
    if (until === undefined) return;
    const wait = until - Date.now();
    if (wait <= 0) {
      this.over.delete(key.id);
      return;
    }
    this.onRefused(key);
    throw rateLimited(key.id, key.limits!, { refused: "requests", retryMs: wait, remainingRequests: 0, resetRequestsMs: wait, remainingTokens: -1, resetTokensMs: 0 });
  }

  /**
   * The store's verdict: a hold when admitted; a 429 (remembering a request refusal) when not.
   * `slice`: what widen() added to the ask, opened as this instance's slice once admitted.
   */
  admitted(key: KeyContext, c: LimitCall, v: LimitVerdict, local = false, slice?: { requests: number; tokens: number }): RateHold {
    if (!local) this.seen.admitted(key.id, { remainingRequests: v.remainingRequests, remainingTokens: v.remainingTokens });
    if (v.refused) {
      // Not even one more request fits until the oldest entry leaves the window.
      if (v.refused === "requests" && v.remainingRequests === 0 && v.resetRequestsMs > 0 && this.over.size < 100_000) {
        this.over.set(key.id, Date.now() + v.resetRequestsMs);
      }
      this.onRefused(key);
      throw rateLimited(key.id, c.limits, v);
    }
    const leaseIds: string[] = [];
    for (let i = 1; i <= c.ask.leases; i++) leaseIds.push(`${c.ask.entry}:${i}`);
    if (leaseIds.length && !local && this.ctx.kv.kind === "redis") {
      let set = this.held.get(key.id);
      if (!set) this.held.set(key.id, (set = new Set()));
      for (const id of leaseIds) set.add(id);
      this.startRenewing();
    }
    if (slice && (slice.requests > 0 || slice.tokens > 0)) {
      this.closeSlice(key.id);
      const s: Slice = { keyId: key.id, entry: c.ask.entry, limits: c.limits, verdict: v, requests: slice.requests, tokens: slice.tokens, until: Date.now() + SLICE_MS };
      this.slices.set(key.id, s);
      setTimeout(() => { if (this.slices.get(key.id) === s) this.closeSlice(key.id); }, SLICE_MS).unref?.();
      const own = c.ask.tokens - (Number.isFinite(slice.tokens) ? slice.tokens : 0);
      return { keyId: key.id, limits: c.limits, verdict: v, entry: c.ask.entry, tokens: own, leaseIds, local };
    }
    return { keyId: key.id, limits: c.limits, verdict: v, entry: c.ask.entry, tokens: c.ask.tokens, leaseIds, local };
  }

  /** Gives a slice's unused requests and tokens back to the shared window. */
  private closeSlice(keyId: string): void {
    const s = this.slices.get(keyId);
    if (!s) return;
    this.slices.delete(keyId);
    const requests = Number.isFinite(s.requests) ? s.requests : 0;
    const tokens = Number.isFinite(s.tokens) ? s.tokens : 0;
    if (requests > 0 || tokens > 0) this.queue(keyId, { entry: s.entry, requests: -requests, tokens: -tokens }, []);
  }

  private queue(keyId: string, delta: LimitDelta | null, leases: readonly string[]): void {
    let p = this.pending.get(keyId);
    if (!p) this.pending.set(keyId, (p = { keys: limitKeys(keyId), deltas: [], leases: [] }));
    if (delta) p.deltas.push(delta);
    for (const id of leases) p.leases.push(id);
    if (!this.scheduled) {
      this.scheduled = true;
      setImmediate(() => void this.flush());
    }
  }

  /**
   * Redis is unreachable: admits against this instance's share of the limits (floor(limit /
   * live instances), at least 1), so N instances never let N × the limit through.
   */
  admitLocally(key: KeyContext, c: LimitCall): RateHold {
    const n = Math.max(1, this.liveInstances());
    const share = (l: number | null) => (l === null ? null : Math.max(1, Math.floor(l / n)));
    const limits = { rpm: share(c.limits.rpm), tpm: share(c.limits.tpm), concurrency: share(c.limits.concurrency) };
    let w = this.local.get(key.id);
    if (!w) this.local.set(key.id, (w = new LimitWindow()));
    const ask = { ...c.ask, tokens: limits.tpm === null ? c.ask.tokens : Math.min(c.ask.tokens, limits.tpm) };
    const v = w.admit(limits, ask, Date.now(), Number.MAX_SAFE_INTEGER);
    return this.admitted(key, { ...c, limits, ask }, v, true);
  }

  /** Settlement: the tokens not used go back to the window, and the leases are given back. */
  release(hold: RateHold, actualTokens: number | null): void {
    const delta = actualTokens === null ? 0 : Math.min(0, actualTokens - hold.tokens);
    let leases = hold.leaseIds;
    if (hold.batch && --hold.batch.left === 0) leases = hold.batch.leaseIds;
    if (delta === 0 && leases.length === 0) return;
    if (hold.local) {
      this.local.get(hold.keyId)?.release(hold.entry, delta, leases);
      return;
    }
    const set = this.held.get(hold.keyId);
    if (set) {
      for (const id of leases) set.delete(id);
      if (!set.size) this.held.delete(hold.keyId);
    }
    this.queue(hold.keyId, delta !== 0 ? { entry: hold.entry, requests: 0, tokens: delta } : null, leases);
  }

  /** This turn's refunds and lease returns: one call per key. A failure leaves them to expire. */
  async flush(): Promise<void> {
    this.scheduled = false;
    const pending = this.pending;
    this.pending = new Map();
    await Promise.all([...pending.values()].map((p) =>
      this.ctx.kv.releaseLimits(p.keys, p.deltas, p.leases).catch((e) =>
        this.ctx.log.warn({ err: e instanceof Error ? e.message : String(e) }, "rate-limit release failed; the leases expire on their own"))));
  }

  private startRenewing(): void {
    if (this.renewTimer) return;
    this.renewTimer = setInterval(() => void this.renew(), RENEW_EVERY_MS);
    this.renewTimer.unref?.();
  }

  /** Keeps the leases of running requests alive (a long stream outlives LEASE_TTL_MS). */
  async renew(): Promise<void> {
    if (!this.held.size && this.renewTimer) {
      clearInterval(this.renewTimer);
      this.renewTimer = null;
      return;
    }
    await Promise.all([...this.held].map(([keyId, ids]) =>
      this.ctx.kv.renewLeases(limitKeys(keyId), LEASE_TTL_MS, [...ids]).catch(() => {})));
    const now = Date.now();
    for (const [id, w] of this.local) if (w.idle(now)) this.local.delete(id);
    for (const [id, until] of this.over) if (until <= now) this.over.delete(id);
    this.seen.prune(now);
  }

  async stop(): Promise<void> {
    for (const id of [...this.slices.keys()]) this.closeSlice(id);
    if (this.renewTimer) clearInterval(this.renewTimer);
    this.renewTimer = null;
    await this.flush();
  }
}
