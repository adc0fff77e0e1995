// The money ledger's scripts (money/ledger/) and the month counter's rebuild, kept apart
// from redis.ts's admission scripts. Every script touches the keys of ONE routing key (the hash tag
// `gw:{k:<id>}:`), so each runs unchanged on Redis Cluster; EPOCH touches the deployment's epoch key.
//
// The adding set `gw:{k:<id>}:adding:<YYYY-MM>` (store/spend-counters.ts) closes the race of a
// counter rebuilt from Postgres while settlements are in flight: a settlement whose record already
// reached Postgres (through the usage stream or the instance's queue) but whose cost has not been
// applied to the counter yet must not be counted by the rebuild AND added by the settlement. The
// orderings, all decided inside single scripts:
//   - LEDGER finds the counter missing: its settlements' ids go into the set in that same step.
//     A rebuild that ran before it set the counter (SEED is atomic), so LEDGER would have found it
//     present and applied the settlement itself; one that runs after reads the ids.
//   - SEED reads the set and sets the counter only if the set is still what the rebuilder read
//     before querying Postgres (else it reads again): an id added between the read and the SET
//     (a LEDGER that found the counter missing meanwhile) cannot be counted and added both.
//     A member of the set whose in-flight entry exists (an entry put back by REASSERT) has its
//     reservation added, as the counter held it before.
//   - ADD_REBUILT adds a settlement's cost only if its id is still in the set, and removes it in
//     the same step: a resent ADD_REBUILT (ioredis after a reconnect) adds nothing; it refuses a
//     counter that is missing again (the caller rebuilds again).
//   - Redis restarted empty: the set went with the counter. Every instance puts its entries and
//     its settlements not yet applied back into the set (REASSERT) before the recovery barrier
//     passes (ledger/epoch.ts), and no counter is rebuilt before it has (admissions wait for it,
//     the ledger's own rebuilds check the epoch first, and a reader that finds the counter missing
//     answers from Postgres without writing it).
import type Redis from "ioredis";

// LEDGER: one call per routing key and month per event-loop turn, carrying every in-flight entry
// of keys without a budget and every settlement of that turn, each list packed in one argument
// (one string to encode instead of hundreds of arguments).
//   KEYS[1] counter  KEYS[2] in-flight ledger  KEYS[3] settled markers (this minute)  KEYS[4] (last minute)
//   ARGV[1] counter ttl  ARGV[2] entries "id\tentry|grant\n…"
//   ARGV[3] settlements "id\tactual\treserved\tlease\n…"
// A settlement removes its ledger entry and applies actual − reserved; one whose entry is gone
// (Redis restarted, or a reconciler wrote it off) adds its full cost; a settled marker (kept two
// minutes) makes a resent settlement a no-op. A request admitted from a budget lease (lease = the
// lease's id) removes its own entry (which holds nothing in the counter), takes its cost out of
// the lease's entry, which the counter already holds, and adds to the counter only what passes it;
// once the lease is gone (a reconciler gave back what it still held, or Redis lost it) it adds its
// whole cost. One whose entry a reconciler wrote off is marked settled: its `interrupted` record
// holds its cost, so it adds nothing. A lease's end (lease `*`) takes what the lease did not use
// out of the counter. → the sum to add to a counter that had to be seeded (-1 when the
// counter exists).
//   KEYS[5] the month's adding set  ARGV[4] ids this instance put in that set ("id\n…", empty on
//   the hot path: no command is run for it)
// The adding set (store/spend-counters.ts) holds the money calls whose records may already be in
// Postgres while their cost is still to be added on top of a rebuilt counter; every rebuild leaves
// their records out. A counter found missing puts this call's settlements with a cost in it, in
// this same step (the instance then rebuilds and adds them: ADD_REBUILT); a counter found present
// takes the ARGV[4] ids out as their cost is applied, in this same step.
const LEDGER = `
for id, v in string.gmatch(ARGV[2], '([^\\t\\n]+)\\t([^\\n]*)\\n') do
  if redis.call('HEXISTS', KEYS[3], id) == 0 and redis.call('HEXISTS', KEYS[4], id) == 0 then
    redis.call('HSET', KEYS[2], id, v)
  end
end
local delta, full, marked, adding = 0, 0, false, {}
local function settled(id) return redis.call('HEXISTS', KEYS[3], id) == 1 or redis.call('HEXISTS', KEYS[4], id) == 1 end
for id, a, r, l in string.gmatch(ARGV[3], '([^\\t\\n]+)\\t([^\\t\\n]+)\\t([^\\t\\n]+)\\t([^\\n]*)\\n') do
  local actual, reserved = tonumber(a), tonumber(r)
  if l == '*' then
    local v = redis.call('HGET', KEYS[2], id)
    if v then
      delta = delta - tonumber(string.match(v, '([^|]*)$'))
      redis.call('HDEL', KEYS[2], id)
      redis.call('HSET', KEYS[3], id, '1')
      marked = true
    end
  elseif l ~= '' then
    if not settled(id) then
      redis.call('HDEL', KEYS[2], id)
      local v = redis.call('HGET', KEYS[2], l)
      if v then
        local head, n = string.match(v, '^(.*)|([^|]*)$')
        local take = math.min(actual, tonumber(n))
        redis.call('HSET', KEYS[2], l, head .. '|' .. (tonumber(n) - take))
        delta = delta + actual - take
      else
        delta = delta + actual
      end
      full = full + actual
      if actual > 0 then adding[#adding + 1] = id end
      redis.call('HSET', KEYS[3], id, '1')
      marked = true
    end
  elseif redis.call('HDEL', KEYS[2], id) == 1 then
    delta = delta + actual - reserved
    full = full + actual
    if actual > 0 then adding[#adding + 1] = id end
    redis.call('HSET', KEYS[3], id, '1')
    marked = true
  elseif redis.call('HEXISTS', KEYS[3], id) == 0 and redis.call('HEXISTS', KEYS[4], id) == 0 then
    delta = delta + actual
    full = full + actual
    if actual > 0 then adding[#adding + 1] = id end
    redis.call('HSET', KEYS[3], id, '1')
    marked = true
  end
end
if marked then redis.call('EXPIRE', KEYS[3], 180) end
if redis.call('EXISTS', KEYS[1]) == 0 then
  for i = 1, #adding do redis.call('SADD', KEYS[5], adding[i]) end
  if #adding > 0 then redis.call('EXPIRE', KEYS[5], ARGV[1]) end
  return full
end
if ARGV[4] ~= '' then
  for id in string.gmatch(ARGV[4], '([^\\n]+)\\n') do redis.call('SREM', KEYS[5], id) end
end
if delta ~= 0 then
  redis.call('INCRBY', KEYS[1], delta)
  if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
end
return -1`;

