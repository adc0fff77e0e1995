// The migrations folder as drizzle-kit and the migrator read it. drizzle-kit diffs the schema
// against the newest snapshot in meta/: a migration without one makes the next `drizzle-kit
// generate` write its statements again. The migrator applies a migration only when its journal
// time is later than the last applied one's, so a migration dated earlier would never run on an
// existing database.
import { describe, expect, test } from "bun:test";
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

const folder = join(import.meta.dir, "../../src/store/db/migrations");
type Entry = { idx: number; tag: string; when: number };
const journal = (): { entries: Entry[] } => JSON.parse(readFileSync(join(folder, "meta/_journal.json"), "utf8"));

describe("migrations", () => {
  test("every journal entry has its SQL file and its drizzle-kit snapshot, snapshots chain by prevId, times increase", () => {
    let prevId = "00000000-0000-0000-0000-000000000000";
    let prevWhen = 0;
    for (const e of journal().entries) {
      const n = String(e.idx).padStart(4, "0");
      expect(existsSync(join(folder, `${e.tag}.sql`))).toBe(true);
      const snap = join(folder, `meta/${n}_snapshot.json`);
      expect([e.tag, existsSync(snap)]).toEqual([e.tag, true]);
      const s = JSON.parse(readFileSync(snap, "utf8"));
      expect([e.tag, s.prevId]).toEqual([e.tag, prevId]);
      prevId = s.id;
      expect(e.when).toBeGreaterThan(prevWhen);
      prevWhen = e.when;
    }
  });

  test("the newest snapshot has the tables the schema declares (what the next generate diffs against)", async () => {
    const schema = await import("../../src/store/db/schema/index.ts");
    const { getTableConfig, PgTable } = await import("drizzle-orm/pg-core");
    const declared = Object.values(schema).filter((t) => t instanceof PgTable).map((t) => `public.${getTableConfig(t as never).name}`).sort();
    const last = journal().entries.at(-1)!;
    const snap = JSON.parse(readFileSync(join(folder, `meta/${String(last.idx).padStart(4, "0")}_snapshot.json`), "utf8"));
    expect(Object.keys(snap.tables).sort()).toEqual(declared);
  });

  test("a database migrated before loses the unused usage_ttfb_sum aggregate; the rollup's usage_ttfb_add stays and the rollup still sums TTFB", async () => {
    const { PGlite } = await import("@electric-sql/pglite");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    const before = mkdtempSync(join(tmpdir(), "mig-"));
    try {
      cpSync(folder, before, { recursive: true });
      const j = journal();
      j.entries = j.entries.filter((e) => e.tag < "0008");
      writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(j));
      const c = new PGlite();
      const db = drizzle(c);
      const fns = async () => (await c.query<{ proname: string }>("select proname from pg_proc where proname like 'usage_ttfb_%' order by 1")).rows.map((r) => r.proname);
      await migrate(db, { migrationsFolder: before });
      expect(await fns()).toEqual(["usage_ttfb_add", "usage_ttfb_bucket", "usage_ttfb_sum"]);
      await migrate(db, { migrationsFolder: folder });
      expect(await fns()).toEqual(["usage_ttfb_add", "usage_ttfb_bucket"]);
      await c.query(`insert into usage_records (account_id, endpoint, provider, status, outcome, ttfb_ms) values ('a','chat','x',200,'ok',30), ('a','chat','x',200,'ok',30)`);
      const ttfb = (await c.query<{ ttfb: number[] }>("select ttfb from usage_daily")).rows[0]!.ttfb.map(Number);
      expect(ttfb.slice(0, 3)).toEqual([0, 2, 0]);
      await c.close();
    } finally {
      rmSync(before, { recursive: true, force: true });
    }
  });
});
