// Redis KV through ioredis. Budget operations are Lua scripts so check-and-add is atomic across
// every gateway instance sharing this Redis. Pub/sub uses a second connection, as Redis requires.
import type Redis from "ioredis";
import type { RedisTarget } from "../../config.ts";
import { COMMAND_TIMEOUT_MS, connectRedis, describeRedis, writable } from "./connect.ts";
import type { KV, LedgerEntry, LimitCall, LimitDelta, LimitKeys, ReserveResult } from "./types.ts";
import { verdict } from "./types.ts";
import { watchReplies } from "./reply-watchdog.ts";
import { defineLedgerCommands, type LedgerCmds } from "./ledger-scripts.ts";
import { defineLaneCommands, laneFail, laneProbe, type LaneCmds } from "./lane-scripts.ts";
import type { LaneFailCall, LaneVerdict, ProbeVerdict } from "./lane-cooldown.ts";

// ADMISSION: one script call per admitted request that is budgeted or rate-limited, over keys of
// ONE routing key only (every key under the hash tag `gw:{k:<id>}:`, so it runs unchanged on Redis
// Cluster). Budget first (402 outranks 429: CONTRACT §8), then the limits, and nothing is added
// unless everything fits.
//   KEYS[1] the month's budget counter (nano-dollars)     KEYS[2] the key's in-flight ledger (hash)
//   KEYS[3] rate window: entry id → admitted at (ms, sorted set)
//   KEYS[4] rate amounts: entry id → "requests tokens", plus the sums `#n` and `#t` (hash)
//   KEYS[5] concurrency leases: lease id → expires at (ms, sorted set)
//   ARGV[1] amount (worst case)  ARGV[2] min (prompt + a useful answer)  ARGV[3] limit (budget; -1: none)
//   ARGV[4] counter ttl (s)      ARGV[5] request id      ARGV[6] ledger entry (the grant is appended)
//   ARGV[7..] limits, absent when the key has none: rpm, requests asked, tpm, tokens asked, cap,
//   leases asked, lease ttl (ms), window entry id, now (ms; empty: Redis's own clock), ahead (ms: the
//   entry counts from now until `ahead` + 60 s, for a slice used over the next `ahead` ms). 0 = no limit.
//   → {ok, total, missing, granted, refused (0 | 1 requests | 2 tokens | 3 concurrency), retry ms
//      (-1: never fits), remaining requests, reset ms, remaining tokens, reset ms}
// The budget grants the whole amount when it fits, else what remains below the limit when that
// covers min, else nothing; `missing` when the counter must be seeded first. Requests and tokens
// count over a sliding 60 s window of entries (limit-window.ts explains why and holds the
// same arithmetic in process). Idempotent by request id: a resent call (ioredis after a reconnect)
// finds its ledger entry and returns the grant it already made.
const ADMIT = `
local prev = ARGV[5] ~= '' and redis.call('HGET', KEYS[2], ARGV[5])
if prev then
  return {1, tonumber(redis.call('GET', KEYS[1]) or '0'), 0, tonumber(string.match(prev, '([^|]*)$')), 0, 0, -1, 0, -1, 0}
end
local budgeted = ARGV[3] ~= '-1'
local total, amount = 0, 0
if budgeted then
  local v = redis.call('GET', KEYS[1])
  if not v then return {0, 0, 1, 0, 0, 0, -1, 0, -1, 0} end
  total = tonumber(v)
  amount = tonumber(ARGV[1])
  local room = tonumber(ARGV[3]) - total
  if amount > room then
    if tonumber(ARGV[2]) > room then return {0, total, 0, 0, 0, 0, -1, 0, -1, 0} end
    amount = room
  end
end
local remN, remT, reset = -1, -1, 0
if ARGV[7] then
  local W = 60000
  local now
  if ARGV[15] ~= '' then now = tonumber(ARGV[15]) else
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local rpm, n, tpm, tok = tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local cap, nl, lttl, id = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13]), ARGV[14]
  local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now - W)
  if #old > 0 then
    local dn, dt = 0, 0
    for i = 1, #old do
      local e = redis.call('HGET', KEYS[4], old[i])
      if e then
        local a, b = string.match(e, '^(%d+) (%d+)$')
        dn = dn + tonumber(a)
        dt = dt + tonumber(b)
        redis.call('HDEL', KEYS[4], old[i])
      end
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - W)
    if dn ~= 0 then redis.call('HINCRBY', KEYS[4], '#n', -dn) end
    if dt ~= 0 then redis.call('HINCRBY', KEYS[4], '#t', -dt) end
  end
  local usedN = tonumber(redis.call('HGET', KEYS[4], '#n') or '0')
  local usedT = tonumber(redis.call('HGET', KEYS[4], '#t') or '0')
  local function waitFor(over, field)
    local list = redis.call('ZRANGE', KEYS[3], 0, -1, 'WITHSCORES')
    local freed = 0
    for i = 1, #list, 2 do
      local e = redis.call('HGET', KEYS[4], list[i])
      if e then
        local a, b = string.match(e, '^(%d+) (%d+)$')
        freed = freed + tonumber(field == 1 and a or b)
        if freed >= over then return tonumber(list[i + 1]) + W - now end
      end
    end
    return -1
  end
  local refused, wait = 0, 0
  if rpm > 0 and usedN + n > rpm then
    refused = 1
    wait = n > rpm and -1 or waitFor(usedN + n - rpm, 1)
  elseif tpm > 0 and usedT + tok > tpm then
    refused = 2
    wait = tok > tpm and -1 or waitFor(usedT + tok - tpm, 2)
  elseif cap > 0 then
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', now)
    if redis.call('ZCARD', KEYS[5]) + nl > cap then
      refused = 3
      wait = nl > cap and -1 or 1000
    end
  end
  if refused == 0 then
    if rpm > 0 or tpm > 0 then
      redis.call('ZADD', KEYS[3], now + tonumber(ARGV[16] or '0'), id)
      redis.call('HSET', KEYS[4], id, n .. ' ' .. tok)
      usedN = redis.call('HINCRBY', KEYS[4], '#n', n)
      usedT = redis.call('HINCRBY', KEYS[4], '#t', tok)
      redis.call('PEXPIRE', KEYS[3], W + 61000)
      redis.call('PEXPIRE', KEYS[4], W + 61000)
    end
    if cap > 0 then
      for i = 1, nl do redis.call('ZADD', KEYS[5], now + lttl, id .. ':' .. i) end
      redis.call('PEXPIRE', KEYS[5], lttl + 1000)
    end
  end
  local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
  if first[2] then reset = math.max(0, tonumber(first[2]) + W - now) end
  if rpm > 0 then remN = math.max(0, rpm - usedN) end
  if tpm > 0 then remT = math.max(0, tpm - usedT) end
  if refused ~= 0 then return {0, total, 0, 0, refused, wait, remN, reset, remT, reset} end
end
if budgeted then
  total = redis.call('INCRBY', KEYS[1], amount)
  if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[4]) end
end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[2], ARGV[5], ARGV[6] .. '|' .. amount) end
return {1, total, 0, amount, 0, 0, remN, reset, remT, reset}`;

