// Where cached answers live: Redis in Redis mode (shared by every instance; TTL per entry), an
// in-process LRU on the embedded defaults. Every operation swallows its store's failure: a cache
// that cannot be read is a miss and one that cannot be written keeps nothing, never an error
// (the Redis client's 500 ms command timeout bounds how long an outage can add).
//
// The cache never takes memory that budgets and limits need (CONTRACT §8): its entries are
// counted in bytes per account and in total, and a write past either quota keeps nothing. In
// Redis the count is kept by a script beside the entries (quota-scripts.ts); an entry's expiry
// gives its bytes back. On a Redis shared with the budget counters the cache also stops writing
// before Redis is full (redis-headroom.ts), and backs off when Redis answers OOM anyway.
import { LRUCache } from "lru-cache";
import type Redis from "ioredis";
import { CHARGE, UNCHARGE, accountQuotaKeys, entrySize, TOTAL_QUOTA_KEYS } from "./quota-scripts.ts";
import { RedisHeadroom } from "./redis-headroom.ts";

export interface CacheStore {
  get(key: string): Promise<string | null>;
  /** Keeps `value` under `key` for `ttlSeconds`, counted against `accountId`'s quota and the total; false when nothing was kept. */
  set(key: string, value: string, ttlSeconds: number, accountId: string): Promise<boolean>;
  /** Takes the single-flight lock of `key` for `ms` (true), or finds it held elsewhere (false). Null: the store is unreachable. */
  lock(key: string, owner: string, ms: number): Promise<boolean | null>;
  unlock(key: string, owner: string): Promise<void>;
  /** True when another instance may hold locks (Redis): waiters then poll the store. */
  readonly shared: boolean;
}

export interface CacheQuotas {
  /** Bytes one account's entries may hold (RESPONSE_CACHE_MAX_BYTES_PER_ACCOUNT). */
  perAccount: number;
  /** Bytes all entries may hold (RESPONSE_CACHE_MAX_BYTES; the embedded LRU's size without Redis). */
  total: number;
}

// Deletes the lock only while it is still ours (it may have expired and been taken by another).
const UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

type QuotaCmds = Redis & {
  gwCacheCharge(numberOfKeys: number, ...keysThenArgs: Array<string | number>): Promise<number>;
  gwCacheUncharge(z: string, sizes: string, used: string, member: string): Promise<number>;
};

/** Redis refuses writes past its maxmemory under `noeviction`. */
const isOom = (e: unknown) => e instanceof Error && /\bOOM\b/.test(e.message);

export class RedisCacheStore implements CacheStore {
  readonly shared = true;
  private r: QuotaCmds;
  private headroom: RedisHeadroom;
  private cluster: boolean;

  /** `memoryPercent`: of a non-evicting Redis's maxmemory, the most the cache writes into (redis-headroom.ts). */
  constructor(r: Redis, private quotas: CacheQuotas, memoryPercent: number) {
    this.r = r as QuotaCmds;
    this.r.defineCommand("gwCacheCharge", { lua: CHARGE }); // its key count varies: first argument
    this.cluster = (r as unknown as { isCluster?: boolean }).isCluster === true;
    this.r.defineCommand("gwCacheUncharge", { numberOfKeys: 3, lua: UNCHARGE });
    this.headroom = new RedisHeadroom(r, memoryPercent);
  }

  async get(key: string): Promise<string | null> {
    try {
      return await this.r.get(key);
    } catch {
      return null;
    }
  }

  async set(key: string, value: string, ttlSeconds: number, accountId: string): Promise<boolean> {
    const size = entrySize(key, value);
    if (size > this.quotas.perAccount || size > this.quotas.total) return false;
    if (!(await this.headroom.admits(size))) return false;
    return this.charge(key, value, ttlSeconds, accountId, size);
  }

