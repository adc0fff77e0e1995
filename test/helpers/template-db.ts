// Migrated template databases for test gateways. Creating a database and applying every migration
// is most of a test gateway's start (PGlite's initdb alone takes seconds on a loaded machine), so
// the migrations run once into a template and each gateway starts from a copy of it: a copied
// PGlite data directory in embedded mode, CREATE DATABASE ... TEMPLATE on a real Postgres.
// Templates are named by a hash of the migrations (and the PGlite version), so a changed
// migration builds a new one and concurrent test processes share the same one; each is built
// under a temporary name and renamed into place, so nobody copies a half-migrated template.
import { createHash } from "node:crypto";
import { existsSync, mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from "node:fs";
import { cp } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import postgres from "postgres";
import { randomToken } from "../../src/lib/crypto.ts";

const migrationsFolder = join(import.meta.dir, "../../src/store/db/migrations");

function filesUnder(dir: string): string[] {
  return readdirSync(dir).sort().flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? filesUnder(p) : [p];
  });
}

/** Hash of every migration file and the PGlite version: what a template's contents depend on. */
const migrationsHash = (() => {
  const h = createHash("sha256");
  for (const f of filesUnder(migrationsFolder)) h.update(relative(migrationsFolder, f)).update("\0").update(readFileSync(f));
  const pglite = JSON.parse(readFileSync(join(import.meta.dir, "../../node_modules/@electric-sql/pglite/package.json"), "utf8"));
  h.update(String(pglite.version));
  return h.digest("hex").slice(0, 12);
})();

let pgliteTemplate: Promise<string> | null = null;

/** A migrated PGlite data directory (the gateway's DATA_DIR/pg), built at most once per migration set. */
function pgliteTemplateDir(): Promise<string> {
  pgliteTemplate ??= (async () => {
    const final = join(tmpdir(), `gw-test-template-${migrationsHash}`);
    if (existsSync(join(final, "pg", "PG_VERSION"))) return join(final, "pg");
    const build = mkdtempSync(join(tmpdir(), "gw-test-template-build-"));
    try {
      const { PGlite } = await import("@electric-sql/pglite");
      const { drizzle } = await import("drizzle-orm/pglite");
      const { migrate } = await import("drizzle-orm/pglite/migrator");
      const client = new PGlite(join(build, "pg"));
      await migrate(drizzle(client), { migrationsFolder });
      await client.close();
      try {
        renameSync(build, final);
      } catch (e) {
        // Another test process renamed its build into place first: use that one.
        if (!existsSync(join(final, "pg", "PG_VERSION"))) throw e;
      }
    } finally {
      rmSync(build, { recursive: true, force: true });
    }
    return join(final, "pg");
  })();
  pgliteTemplate.catch(() => { pgliteTemplate = null; });
  return pgliteTemplate;
}

/** Fills `dataDir/pg` with a copy of the migrated template: the gateway then finds nothing to migrate. */
export async function seedPgliteDataDir(dataDir: string): Promise<void> {
  const template = await pgliteTemplateDir();
  await cp(template, join(dataDir, "pg"), { recursive: true });
}

const templates = new Map<string, Promise<string>>();

/** Name of a migrated template database on the server of `baseUrl`, built at most once per migration set. */
export function postgresTemplate(baseUrl: string): Promise<string> {
  let p = templates.get(baseUrl);
  if (!p) {
    p = buildPostgresTemplate(baseUrl);
    p.catch(() => templates.delete(baseUrl));
    templates.set(baseUrl, p);
  }
  return p;
}

async function buildPostgresTemplate(baseUrl: string): Promise<string> {
  const name = `gwt_template_${migrationsHash}`;
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  try {
    const [row] = await admin`select 1 as found from pg_database where datname = ${name}`;
    if (row) return name;
    const build = `gwt_template_build_${randomToken(10).toLowerCase()}`;
    await admin.unsafe(`create database ${build}`);
    try {
      const u = new URL(baseUrl);
      u.pathname = `/${build}`;
      const mig = postgres(u.toString(), { max: 1, onnotice: () => {} });
      try {
        const { drizzle } = await import("drizzle-orm/postgres-js");
        const { migrate } = await import("drizzle-orm/postgres-js/migrator");
        await migrate(drizzle(mig), { migrationsFolder });
      } finally {
        await mig.end({ timeout: 5 });
      }
      try {
        await admin.unsafe(`alter database ${build} rename to ${name}`);
      } catch (e) {
        // Another test process renamed its build into place first: use that one.
        const [again] = await admin`select 1 as found from pg_database where datname = ${name}`;
        if (!again) throw e;
      }
    } finally {
      await admin.unsafe(`drop database if exists ${build} with (force)`).catch(() => {});
    }
    return name;
  } finally {
    await admin.end();
  }
}