// REASSERT (after Redis lost its state): puts an instance's own in-flight entries back and adds
// their reservations to the counter, each once.
//   KEYS[1] counter  KEYS[2] in-flight ledger  KEYS[3] the month's adding set
//   ARGV[1] ttl  ARGV[2] the instance's settlements not yet applied ("id\n…")  then (request id, entry, nano) triples.
// Counter present (a failover kept it): the reservations of the entries put back are added to it.
// Counter missing (the usual case: it went with Redis's state): nothing is rebuilt here; every
// entry and every pending settlement goes into the adding set instead, so whichever instance
// rebuilds the counter (after the recovery barrier, by which time every live instance has run
// this) leaves their records out and adds the entries' reservations (SEED), and the settlements
// add their cost on top when they go out. → 1 when the ids went into the adding set, else 0.
const REASSERT = `
local exists = redis.call('EXISTS', KEYS[1]) == 1
local add, ids = 0, {}
for i = 3, #ARGV, 3 do
  if redis.call('HSETNX', KEYS[2], ARGV[i], ARGV[i + 1]) == 1 then add = add + tonumber(ARGV[i + 2]) end
  ids[#ids + 1] = ARGV[i]
end
if exists then
  if add ~= 0 then redis.call('INCRBY', KEYS[1], add) end
  return 0
end
for id in string.gmatch(ARGV[2], '([^\\n]+)\\n') do ids[#ids + 1] = id end
for i = 1, #ids do redis.call('SADD', KEYS[3], ids[i]) end
if #ids > 0 then redis.call('EXPIRE', KEYS[3], ARGV[1]) end
return 1`;

// WRITE-OFF (reconciler): removes a dead instance's in-flight entry and marks it settled, so a late
// settlement cannot charge it twice, and takes it out of its month's adding set (REASSERT may have
// put it there): its `interrupted` record, written first, now holds its cost for a rebuild to count.
//   KEYS[1] in-flight ledger  KEYS[2] settled markers  KEYS[3] the entry's month's adding set  ARGV[1] id.
const WRITE_OFF = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], '1')
redis.call('EXPIRE', KEYS[2], 180)
return 1`;

// WRITE_OFF_LEASED (reconciler): a dead instance's request admitted from a budget lease. Its
// `interrupted` record (written first) carries its worst case, which moves out of the lease's
// entry like a settlement of that cost: the counter already holds it there, and only what passes
// what the lease still holds is added. The lease's entry, once its requests are written off, goes
// back with LEDGER's lease end (`*`): a crash charges the requests in flight, never the slice.
//   KEYS[1] in-flight ledger  KEYS[2] settled markers  KEYS[3] the entry's month's adding set
//   KEYS[4] the month's counter  ARGV[1] id  ARGV[2] lease id  ARGV[3] worst case (nano)  ARGV[4] ttl
const WRITE_OFF_LEASED = `
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('SREM', KEYS[3], ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], '1')
redis.call('EXPIRE', KEYS[2], 180)
local w, take = tonumber(ARGV[3]), 0
local v = redis.call('HGET', KEYS[1], ARGV[2])
if v then
  local head, n = string.match(v, '^(.*)|([^|]*)$')
  take = math.min(w, tonumber(n))
  redis.call('HSET', KEYS[1], ARGV[2], head .. '|' .. (tonumber(n) - take))