  private async charge(key: string, value: string, ttlSeconds: number, accountId: string, size: number): Promise<boolean> {
    const ttlMs = ttlSeconds * 1000;
    const total = TOTAL_QUOTA_KEYS;
    const acct = accountQuotaKeys(accountId);
    try {
      let kept: boolean;
      if (!this.cluster) {
        // One node: both counters and the entry in one script, one round trip.
        kept = (await this.r.gwCacheCharge(7, key, acct.z, acct.sizes, acct.used, total.z, total.sizes, total.used, key, size, ttlMs, value, this.quotas.perAccount, this.quotas.total)) === 1;
      } else {
        // A Cluster: one script per slot. The total first, then the account's, which writes the
        // entry; a refusal there hands the total's bytes back.
        if ((await this.r.gwCacheCharge(4, total.z, total.z, total.sizes, total.used, key, size, ttlMs, "", this.quotas.total)) !== 1) return false;
        kept = false;
        try {
          kept = (await this.r.gwCacheCharge(4, key, acct.z, acct.sizes, acct.used, key, size, ttlMs, value, this.quotas.perAccount)) === 1;
        } finally {
          if (!kept) await this.r.gwCacheUncharge(total.z, total.sizes, total.used, key).catch(() => {});
        }
      }
      if (kept) this.headroom.wrote(size);
      return kept;
    } catch (e) {
      // A cluster-enabled node reached as one (REDIS_URL): the slots differ, so one script per slot from now on.
      if (!this.cluster && e instanceof Error && /CROSSSLOT/.test(e.message)) {
        this.cluster = true;
        return this.charge(key, value, ttlSeconds, accountId, size);
      }
      // Full (noeviction): nothing is kept, and the cache stops writing for a while so the
      // budgets' own writes find the room.
      if (isOom(e)) this.headroom.refused();
      return false;
    }
  }

  async lock(key: string, owner: string, ms: number): Promise<boolean | null> {
    try {
      return (await this.r.set(`${key}:lock`, owner, "PX", ms, "NX")) === "OK";
    } catch {
      return null;
    }
  }

  async unlock(key: string, owner: string): Promise<void> {
    try {
      await this.r.eval(UNLOCK, 1, `${key}:lock`, owner);
    } catch {}
  }
}

/** The embedded defaults: one process, so the single flight needs no lock beyond the in-process one. */
export class MemoryCacheStore implements CacheStore {
  readonly shared = false;
  private lru: LRUCache<string, { value: string; accountId: string; size: number }>;
  /** Bytes held per account; an entry leaving the LRU (expired, pushed out, replaced) gives its bytes back. */
  private held = new Map<string, number>();

  constructor(private quotas: CacheQuotas) {
    // Bounded by total size (UTF-16 length ≈ bytes of the mostly-ASCII JSON); the least recently used go first.
    this.lru = new LRUCache({
      maxSize: quotas.total,
      sizeCalculation: (v) => v.size,
      dispose: (v) => {
        const left = (this.held.get(v.accountId) ?? 0) - v.size;
        if (left > 0) this.held.set(v.accountId, left);
        else this.held.delete(v.accountId);
      },
    });
  }

  async get(key: string): Promise<string | null> {
    return this.lru.get(key)?.value ?? null;
  }

  async set(key: string, value: string, ttlSeconds: number, accountId: string): Promise<boolean> {
    const size = value.length + key.length;
    if (size > this.quotas.total) return false;
    const mine = () => {
      const old = this.lru.peek(key);
      return (this.held.get(accountId) ?? 0) - (old && old.accountId === accountId ? old.size : 0);
    };
    if (mine() + size > this.quotas.perAccount) {
      // Expired entries still in the LRU hold their bytes until purged: purge (a scan), then count again.
      this.lru.purgeStale();
      if (mine() + size > this.quotas.perAccount) return false;
    }
    this.lru.set(key, { value, accountId, size }, { ttl: ttlSeconds * 1000 });
    this.held.set(accountId, (this.held.get(accountId) ?? 0) + size);
    return true;
  }

  async lock(): Promise<boolean> {
    return true;
  }

  async unlock(): Promise<void> {}
}
