// Opens Postgres (postgres.js, when DATABASE_URL is set) or the embedded PGlite under DATA_DIR/pg,
// applies the migrations, and counts queries (tests prove the warm hot path runs none).
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import type { PgDatabase, PgQueryResultHKT } from "drizzle-orm/pg-core";
import * as schema from "./schema/index.ts";

export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

export interface DbHandle {
  db: Db;
  kind: "postgres" | "pglite";
  /** Number of statements sent since start; read by tests. */
  queries(): number;
  ping(): Promise<void>;
  close(): Promise<void>;
}

const migrationsFolder = join(import.meta.dir, "migrations");

export async function openDb(opts: { databaseUrl?: string; dataDir: string }): Promise<DbHandle> {
  let count = 0;
  const logger = { logQuery: () => { count++; } };
  if (opts.databaseUrl) {
    const { default: postgres } = await import("postgres");
    const { drizzle } = await import("drizzle-orm/postgres-js");
    const { migrate } = await import("drizzle-orm/postgres-js/migrator");
    const client = postgres(opts.databaseUrl, { max: 10, onnotice: () => {}, connect_timeout: 10 });
    const db = drizzle(client, { schema, logger });
    await migrate(db, { migrationsFolder });
    return {
      db: db as unknown as Db,
      kind: "postgres",
      queries: () => count,
      ping: async () => { await client`select 1`; },
      close: () => client.end({ timeout: 5 }),
    };
  }
  const { PGlite } = await import("@electric-sql/pglite");
  const { drizzle } = await import("drizzle-orm/pglite");
  const { migrate } = await import("drizzle-orm/pglite/migrator");
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
    close: () => client.close(),
  };
}
