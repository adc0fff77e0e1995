// The byte quotas of the response cache in Redis (docs/caching.md "Storage"): one script charges
// an entry's bytes to a counter and, for the account's, writes the entry in the same step, or
// refuses when the counter would pass its quota. Each counter keeps a sorted set of its entries
// by expiry and a hash of their sizes: every charge first gives back the bytes of entries past
// their expiry (a bounded batch; what is left waits for the next write, so the count only ever
// errs on refusing). The account's keys and its entries share one hash tag, the total's keys
// another, so each script touches one slot and runs on a Redis Cluster as it does on one node.

/** Bytes Redis spends on a key beyond its name and value (dict entry, object headers, expiry, our bookkeeping), rounded up. */
const OVERHEAD = 160;

/** What an entry is counted as: its key, its value and Redis's overhead for it. */
export function entrySize(key: string, value: string): number {
  return Buffer.byteLength(key) + Buffer.byteLength(value) + OVERHEAD;
}

export interface QuotaKeys {
  /** Sorted set: entry key → expiry (ms since epoch). */
  z: string;
  /** Hash: entry key → bytes counted. */
  sizes: string;
  /** The counter: bytes of the entries not yet given back. */
  used: string;
}

/** The hash tag of an account's cache keys: its entries (key.ts) and its quota's bookkeeping. */
export const accountTag = (accountId: string) => `{rc:${accountId}}`;

export const accountQuotaKeys = (accountId: string): QuotaKeys => {
  const t = `gw:rc:${accountTag(accountId)}`;
  return { z: `${t}:q:z`, sizes: `${t}:q:s`, used: `${t}:q:u` };
};

export const TOTAL_QUOTA_KEYS: QuotaKeys = { z: "gw:rc:{rc-total}:q:z", sizes: "gw:rc:{rc-total}:q:s", used: "gw:rc:{rc-total}:q:u" };

/** Entries given back per charge at most: a write's cost stays bounded however many expired at once. */
const TRIM_BATCH = 256;

/**
 * KEYS: the entry, then z, sizes, used of each counter charged (the total's and the account's
 * on one Redis node; one counter a call on a Cluster, whose slots differ). ARGV: member, size,
 * ttl ms, value ("" to count only: KEYS[1] then names a key of the counter's slot, never
 * written), then each counter's quota. 1: charged everywhere and the entry written; 0: a
 * counter would pass its quota, nothing charged. Redis's own clock decides
 * what has expired (instances' clocks may disagree).
 */
export const CHARGE = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local member, size, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local counters = (#KEYS - 1) / 3
local used, old = {}, {}
local fits = true
for c = 1, counters do
  local z, s, u = KEYS[3 * c - 1], KEYS[3 * c], KEYS[3 * c + 1]
  local n = tonumber(redis.call('GET', u) or '0')
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, ${TRIM_BATCH})
  for _, m in ipairs(gone) do n = n - tonumber(redis.call('HGET', s, m) or '0') end
  if #gone > 0 then
    redis.call('ZREM', z, unpack(gone))
    redis.call('HDEL', s, unpack(gone))
    if n < 0 then n = 0 end
    redis.call('SET', u, n, 'KEEPTTL')
  end
  if n < 0 then n = 0 end
  used[c] = n
  old[c] = tonumber(redis.call('HGET', s, member) or '0')
  if n - old[c] + size > tonumber(ARGV[4 + c]) then fits = false end
end
if not fits then return 0 end
if ARGV[4] ~= '' then redis.call('SET', KEYS[1], ARGV[4], 'PX', ttl) end
for c = 1, counters do
  local z, s, u = KEYS[3 * c - 1], KEYS[3 * c], KEYS[3 * c + 1]
  redis.call('ZADD', z, now + ttl, member)
  redis.call('HSET', s, member, size)
  redis.call('SET', u, used[c] - old[c] + size)
  -- The bookkeeping lives as long as its longest entry, then goes with it.
  local last = tonumber(redis.call('ZRANGE', z, -1, -1, 'WITHSCORES')[2])
  for _, k in ipairs({ z, s, u }) do redis.call('PEXPIREAT', k, last + 1000) end
end
return 1`;

/** KEYS: z, sizes, used. ARGV: member. Gives back a charge whose entry was not written after all. */
export const UNCHARGE = `
local size = tonumber(redis.call('HGET', KEYS[2], ARGV[1]) or '0')
if size == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
local used = tonumber(redis.call('GET', KEYS[3]) or '0') - size
if used < 0 then used = 0 end
redis.call('SET', KEYS[3], used, 'KEEPTTL')
return 1`;
