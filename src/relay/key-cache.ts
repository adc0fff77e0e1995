// In-process cache of resolved routing keys: a warm key costs one sha256 and a map lookup, no
// Postgres. Management publishes an invalidation on revoke, regenerate, PATCH and on changes
// to what lanes reference; every instance drops the entry at once (store/invalidation.ts). A
// short TTL bounds staleness should a message ever be missed (e.g. a Redis reconnect).
import { LRUCache } from "lru-cache";
import type { Ctx } from "../context.ts";
import { onInvalidation, type Invalidation } from "../store/invalidation.ts";
import { loadKeyContext, type KeyContext } from "./key-context.ts";

const MAX_KEYS = 20_000;
const TTL_MS = 60_000;
/** Unknown hashes are remembered briefly so a flood of bad keys does not become a flood of queries. */
const NEGATIVE_TTL_MS = 5_000;

export interface KeyCache {
  /** Cached entry: a key, null (known unknown), or undefined (not cached). Synchronous: the warm path. */
  peek(hash: string): KeyContext | null | undefined;
  /** Loads (once per hash even under concurrency) and caches. */
  load(hash: string): Promise<KeyContext | null>;
  invalidate(msg: Invalidation): void;
  size(): number;
}

type Entry = { key: KeyContext | null };

export function createKeyCache(ctx: Ctx): KeyCache {
  const byAccount = new Map<string, Set<string>>();
  const cache = new LRUCache<string, Entry>({
    max: MAX_KEYS,
    ttl: TTL_MS,
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
    epoch++;
    if (msg.kind === "key") {
      cache.delete(msg.hash);
      inflight.delete(msg.hash);
      return;
    }
    const hashes = byAccount.get(msg.accountId);
    if (hashes) for (const h of [...hashes]) cache.delete(h);
    byAccount.delete(msg.accountId);
    // A load in flight may belong to this account; drop them all (cheap, rare).
    inflight.clear();
  };

  return {
    peek(hash) {
      const e = cache.get(hash);
      return e === undefined ? undefined : e.key;
    },
    load(hash) {
      const running = inflight.get(hash);
      if (running) return running;
      const started = epoch;
      const p = loadKeyContext(ctx, hash)
        .then((key) => {
          if (epoch === started) {
            cache.set(hash, { key }, { ttl: key ? TTL_MS : NEGATIVE_TTL_MS });
            if (key) {
              let set = byAccount.get(key.accountId);
              if (!set) byAccount.set(key.accountId, (set = new Set()));
              set.add(hash);
            }
          }
          return key;
        })
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

/** Creates the cache, subscribes it to invalidations, and registers it as `ctx.services.keyCache`. */
export async function startKeyCache(ctx: Ctx): Promise<KeyCache> {
  const kc = createKeyCache(ctx);
  ctx.services.keyCache = kc;
  await onInvalidation(ctx, kc.invalidate);
  return kc;
}
