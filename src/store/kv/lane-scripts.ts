// The lane cooldowns' scripts (docs/behaviour.md "Lane cooldowns"): the same steps as
// lane-cooldown.ts on the same record, a hash of one lane (f, w, u, l, p), on Redis's clock so
// every instance reads the same time. Each touches one key: it runs unchanged on Redis Cluster.
import type Redis from "ioredis";
import type { LaneFailCall, LaneVerdict, ProbeVerdict } from "./lane-cooldown.ts";

const NOW = `
local now
if ARGV[1] ~= '' then now = tonumber(ARGV[1]) else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end`;

// LANE_FAIL: one retryable failure.
//   KEYS[1] the lane's record
//   ARGV[1] now (ms; empty: Redis's clock)  ARGV[2] threshold  ARGV[3] window (ms)  ARGV[4] base (ms)
//   ARGV[5] max (ms)  ARGV[6] Retry-After (ms; -1: none)  ARGV[7] immediate (0 | 1)  ARGV[8] probe (0 | 1)
//   → {until, level, failures, cooled (0 | 1)}
const LANE_FAIL = `${NOW}
local s = redis.call('HMGET', KEYS[1], 'f', 'w', 'u', 'l', 'p')
local f, w, u, l = tonumber(s[1] or '0'), tonumber(s[2] or tostring(now)), tonumber(s[3] or '0'), tonumber(s[4] or '0')
local threshold, window, base, max = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local retry = tonumber(ARGV[6])
local memory = 2 * max
if u > now and ARGV[8] ~= '1' and retry < 0 then return {u, l, 0, 0} end
local cool = ARGV[8] == '1' or ARGV[7] == '1' or retry >= 0
if not cool then
  if now - w > window then f = 0; w = now end
  f = f + 1
  cool = f >= threshold
end
if not cool then
  redis.call('HSET', KEYS[1], 'f', f, 'w', w)
  local ttl = window
  if l > 0 and memory > ttl then ttl = memory end
  redis.call('PEXPIRE', KEYS[1], math.ceil(ttl))
  return {0, l, f, 0}
end
l = l + 1
local d
if retry >= 0 then d = math.min(retry, max) else d = math.min(base * 2 ^ (l - 1), max) end
d = math.floor(d)
u = now + d
redis.call('HSET', KEYS[1], 'f', 0, 'w', now, 'u', u, 'l', l, 'p', 0)
redis.call('PEXPIRE', KEYS[1], math.ceil(d + memory))
return {u, l, 0, 1}`;

// LANE_PROBE: may this request try a lane held as cooling?
//   KEYS[1] the lane's record   ARGV[1] now (ms; empty: Redis's clock)   ARGV[2] probe ttl (ms)
//   → {granted (0 | 1), until, level}
const LANE_PROBE = `${NOW}
local s = redis.call('HMGET', KEYS[1], 'u', 'l', 'p')
local u, l, p = tonumber(s[1] or '0'), tonumber(s[2] or '0'), tonumber(s[3] or '0')
if l == 0 then return {1, 0, 0} end
if u > now then return {0, u, l} end
if p > now then return {0, p, l} end
local ttl = tonumber(ARGV[2])
redis.call('HSET', KEYS[1], 'p', now + ttl)
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return {1, u, l}`;

export type LaneCmds = {
  gwLaneFail(key: string, ...args: Array<string | number>): Promise<number[]>;
  gwLaneProbe(key: string, now: string | number, ttlMs: number): Promise<number[]>;
};

export function defineLaneCommands(r: Redis): void {
  r.defineCommand("gwLaneFail", { numberOfKeys: 1, lua: LANE_FAIL });
  r.defineCommand("gwLaneProbe", { numberOfKeys: 1, lua: LANE_PROBE });
}

export async function laneFail(r: LaneCmds, key: string, c: LaneFailCall): Promise<LaneVerdict> {
  const x = await r.gwLaneFail(key, c.now ?? "", c.threshold, Math.round(c.windowMs), Math.round(c.baseMs), Math.round(c.maxMs),
    c.retryAfterMs === null ? -1 : Math.max(0, Math.round(c.retryAfterMs)), c.immediate ? 1 : 0, c.probe ? 1 : 0);
  return { untilMs: Number(x[0]), level: Number(x[1]), failures: Number(x[2]), cooled: Number(x[3]) === 1 };
}

export async function laneProbe(r: LaneCmds, key: string, probeTtlMs: number, now?: number): Promise<ProbeVerdict> {
  const x = await r.gwLaneProbe(key, now ?? "", Math.round(probeTtlMs));
  return { granted: Number(x[0]) === 1, untilMs: Number(x[1]), level: Number(x[2]) };
}