// RELEASE (settlements of one routing key in one event-loop turn): lowers window entries' requests
// and tokens (token refunds to the real count; a slice's unused part) and gives leases back.
//   KEYS[1] rate amounts  KEYS[2] leases
//   ARGV[1] "entry\\trequest delta\\ttoken delta\\n…"  ARGV[2] "lease id\\n…" (packed from the typed
//   records by releaseLimits() below, the only place they are strings). An entry already out of the window is skipped.
const RELEASE = `
for id, dn, dt in string.gmatch(ARGV[1], '([^\\t\\n]+)\\t([^\\t\\n]+)\\t([^\\n]+)\\n') do
  local e = redis.call('HGET', KEYS[1], id)
  if e then
    local a, b = string.match(e, '^(%d+) (%d+)$')
    local na = math.max(0, tonumber(a) + tonumber(dn))
    local nb = math.max(0, tonumber(b) + tonumber(dt))
    if na ~= tonumber(a) or nb ~= tonumber(b) then
      redis.call('HSET', KEYS[1], id, na .. ' ' .. nb)
      if na ~= tonumber(a) then redis.call('HINCRBY', KEYS[1], '#n', na - tonumber(a)) end
      if nb ~= tonumber(b) then redis.call('HINCRBY', KEYS[1], '#t', nb - tonumber(b)) end
    end
  end
end
for id in string.gmatch(ARGV[2], '([^\\n]+)\\n') do redis.call('ZREM', KEYS[2], id) end
return 0`;

