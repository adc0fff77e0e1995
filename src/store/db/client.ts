// Opens Postgres (postgres.js, when DATABASE_URL is set) or the embedded PGlite under DATA_DIR/pg,
// applies the migrations, and counts queries (tests prove the warm hot path runs none).
// Postgres outages answer fast: a connection attempt gives up after CONNECT_TIMEOUT_SECONDS, so a
// request that needs the database fails within about a second instead of hanging (CONTRACT §7).
// The embedded database is locked to one process (data-dir-lock.ts).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema/index.ts";
import { lockDataDir } from "./data-dir-lock.ts";
import { retryConnecting } from "./connect-retry.ts";
import type { Logger } from "../../logger.ts";

export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

export interface DbHandle {
  db: Db;
  kind: "postgres" | "pglite";
  /** Number of statements sent since start; read by tests. */
  queries(): number;
  ping(): Promise<void>;
  /**
   * Postgres LISTEN on a dedicated connection, re-established after a drop. `onListen` runs at
   * every (re)connection, so a caller can treat what it may have missed meanwhile. Absent on
   * PGlite: one process per data directory, nobody else to hear from.
   */
  listen?(channel: string, onMessage: (payload: string) => void, onListen: () => void): Promise<void>;
  close(): Promise<void>;
}

/** Seconds a Postgres connection attempt may take (postgres.js `connect_timeout`). */
export const CONNECT_TIMEOUT_SECONDS = 1;

const migrationsFolder = join(import.meta.dir, "migrations");

/** Key of the session advisory lock that serialises migrations across instances starting together. */
export const MIGRATION_LOCK_KEY = 7_208_541_903;

export interface OpenDbOptions {
  databaseUrl?: string;
  /**
   * A direct connection beside a pooled `databaseUrl` (CONTRACT §2 DATABASE_DIRECT_URL). Given,
   * `databaseUrl` is taken to be a transaction-mode pooler: it gets no named prepared statements
   * (a statement prepared on one server connection is unknown on the next, and PgBouncer before
   * 1.21 does not carry them), and everything that needs one session for longer than a
   * transaction goes here instead: migrations under their advisory lock, and LISTEN.
   */
  directUrl?: string;
  dataDir: string;
  /** Where a boot connection that is retried says so. */
  log?: Logger;
}

export async function openDb(opts: OpenDbOptions): Promise<DbHandle> {
  let count = 0;
  const logger = { logQuery: () => { count++; } };
  if (opts.databaseUrl) {
    const { default: postgres } = await import("postgres");
    const { drizzle } = await import("drizzle-orm/postgres-js");
    const { migrate } = await import("drizzle-orm/postgres-js/migrator");
    const common = {
      onnotice: () => {},
      connect_timeout: CONNECT_TIMEOUT_SECONDS,
      // postgres.js waits up to 20 s between reconnects after many failures (its default backoff
      // grows 3^n): after an outage, queries queued on such a connection sat there long after
      // Postgres was back. A refused connection costs nothing, so retry within half a second.
      backoff: (retries: number) => Math.min(0.05 * retries, 0.5),
    };
    const directUrl = opts.directUrl ?? opts.databaseUrl;
    // Migrations on one direct session holding a session advisory lock: instances that start
    // together apply them one after the other instead of racing on the same CREATE statements.
    // (A session lock through a transaction-mode pooler would stay on whichever server
    // connection took it: hence the direct URL.)
    const mig = postgres(directUrl, { ...common, max: 1 });
    try {
      await retryConnecting("The migrations' session", () => mig`select pg_advisory_lock(${MIGRATION_LOCK_KEY})`, opts.log);
      await migrate(drizzle(mig), { migrationsFolder });
    } finally {
      await mig.end({ timeout: 5 });
    }
    const client = postgres(opts.databaseUrl, { ...common, max: 10, prepare: !opts.directUrl });
    // LISTEN holds one session for as long as the gateway runs: the direct path when there is one.
    const listener = opts.directUrl ? postgres(opts.directUrl, { ...common, max: 1 }) : client;
    const db = drizzle(client, { schema, logger });
    return {
      db: db as unknown as Db,
      kind: "postgres",
      queries: () => count,
      ping: async () => { await client`select 1`; },
      listen: async (channel, onMessage, onListen) => { await listener.listen(channel, onMessage, onListen); },
      close: async () => {
        await Promise.all([client.end({ timeout: 5 }), listener === client ? null : listener.end({ timeout: 5 })]);
      },
    };
  }
  const { PGlite } = await import("@electric-sql/pglite");
  const { drizzle } = await import("drizzle-orm/pglite");
  const { migrate } = await import("drizzle-orm/pglite/migrator");
  mkdirSync(opts.dataDir, { recursive: true });
  const unlock = lockDataDir(opts.dataDir);
  try {
    const dir = join(opts.dataDir, "pg");
    mkdirSync(dir, { recursive: true });
    const client = new PGlite(dir);
    const db = drizzle(client, { schema, logger });
    await migrate(db, { migrationsFolder });
    return {
      db: db as unknown as Db,
      kind: "pglite",
      queries: () => count,
      ping: async () => { await client.query("select 1"); },
      close: async () => {
        try { await client.close(); } finally { unlock(); }
      },
    };
  } catch (e) {
    unlock();
    throw e;
  }
}
