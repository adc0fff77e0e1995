// Cache invalidation across gateway instances: management publishes, the inference key cache
// listens. A write is committed first and told afterwards; telling never fails the write
// (CONTRACT §7: a management write either fully happens and answers 200, or does not happen).
//
// Three channels, each idempotent (dropping a cache entry twice is harmless):
// - this instance, synchronously, so the next request here never sees a stale key;
// - Postgres NOTIFY (with DATABASE_URL), sent inside the write's transaction where the caller
//   has one (`notifyInTransaction`), so it is delivered exactly when the write commits and
//   whether or not Redis is up: a revocation reaches every instance within moments;
// - Redis pub/sub (with REDIS_URL), best effort.
// PGlite is one process per data directory: the local channel is all there is.
import { sql } from "drizzle-orm";
import type { Db, DbHandle } from "./db/client.ts";
import type { KV } from "./kv/types.ts";
import type { Logger } from "../logger.ts";
import { loggableError } from "../errors.ts";
import { retryConnecting } from "./db/connect-retry.ts";

const CHANNEL = "gw:invalidate";
/** Postgres channel names are identifiers: no colon. */
const PG_CHANNEL = "gw_invalidate";

export type Invalidation =
  /** One routing key changed (revoked, regenerated, PATCHed): drop the entry for this key hash. */
  | { kind: "key"; hash: string }
  /** Something a key's lanes reference changed (credential, bridge, sub session, account): drop all of the account's keys. */
  | { kind: "account"; accountId: string }
  /** The operator's prices changed (the admin command): every instance reads the operator_prices table again. */
  | { kind: "prices" }
  /** Messages may have been missed (a listener reconnected): drop everything. */
  | { kind: "all" };

type Handler = (m: Invalidation) => void;

/** What listening needs: the stores and a log (the gateway's context has them). */
interface Listening {
  db: Db;
  dbh: DbHandle;
  kv: KV;
  log: Logger;
}

/** Publishing also drops the entry from this instance's key cache at once (a module that publishes takes this, not the whole instance). */
export interface Publishing extends Listening {
  services: { keyCache: { invalidate(msg: Invalidation): void } };
}

/** Anything with drizzle's execute: the database or a transaction. */
type Executor = Pick<Db, "execute">;

/** The NOTIFY statement for `msg` (also sent by the admin command, which has no gateway context). */
export const notifyStatement = (msg: Invalidation) => sql`select pg_notify(${PG_CHANNEL}, ${JSON.stringify(msg)})`;

/** Sends the Postgres NOTIFY for `msg` through `tx`: delivered when (and only if) tx commits. */
export async function notifyInTransaction(ctx: Pick<Listening, "dbh">, tx: Executor, msg: Invalidation): Promise<void> {
  if (ctx.dbh.kind !== "postgres") return;
  await tx.execute(notifyStatement(msg));
}

/**
 * Tells every instance that `msg` changed. Call after the write committed. Never throws: each
 * channel that fails is logged. `notified: true` when the caller already sent the NOTIFY inside
 * its transaction.
 */
export async function publishInvalidation(ctx: Publishing, msg: Invalidation, opts: { notified?: boolean } = {}): Promise<void> {
  ctx.services.keyCache.invalidate(msg);
  const raw = JSON.stringify(msg);
  await Promise.all([
    opts.notified || ctx.dbh.kind !== "postgres"
      ? null
      : ctx.db.execute(notifyStatement(msg)).catch((e: unknown) =>
          ctx.log.warn({ err: loggableError(e) }, "cache invalidation not sent over Postgres; other instances see the change when their cached copy expires")),
    ctx.kv.publish(CHANNEL, raw).catch((e: unknown) =>
      ctx.log.warn({ err: loggableError(e) }, "cache invalidation not sent over the KV (other instances hear it over Postgres when DATABASE_URL is set)")),
  ]);
}

/** Subscribes `handler` to other instances' invalidations (this instance's own reach its key cache directly). */
export async function onInvalidation(ctx: Listening, handler: Handler): Promise<void> {
  const receive = (raw: string) => {
    try {
      handler(JSON.parse(raw) as Invalidation);
    } catch {
      ctx.log.warn("ignored a malformed invalidation message");
    }
  };
  if (ctx.dbh.listen) {
    let listening = false;
    const listen = ctx.dbh.listen;
    await retryConnecting("LISTEN for cache invalidations", () => listen(PG_CHANNEL, receive, () => {
      // A re-LISTEN after a dropped connection: whatever was NOTIFYed meanwhile is lost.
      if (listening) handler({ kind: "all" });
      listening = true;
    }), ctx.log);
  }
  await ctx.kv.subscribe(CHANNEL, receive);
}