end
if w > take and redis.call('EXISTS', KEYS[4]) == 1 then
  redis.call('INCRBY', KEYS[4], w - take)
  if redis.call('TTL', KEYS[4]) < 0 then redis.call('EXPIRE', KEYS[4], ARGV[4]) end
end
return 1`;

// EPOCH: the ledger's epoch (which Redis state the instances' in-flight entries were asserted
// onto), created when missing as "<token>@<Redis time of creation, ms>", and Redis's clock now: the
// recovery barrier after an empty restart is measured on this one clock, never an instance's.
//   KEYS[1] epoch  ARGV[1] a fresh token (used only when the epoch is missing)  → {epoch, now ms}
const EPOCH = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local v = redis.call('GET', KEYS[1])
if not v then
  v = ARGV[1] .. '@' .. now
  redis.call('SET', KEYS[1], v)
end
return {v, now}`;

// SEED: rebuilds a missing counter from the Postgres sum the caller computed, leaving out the
// records of the adding set's members the caller read first.
//   KEYS[1] counter  KEYS[2] adding set  KEYS[3] in-flight ledger
//   ARGV[1] value (nano)  ARGV[2] ttl  ARGV[3] the members read before the sum ("id\n…")
// → 1 set, 0 the counter exists (another rebuild won), -1 the set changed since it was read
// (the caller reads it and sums again).
const SEED = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
local seen, n = {}, 0
for id in string.gmatch(ARGV[3], '([^\\n]+)\\n') do
  if not seen[id] then seen[id] = true; n = n + 1 end
end
local members = redis.call('SMEMBERS', KEYS[2])
if #members ~= n then return -1 end
local held = 0
for i = 1, #members do
  if not seen[members[i]] then return -1 end
  local v = redis.call('HGET', KEYS[3], members[i])
  if v then held = held + (tonumber(string.match(v, '([^|]*)$')) or 0) end
end
redis.call('SET', KEYS[1], tonumber(ARGV[1]) + held, 'EX', ARGV[2])
return 1`;

// ADD_REBUILT: the settlements that found the counter missing add their cost to the rebuilt one,
// each only while its id is still in the adding set (taken out in the same step).
//   KEYS[1] counter  KEYS[2] adding set  ARGV[1] ttl  ARGV[2] "id\tactual\n…"
// → what was added, or -1 when the counter is missing (nothing was taken out of the set).
const ADD_REBUILT = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local add = 0
for id, a in string.gmatch(ARGV[2], '([^\\t\\n]+)\\t([^\\n]+)\\n') do
  if redis.call('SREM', KEYS[2], id) == 1 then add = add + tonumber(a) end
end
if add ~= 0 then
  redis.call('INCRBY', KEYS[1], add)
  if redis.call('TTL', KEYS[1]) < 0 then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
end
return add`;

/** The ledger's commands on the ioredis client. */
export interface LedgerCmds {
  gwLedger(counter: string, ledger: string, settledNow: string, settledPrev: string, adding: string, ttl: number, entries: string, settles: string, leaving: string): Promise<number>;
  gwReassert(counter: string, ledger: string, adding: string, ttl: number, pending: string, ...triples: Array<string | number>): Promise<number>;
  gwWriteOff(ledger: string, settled: string, adding: string, id: string): Promise<number>;
  gwWriteOffLeased(ledger: string, settled: string, adding: string, counter: string, id: string, lease: string, nano: number, ttl: number): Promise<number>;
  gwEpoch(epoch: string, token: string): Promise<[string, number]>;
  gwSeed(counter: string, adding: string, ledger: string, value: number, ttl: number, seen: string): Promise<number>;
  gwAddRebuilt(counter: string, adding: string, ttl: number, adds: string): Promise<number>;
}

export function defineLedgerCommands(r: Redis): void {
  r.defineCommand("gwLedger", { numberOfKeys: 5, lua: LEDGER });
  r.defineCommand("gwReassert", { numberOfKeys: 3, lua: REASSERT });
  r.defineCommand("gwWriteOff", { numberOfKeys: 3, lua: WRITE_OFF });
  r.defineCommand("gwWriteOffLeased", { numberOfKeys: 4, lua: WRITE_OFF_LEASED });
  r.defineCommand("gwEpoch", { numberOfKeys: 1, lua: EPOCH });
  r.defineCommand("gwSeed", { numberOfKeys: 3, lua: SEED });
  r.defineCommand("gwAddRebuilt", { numberOfKeys: 2, lua: ADD_REBUILT });
}
