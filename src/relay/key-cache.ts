// In-process cache of resolved routing keys: a warm key costs one sha256 and a map lookup, no
// Postgres. Management publishes an invalidation on revoke, regenerate, PATCH and on changes
// to what lanes reference; every instance drops the entry at once (store/invalidation.ts). A
// short freshness (KEY_CACHE_TTL_SECONDS) bounds staleness should a message ever be missed.
//
// Postgres outages (CONTRACT §7): when re-reading a key fails because the database is
// unreachable, the copy read last keeps being served for up to KEY_CACHE_STALE_SECONDS after
// that read, re-trying the database at most every RETRY_MS (so requests do not each wait on a
// dead database). A key never read before gets 500 server_error at once.
import { LRUCache } from "lru-cache";
import type { Base } from "../base.ts";
import { isDatabaseError, loggableError, serverError } from "../errors.ts";
import { readWithin } from "../store/db/deadline.ts";
import { onInvalidation, type Invalidation } from "../store/invalidation.ts";
import { loadKeyContext, type KeyContext } from "./key-context.ts";

const MAX_KEYS = 20_000;
/** Unknown hashes are remembered briefly so a flood of bad keys does not become a flood of queries. */
const NEGATIVE_TTL_MS = 5_000;
/** While Postgres is down, a stale key is served this long before the next attempt to re-read it. */
const RETRY_MS = 5_000;
/** A key read that takes longer than this counts as the database being unreachable (a frozen server). */
const LOAD_TIMEOUT_MS = 1_500;

export interface KeyCache {
  /** Fresh entry: a key, null (known unknown), or undefined (not cached or due a re-read). Synchronous: the warm path. */
  peek(hash: string): KeyContext | null | undefined;
  /** Loads (once per hash even under concurrency) and caches; serves the stale copy while Postgres is down. */
  load(hash: string): Promise<KeyContext | null>;
  invalidate(msg: Invalidation): void;
  size(): number;
}

type Entry = {
  key: KeyContext | null;
  /** Served without a query until then (ms since epoch). */
  freshUntil: number;
  /** Served while Postgres is unreachable until then: the last successful read + KEY_CACHE_STALE_SECONDS. */
  staleUntil: number;
};

export function createKeyCache(ctx: Base): KeyCache {
  const freshMs = ctx.config.KEY_CACHE_TTL_SECONDS * 1000;
  const staleMs = ctx.config.KEY_CACHE_STALE_SECONDS * 1000;
  const byAccount = new Map<string, Set<string>>();
  const cache = new LRUCache<string, Entry>({
    max: MAX_KEYS,
    // Entries live as long as they may be served, fresh or stale; peek() checks freshness.
    ttl: Math.max(freshMs, staleMs),
    // lru-cache otherwise keeps the time it read for 1 ms behind a 1 ms timer, armed on the first
    // lookup after it lapsed: at one request a millisecond, a timer that fires (an event-loop
    // wakeup) for every request. Reading the clock on each lookup costs a vDSO call instead.
    ttlResolution: 0,
    dispose(entry, hash) {
      const acct = entry.key?.accountId;
      if (!acct) return;
      const set = byAccount.get(acct);
      set?.delete(hash);
      if (set && set.size === 0) byAccount.delete(acct);
    },
  });
  const inflight = new Map<string, Promise<KeyContext | null>>();
  // Bumped on every invalidation: a load that started before one does not cache its (maybe stale) row.
  let epoch = 0;

  const invalidate = (msg: Invalidation) => {
    if (msg.kind === "prices") return; // no key changed (money/operator-prices.ts listens for it)
    epoch++;
    if (msg.kind === "key") {
      cache.delete(msg.hash);
      inflight.delete(msg.hash);
      return;
    }
    if (msg.kind === "all") {
      cache.clear();
      byAccount.clear();
      inflight.clear();
      return;
    }
    const hashes = byAccount.get(msg.accountId);
    if (hashes) for (const h of [...hashes]) cache.delete(h);
    byAccount.delete(msg.accountId);
    // A load in flight may belong to this account; drop them all (cheap, rare).
    inflight.clear();
  };

  const store = (hash: string, key: KeyContext | null) => {
    const now = Date.now();
    if (!key) {
      cache.set(hash, { key, freshUntil: now + NEGATIVE_TTL_MS, staleUntil: now + NEGATIVE_TTL_MS }, { ttl: NEGATIVE_TTL_MS });
      return;
    }
    cache.set(hash, { key, freshUntil: now + freshMs, staleUntil: now + staleMs });
    let set = byAccount.get(key.accountId);
    if (!set) byAccount.set(key.accountId, (set = new Set()));
    set.add(hash);
  };

  /** The database failed: serve the last good copy while it may be served, else 500 server_error. */
  const onDbFailure = (hash: string, e: unknown): KeyContext => {
    const stale = cache.get(hash, { allowStale: true });
    const now = Date.now();
    if (stale?.key && now < stale.staleUntil) {
      stale.freshUntil = Math.min(now + RETRY_MS, stale.staleUntil);
      ctx.log.warn({ keyPrefix: stale.key.keyPrefix, err: loggableError(e), servedUntil: new Date(stale.staleUntil).toISOString() }, "Postgres unreachable: serving the cached routing key");
      return stale.key;
    }
    ctx.log.warn({ err: loggableError(e) }, "Postgres unreachable: a routing key not in the cache cannot be checked");
    throw serverError("The gateway cannot reach its database to check this routing key. Retry in a moment.");
  };

  return {
    peek(hash) {
      const e = cache.get(hash);
      return e === undefined || Date.now() >= e.freshUntil ? undefined : e.key;
    },
    load(hash) {
      const running = inflight.get(hash);
      if (running) return running;
      const started = epoch;
      const p = readWithin(loadKeyContext(ctx, hash), LOAD_TIMEOUT_MS, "key read")
        .then(
          (key) => {
            if (epoch === started) store(hash, key);
            return key;
          },
          (e: unknown) => {
            if (!isDatabaseError(e)) throw e;
            // An invalidation since the load started may have dropped the entry: then it is gone.
            return onDbFailure(hash, e);
          },
        )
        .finally(() => {
          if (inflight.get(hash) === p) inflight.delete(hash);
        });
      inflight.set(hash, p);
      return p;
    },
    invalidate,
    size: () => cache.size,
  };
}

/** Creates the cache and subscribes it to invalidations from other instances. */
export async function startKeyCache(ctx: Base): Promise<KeyCache> {
  const kc = createKeyCache(ctx);
  await onInvalidation(ctx, kc.invalidate);
  return kc;
}
