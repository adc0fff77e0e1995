// Redis KV through ioredis. Budget operations are Lua scripts so check-and-add is atomic across
// every gateway instance sharing this Redis. Pub/sub uses a second connection, as Redis requires.
import Redis from "ioredis";
import type { KV, ReserveResult } from "./types.ts";

// KEYS[1] counter; ARGV amount, min, limit, ttl. Returns {ok, total, missing, granted}: the whole
// amount when it fits, else what remains below the limit when that covers min, else nothing.
const RESERVE = `
local v = redis.call('GET', KEYS[1])
if not v then return {0, 0, 1, 0} end
local total = tonumber(v)
local amount = tonumber(ARGV[1])
local room = tonumber(ARGV[3]) - total
if amount > room then
  if tonumber(ARGV[2]) > room then return {0, total, 0, 0} end
  amount = room
end
total = redis.call('INCRBY', KEYS[1], amount)
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[4]) end
return {1, total, 0, amount}`;

const ADJUST = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return total`;

const INCR_WINDOW = `
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n`;

/** Longest a Redis command may take before it fails (a frozen or unreachable Redis). */
export const COMMAND_TIMEOUT_MS = 300;

type Cmds = Redis & {
  gwReserve(key: string, amount: number, min: number, limit: number, ttl: number): Promise<[number, number, number, number]>;
  gwAdjust(key: string, delta: number, ttl: number): Promise<number | null>;
  gwIncrWindow(key: string, ttl: number): Promise<number>;
};

export class RedisKV implements KV {
  readonly kind = "redis" as const;
  private r: Cmds;
  private sub: Redis | null = null;
  private handlers = new Map<string, Set<(m: string) => void>>();

  constructor(private url: string) {
    // Outages answer fast (CONTRACT §7): a command gets COMMAND_TIMEOUT_MS, never more; while the
    // connection is down commands fail at once instead of waiting in an unbounded offline queue;
    // reconnects are retried every few hundred ms. Callers decide what a failure means (budgeted
    // inference: 503 budget_unavailable; settlements of keys without a budget: buffered, retried).
    this.r = new Redis(url, {
      commandTimeout: COMMAND_TIMEOUT_MS,
      connectTimeout: 1000,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      retryStrategy: (attempt) => Math.min(50 * attempt, 500),
      enableAutoPipelining: true,
      lazyConnect: false,
    }) as Cmds;
    this.r.defineCommand("gwReserve", { numberOfKeys: 1, lua: RESERVE });
    this.r.defineCommand("gwAdjust", { numberOfKeys: 1, lua: ADJUST });
    this.r.defineCommand("gwIncrWindow", { numberOfKeys: 1, lua: INCR_WINDOW });
    this.r.on("error", () => {}); // surfaced by the failing command and /readyz, not as a crash
  }

  async get(key: string) { return this.r.get(key); }
  async set(key: string, value: string, ttlSeconds?: number) {
    if (ttlSeconds) await this.r.set(key, value, "EX", Math.ceil(ttlSeconds));
    else await this.r.set(key, value);
  }
  async del(key: string) { await this.r.del(key); }
  async incrWindow(key: string, ttlSeconds: number) { return Number(await this.r.gwIncrWindow(key, Math.ceil(ttlSeconds))); }
  async reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number): Promise<ReserveResult> {
    const [ok, total, missing, granted] = await this.r.gwReserve(key, Math.round(amount), Math.round(min), Math.round(limit), Math.ceil(ttlSeconds));
    return { ok: ok === 1, total: Number(total), missing: missing === 1, granted: Number(granted) };
  }
  async adjust(key: string, delta: number, ttlSeconds: number) {
    const v = await this.r.gwAdjust(key, Math.round(delta), Math.ceil(ttlSeconds));
    return v === null ? null : Number(v);
  }
  async seed(key: string, value: number, ttlSeconds: number) {
    await this.r.set(key, String(Math.round(value)), "EX", Math.ceil(ttlSeconds), "NX");
  }
  async getNumber(key: string) {
    const v = await this.r.get(key);
    return v === null ? null : Number(v);
  }
  async publish(channel: string, message: string) { await this.r.publish(channel, message); }
  async subscribe(channel: string, handler: (m: string) => void) {
    if (!this.sub) {
      this.sub = new Redis(this.url, { maxRetriesPerRequest: null });
      this.sub.on("error", () => {});
      this.sub.on("message", (ch: string, msg: string) => {
        for (const h of this.handlers.get(ch) ?? []) h(msg);
      });
    }
    let set = this.handlers.get(channel);
    if (!set) {
      this.handlers.set(channel, (set = new Set()));
      await this.sub.subscribe(channel);
    }
    set.add(handler);
  }
  /** Waits for the first connection (commands are not queued while there is none), then pings. */
  async ping() {
    if (this.r.status !== "ready") {
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => { cleanup(); reject(new Error(`Redis did not become ready within 5 s`)); }, 5000);
        const ok = () => { cleanup(); resolve(); };
        const bad = (e: Error) => { if (this.r.status === "end") { cleanup(); reject(e); } };
        const cleanup = () => { clearTimeout(t); this.r.off("ready", ok); this.r.off("error", bad); };
        this.r.on("ready", ok);
        this.r.on("error", bad);
      });
    }
    await this.r.ping();
  }
  async close() {
    this.sub?.disconnect();
    await this.r.quit().catch(() => this.r.disconnect());
  }
}