// RENEW: the holder of running requests pushes their leases' expiry out (on Redis's clock).
//   KEYS[1] leases  ARGV[1] ttl (ms)  ARGV[2..] lease ids (only those still held are renewed).
const RENEW = `
local t = redis.call('TIME')
local until_ = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do redis.call('ZADD', KEYS[1], 'XX', until_, ARGV[i]) end
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[1]) + 1000)
return 0`;

const ADJUST = `
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
local total = redis.call('INCRBY', KEYS[1], ARGV[1])
if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[2]) end
return total`;

const INCR_WINDOW = `
local n = redis.call('INCR', KEYS[1])
if n == 1 or redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return n`;

export { COMMAND_TIMEOUT_MS };

export type Cmds = Redis & LedgerCmds & LaneCmds & {
  gwAdmit(counter: string, ledger: string, log: string, amounts: string, leases: string, ...args: Array<string | number>): Promise<number[]>;
  gwRelease(amounts: string, leases: string, deltas: string, leaseIds: string): Promise<number>;
  gwRenew(leases: string, ttlMs: number, ...ids: string[]): Promise<number>;
  gwAdjust(key: string, delta: number, ttl: number): Promise<number | null>;
  gwIncrWindow(key: string, ttl: number): Promise<number>;
};

export class RedisKV implements KV {
  readonly kind = "redis" as const;
  private r: Cmds;
  private sub: Redis | null = null;
  private handlers = new Map<string, Set<(m: string) => void>>();
  private stopWatchdog: () => void;
  /** Set at the first "ready": from then on a connection that is not ready is an outage, not a boot. */
  private wasReady = false;

  private target: RedisTarget;

  /** `target`: how to reach Redis (a bare string is a redis:// URL). */
  constructor(target: RedisTarget | string) {
    this.target = typeof target === "string" ? { mode: "url", url: target } : target;
    // Outages answer fast (CONTRACT §7; connect.ts): a command gets about COMMAND_TIMEOUT_MS
    // (reply-watchdog.ts: one timer per connection, not ioredis' commandTimeout and its timer per
    // command; a Cluster's nodes keep commandTimeout, having no single queue to watch); while the
    // connection is down commands fail at once. Callers decide what a failure means (budgeted
    // inference: 503 budget_unavailable; settlements of keys without a budget: buffered, retried).
    this.r = connectRedis(this.target, "commands") as Cmds;
    this.r.defineCommand("gwAdmit", { numberOfKeys: 5, lua: ADMIT });
    this.r.defineCommand("gwRelease", { numberOfKeys: 2, lua: RELEASE });
    this.r.defineCommand("gwRenew", { numberOfKeys: 1, lua: RENEW });
    defineLedgerCommands(this.r);
    defineLaneCommands(this.r);
    this.r.defineCommand("gwAdjust", { numberOfKeys: 1, lua: ADJUST });
    this.r.defineCommand("gwIncrWindow", { numberOfKeys: 1, lua: INCR_WINDOW });
    this.r.on("error", () => {}); // surfaced by the failing command and /readyz, not as a crash
    this.r.once("ready", () => { this.wasReady = true; });
    this.stopWatchdog = watchReplies(this.r, COMMAND_TIMEOUT_MS);
  }

