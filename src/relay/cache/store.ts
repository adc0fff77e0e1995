// Where cached answers live: Redis in Redis mode (shared by every instance; TTL per entry), an
// in-process LRU on the embedded defaults. Every operation swallows its store's failure: a cache
// that cannot be read is a miss and one that cannot be written keeps nothing, never an error
// (the Redis client's 500 ms command timeout bounds how long an outage can add).
import { LRUCache } from "lru-cache";
import type Redis from "ioredis";

export interface CacheStore {
  get(key: string): Promise<string | null>;
  set(key: string, value: string, ttlSeconds: number): Promise<void>;
  /** Takes the single-flight lock of `key` for `ms` (true), or finds it held elsewhere (false). Null: the store is unreachable. */
  lock(key: string, owner: string, ms: number): Promise<boolean | null>;
  unlock(key: string, owner: string): Promise<void>;
  /** True when another instance may hold locks (Redis): waiters then poll the store. */
  readonly shared: boolean;
}

// Deletes the lock only while it is still ours (it may have expired and been taken by another).
const UNLOCK = "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end";

export class RedisCacheStore implements CacheStore {
  readonly shared = true;
  constructor(private r: Redis) {}

  async get(key: string): Promise<string | null> {
    try {
      return await this.r.get(key);
    } catch {
      return null;
    }
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    try {
      // A Redis run with maxmemory-policy noeviction refuses the write when full: nothing is kept.
      await this.r.set(key, value, "EX", ttlSeconds);
    } catch {}
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
  private lru: LRUCache<string, string>;

  constructor(maxBytes: number) {
    // Bounded by total size (UTF-16 length ≈ bytes of the mostly-ASCII JSON); the least recently used go first.
    this.lru = new LRUCache<string, string>({ maxSize: maxBytes, sizeCalculation: (v, k) => v.length + k.length });
  }

  async get(key: string): Promise<string | null> {
    return this.lru.get(key) ?? null;
  }

  async set(key: string, value: string, ttlSeconds: number): Promise<void> {
    this.lru.set(key, value, { ttl: ttlSeconds * 1000 });
  }

  async lock(): Promise<boolean> {
    return true;
  }

  async unlock(): Promise<void> {}
}
