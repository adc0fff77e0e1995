// In-process KV for the embedded default: single instance, same semantics as the Redis one.
import { LimitWindow } from "./limit-window.ts";
import type { KV, LimitCall, LimitDelta, LimitKeys, ReserveResult } from "./types.ts";
import { applyFailure, applyProbe, type LaneFailCall, type LaneRecord, type LaneVerdict, type ProbeVerdict } from "./lane-cooldown.ts";

interface Entry { value: string; expiresAt: number }

export class MemoryKV implements KV {
  readonly kind = "memory" as const;
  private map = new Map<string, Entry>();
  private subs = new Map<string, Set<(m: string) => void>>();
  /** Lane cooldown records (lane-cooldown.ts) by key, beside the plain values (del() drops either). */
  private lanes = new Map<string, { rec: LaneRecord; expiresAt: number }>();
  /** Rate-limit windows by their log key (one per routing key). */
  private windows = new Map<string, LimitWindow>();
  private sweeper: ReturnType<typeof setInterval>;

  constructor() {
    // Drop expired entries now and then so long-lived processes don't grow.
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const [k, e] of this.map) if (e.expiresAt <= now) this.map.delete(k);
      for (const [k, w] of this.windows) if (w.idle(now)) this.windows.delete(k);
      for (const [k, l] of this.lanes) if (l.expiresAt <= now) this.lanes.delete(k);
    }, 60_000);
    this.sweeper.unref?.();
  }

  private live(key: string): Entry | undefined {
    const e = this.map.get(key);
    if (!e) return undefined;
    if (e.expiresAt <= Date.now()) { this.map.delete(key); return undefined; }
    return e;
  }
  private put(key: string, value: string, ttlSeconds?: number, keepTtl = false) {
    const prev = keepTtl ? this.live(key) : undefined;
    const expiresAt = prev ? prev.expiresAt : ttlSeconds ? Date.now() + ttlSeconds * 1000 : Infinity;
    this.map.set(key, { value, expiresAt });
  }

  async get(key: string) { return this.live(key)?.value ?? null; }
  async set(key: string, value: string, ttlSeconds?: number) { this.put(key, value, ttlSeconds); }
  async del(key: string) { this.map.delete(key); this.lanes.delete(key); }
  async incrWindow(key: string, ttlSeconds: number) {
    const e = this.live(key);
    const n = (e ? Number(e.value) : 0) + 1;
    if (e) e.value = String(n); else this.put(key, String(n), ttlSeconds);
    return n;
  }
  async reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number, _entry?: unknown, limits?: LimitCall): Promise<ReserveResult> {
    // Budget first (402 outranks 429), then the limits; nothing is added unless both fit.
    let total = 0;
    let e: Entry | undefined;
    if (limit >= 0) {
      e = this.live(key);
      if (!e) return { ok: false, total: 0, missing: true, granted: 0 };
      total = Number(e.value);
      const room = limit - total;
      if (amount > room) {
        if (min > room) return { ok: false, total, missing: false, granted: 0 };
        amount = room;
      }
    }
    const v = limits ? this.window(limits.keys).admit(limits.limits, limits.ask, limits.now ?? Date.now(), limits.leaseTtlMs, limits.aheadMs) : undefined;
    if (v?.refused) return { ok: false, total, missing: false, granted: 0, limits: v };
    if (!e) return { ok: true, total, missing: false, granted: 0, limits: v };
    e.value = String(total + amount);
    if (e.expiresAt === Infinity) e.expiresAt = Date.now() + ttlSeconds * 1000;
    return { ok: true, total: total + amount, missing: false, granted: amount, limits: v };
  }
  private window(keys: LimitKeys): LimitWindow {
    let w = this.windows.get(keys.log);
    if (!w) this.windows.set(keys.log, (w = new LimitWindow()));
    return w;
  }
  async releaseLimits(keys: LimitKeys, deltas: readonly LimitDelta[], leaseIds: readonly string[]) {
    const w = this.windows.get(keys.log);
    if (!w) return;
    for (const d of deltas) w.release(d.entry, d.tokens, [], d.requests);
    if (leaseIds.length) w.release("", 0, leaseIds);
  }
  async renewLeases() {} // in process a lease lives until its request settles (ttl Infinity)
  async adjust(key: string, delta: number, _ttlSeconds: number) {
    const e = this.live(key);
    if (!e) return null;
    const n = Number(e.value) + delta;
    e.value = String(n);
    return n;
  }
  async seed(key: string, value: number, ttlSeconds: number) {
    if (!this.live(key)) this.put(key, String(value), ttlSeconds);
  }
  // In process there is no in-flight ledger and no other instance: nothing puts calls in an adding
  // set, so a rebuild leaves nothing out; the semantics stay those of the Redis scripts.
  private sets = new Map<string, Set<string>>();
  async addingMembers(adding: string) { return [...(this.sets.get(adding) ?? [])]; }
  async seedExcept(key: string, adding: string, _inflight: string, value: number, ttlSeconds: number, seen: readonly string[]) {
    if (this.live(key)) return true;
    const members = this.sets.get(adding) ?? new Set<string>();
    const read = new Set(seen);
    if (members.size !== read.size || [...members].some((m) => !read.has(m))) return false;
    this.put(key, String(Math.round(value)), ttlSeconds);
    return true;
  }
  async getNumber(key: string) {
    const e = this.live(key);
    return e ? Number(e.value) : null;
  }
  private laneRecord(key: string, now: number): LaneRecord | null {
    const l = this.lanes.get(key);
    if (!l) return null;
    if (l.expiresAt <= now) { this.lanes.delete(key); return null; }
    return l.rec;
  }
  async laneFailed(key: string, call: LaneFailCall): Promise<LaneVerdict> {
    const now = call.now ?? Date.now();
    const r = applyFailure(this.laneRecord(key, now), call, now);
    this.lanes.set(key, { rec: r.rec, expiresAt: now + r.ttlMs });
    return r.verdict;
  }
  async laneProbe(key: string, probeTtlMs: number, now = Date.now()): Promise<ProbeVerdict> {
    const r = applyProbe(this.laneRecord(key, now), now, probeTtlMs);
    const l = this.lanes.get(key);
    if (r.rec && l) { l.rec = r.rec; l.expiresAt = Math.max(l.expiresAt, now + probeTtlMs); }
    return r.verdict;
  }
  async publish(channel: string, message: string) {
    for (const h of this.subs.get(channel) ?? []) queueMicrotask(() => h(message));
  }
  async subscribe(channel: string, handler: (m: string) => void) {
    let set = this.subs.get(channel);
    if (!set) this.subs.set(channel, (set = new Set()));
    set.add(handler);
  }
  async ping() {}
  async close() { clearInterval(this.sweeper); this.map.clear(); this.sets.clear(); this.subs.clear(); this.windows.clear(); this.lanes.clear(); }
}