  async get(key: string) { return this.r.get(key); }
  async set(key: string, value: string, ttlSeconds?: number) {
    if (ttlSeconds) await this.r.set(key, value, "EX", Math.ceil(ttlSeconds));
    else await this.r.set(key, value);
  }
  async del(key: string) { await this.r.del(key); }
  async incrWindow(key: string, ttlSeconds: number) { return Number(await this.r.gwIncrWindow(key, Math.ceil(ttlSeconds))); }
  async reserve(key: string, amount: number, min: number, limit: number, ttlSeconds: number, entry?: LedgerEntry, limits?: LimitCall): Promise<ReserveResult> {
    const ledger = entry?.ledger ?? `${key}:none`;
    const args: Array<string | number> = [Math.round(amount), Math.round(min), limit < 0 ? -1 : Math.round(limit), Math.ceil(ttlSeconds), entry?.id ?? "", entry?.value ?? ""];
    const lk = limits?.keys;
    if (limits) {
      const { limits: l, ask } = limits;
      args.push(l.rpm ?? 0, ask.requests, l.tpm ?? 0, ask.tokens, l.concurrency ?? 0, ask.leases, limits.leaseTtlMs, ask.entry, limits.now ?? "", limits.aheadMs ?? 0);
    }
    // Without limits the three window keys are never touched; they still name the same slot.
    const r = await this.r.gwAdmit(key, ledger, lk?.log ?? `${key}:w`, lk?.amounts ?? `${key}:a`, lk?.leases ?? `${key}:l`, ...args);
    const n = (i: number) => Number(r[i] ?? 0);
    return {
      ok: n(0) === 1, total: n(1), missing: n(2) === 1, granted: n(3),
      limits: limits ? verdict(n(4), n(5), n(6), n(7), n(8), n(9)) : undefined,
    };
  }
  async releaseLimits(keys: LimitKeys, deltas: readonly LimitDelta[], leaseIds: readonly string[]): Promise<void> {
    // RELEASE's argument format, built here at the Redis boundary (one string per list).
    let d = "";
    for (const x of deltas) d += `${x.entry}\t${x.requests}\t${x.tokens}\n`;
    let l = "";
    for (const id of leaseIds) l += `${id}\n`;
    await this.r.gwRelease(keys.amounts, keys.leases, d, l);
  }
  async renewLeases(keys: LimitKeys, ttlMs: number, ids: string[]): Promise<void> {
    if (ids.length) await this.r.gwRenew(keys.leases, ttlMs, ...ids);
  }
  async adjust(key: string, delta: number, ttlSeconds: number) {
    const v = await this.r.gwAdjust(key, Math.round(delta), Math.ceil(ttlSeconds));
    return v === null ? null : Number(v);
  }
  async seed(key: string, value: number, ttlSeconds: number) {
    await this.r.set(key, String(Math.round(value)), "EX", Math.ceil(ttlSeconds), "NX");
  }
  async addingMembers(adding: string) { return await this.r.smembers(adding); }
  async seedExcept(key: string, adding: string, inflight: string, value: number, ttlSeconds: number, seen: readonly string[]) {
    let packed = "";
    for (const id of seen) packed += `${id}\n`;
    return (await this.r.gwSeed(key, adding, inflight, Math.round(value), Math.ceil(ttlSeconds), packed)) >= 0;
  }
  async getNumber(key: string) {
    const v = await this.r.get(key);
    return v === null ? null : Number(v);
  }
  laneFailed(key: string, call: LaneFailCall): Promise<LaneVerdict> { return laneFail(this.r, key, call); }
  laneProbe(key: string, probeTtlMs: number, now?: number): Promise<ProbeVerdict> { return laneProbe(this.r, key, probeTtlMs, now); }
  async publish(channel: string, message: string) { await this.r.publish(channel, message); }
  async subscribe(channel: string, handler: (m: string) => void) {
    if (!this.sub) {
      this.sub = connectRedis(this.target, "subscriber");
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
  /** The ioredis client, for the money ledger's own scripts and streams (money/ledger/). */
  get client(): Cmds {
    return this.r;
  }

  /**
   * Waits for the first connection (commands are not queued while there is none), then checks
   * that it can write: a replica (a demoted master, REDIS_URL on the wrong node) answers PING but
   * refuses every write, so /readyz must not call it ready. A connection that was ready and is
   * down now (a killed master, before the Sentinels promote another) fails at once, as commands
   * do: waiting for the reconnection would let /readyz answer 200 through a short outage.
   */
  async ping() {
    if (this.r.status !== "ready") {
      if (this.wasReady) throw new Error(`Redis (${describeRedis(this.target)}) is not connected (${this.r.status})`);
      await new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => { cleanup(); reject(new Error(`Redis (${describeRedis(this.target)}) did not become ready within 5 s`)); }, 5000);
        const ok = () => { cleanup(); resolve(); };
        const bad = (e: Error) => { if (this.r.status === "end") { cleanup(); reject(e); } };
        const cleanup = () => { clearTimeout(t); this.r.off("ready", ok); this.r.off("error", bad); };
        this.r.on("ready", ok);
        this.r.on("error", bad);
      });
    }
    if (!(await writable(this.r))) throw new Error(`Redis (${describeRedis(this.target)}) answers but is not a writable master`);
  }
  async close() {
    this.stopWatchdog();
    this.sub?.disconnect();
    await this.r.quit().catch(() => this.r.disconnect());
  }
}
