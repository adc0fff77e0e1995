// Redis KV through ioredis. Budget operations are Lua scripts so check-and-add is atomic across
// every gateway instance sharing this Redis. Pub/sub uses a second connection, as Redis requires.
import Redis from "ioredis";
import type { KV, LedgerEntry, ReserveResult } from "./types.ts";

// ADMISSION: one script call per admitted budgeted request, over keys of ONE routing key only
// (every key under the hash tag `gw:{k:<id>}:`, so it runs unchanged on Redis Cluster).
//   KEYS[1] the month's budget counter (nano-dollars)     KEYS[2] the key's in-flight ledger (hash)
//   ARGV[1] amount (worst case)  ARGV[2] min (prompt + a useful answer)  ARGV[3] limit (budget)
//   ARGV[4] counter ttl (s)      ARGV[5] request id      ARGV[6] ledger entry (the grant is appended)
//   → {ok, total, missing, granted}: the whole amount when it fits, else what remains below the
//     limit when that covers min, else nothing; `missing` when the counter must be seeded first.
// Idempotent by request id: a resent call (ioredis after a reconnect) finds its ledger entry and
// returns the grant it already made. Sections that join later (per-key GCRA request/token buckets,
// concurrency leases) append their KEYS and ARGV after these and refuse before anything is added.
const RESERVE = `
local prev = ARGV[5] ~= '' and redis.call('HGET', KEYS[2], ARGV[5])
if prev then
  return {1, tonumber(redis.call('GET', KEYS[1]) or '0'), 0, tonumber(string.match(prev, '([^|]*)$'))}
end
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
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], ARGV[5], ARGV[6] .. '|' .. amount) end
return {1, total, 0, amount}`;

// LEDGER: one call per routing key and month per event-loop turn, carrying every in-flight entry
// of keys without a budget and every settlement of that turn, each list packed in one argument
// (one string to encode instead of hundreds of arguments).
//   KEYS[1] counter  KEYS[2] in-flight ledger  KEYS[3] settled markers (this minute)  KEYS[4] (last minute)
//   ARGV[1] counter ttl  ARGV[2] entries "id\tentry|grant\n…"  ARGV[3] settlements "id\tactual\treserved\n…"
// A settlement removes its ledger entry and applies actual − reserved; one whose entry is gone
// (Redis restarted, or a reconciler wrote it off) adds its full cost; a settled marker (kept two
// minutes) makes a resent settlement a no-op. → the sum to add to a counter that had to be seeded
// (-1 when the counter exists).
const LEDGER = `
for id, v in string.gmatch(ARGV[2], '([^\\t\\n]+)\\t([^\\n]*)\\n') do
  if redis.call('HEXISTS', KEYS[3], id) == 0 and redis.call('HEXISTS', KEYS[4], id) == 0 then
    redis.call('HSET', KEYS[2], id, v)
  end
end
local delta, full, marked = 0, 0, false
for id, a, r in string.gmatch(ARGV[3], '([^\\t\\n]+)\\t([^\\t\\n]+)\\t([^\\n]+)\\n') do
  local actual, reserved = tonumber(a), tonumber(r)
  if redis.call('HDEL', KEYS[2], id) == 1 then
    delta = delta + actual - reserved
    full = full + actual
    redis.call('HSET', KEYS[3], id, '1')
    marked = true
  elseif redis.call('HEXISTS', KEYS[3], id) == 0 and redis.call('HEXISTS', KEYS[4], id) == 0 then
    delta = delta + actual
    full = full + actual
    redis.call('HSET', KEYS[3], id, '1')
    marked = true
  end
end
if marked then redis.call('EXPIRE', KEYS[3], 180) end
if redis.call('EXISTS', KEYS[1]) == 0 then return full end
if delta ~= 0 then
  redis.call('INCRBY', KEYS[1], delta)
  if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
end
return -1`;

// REASSERT (after Redis lost its state): puts an instance's own in-flight entries back and adds
// their reservations to the rebuilt counter, each once.
//   KEYS[1] counter  KEYS[2] in-flight ledger  ARGV[1] ttl, then (request id, entry, nano) triples.
const REASSERT = `
local add = 0
for i = 2, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then add = add + tonumber(ARGV[i + 2]) end
end
if add ~= 0 and redis.call('EXISTS', KEYS[1]) == 1 then redis.call('INCRBY', KEYS[1], add) end
return add`;

// WRITE-OFF (reconciler): removes a dead instance's in-flight entry and marks it settled, so a late
// settlement cannot charge it twice. KEYS[1] in-flight ledger  KEYS[2] settled markers  ARGV[1] id.
const WRITE_OFF = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], '1')
redis.call('EXPIRE', KEYS[2], 180)
return 1`;

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
export const COMMAND_TIMEOUT_MS = 500;

export type Cmds = Redis & {
  gwReserve(counter: string, ledger: string, amount: number, min: number, limit: number, ttl: number, id: string, entry: string): Promise<[number, number, number, number]>;
  gwLedger(counter: string, ledger: string, settledNow: string, settledPrev: string, ttl: number, entries: string, settles: string): Promise<number>;
  gwReassert(counter: string, ledger: string, ...args: Array<string | number>): Promise<number>;
  gwWriteOff(ledger: string, settled: string, id: string): Promise<number>;
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
    this.r.defineCommand("gwReserve", { numberOfKeys: 2, lua: RESERVE });
    this.r.defineCommand("gwLedger", { numberOfKeys: 4, lua: LEDGER });
    this.r.defineCommand("gwReassert", { numberOfKeys: 2, lua: REASSERT });
    this.r.defineCommand("gwWriteOff", { numberOfKeys: 2, lua: WRITE_OFF });
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
  async reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number, entry?: LedgerEntry): Promise<ReserveResult> {
    const [ok, total, missing, granted] = await this.r.gwReserve(key, entry?.ledger ?? `${key}:none`, Math.round(amount), Math.round(min), Math.round(limit), Math.ceil(ttlSeconds), entry?.id ?? "", entry?.value ?? "");
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
  /** The ioredis client, for the money ledger's own scripts and streams (relay/budget/ledger.ts). */
  get client(): Cmds {
    return this.r;
  }

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
