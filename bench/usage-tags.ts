// Tag reads at scale (CONTRACT §9): seeds N raw usage records (1 M by default) for one account
// into a fresh Postgres database, 2 % of them tagged (one of five tags, every other of those a
// second one), spread over 60 days, then shows the plans and the median latency of what reads
// tags: a records page with ?tag=, groups?by=tag, groups?by=day&tag=. Each must read only the
// tagged records (the GIN index usage_tags, the partial index usage_tagged), never every record
// of the account: the bench fails when a plan scans a month partition whole.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 npx bun bench/usage-tags.ts [--rows 1000000] [--runs 11]
import { sql } from "drizzle-orm";
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { median } from "./lib/stats.ts";
import { pageQuery } from "../src/management/usage/records.ts";
import { rawGroupsSql } from "../src/management/usage/report.ts";
import { rollupWindow } from "../src/management/usage/service.ts";

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROWS = arg("rows", 1_000_000);
const RUNS = arg("runs", 11);
const CHUNK = 500_000;

if (!process.env.DATABASE_URL || !process.env.REDIS_URL) {
  console.error("usage-tags: set DATABASE_URL and REDIS_URL (the bench seeds a fresh Postgres database)");
  process.exit(2);
}

const gw = await startTestGateway();
const rows = (r: unknown) => (Array.isArray(r) ? r : (r as { rows: unknown[] }).rows) as Array<Record<string, unknown>>;
const exec = async (q: ReturnType<typeof sql>) => rows(await gw.ctx.db.execute(q));
let failed = false;

try {
  const acct = await createAccount(gw);
  await exec(sql`select usage_ensure_partition((now() - make_interval(months => m))::date) from generate_series(0, 2) m`);
  // The rollup is not what is measured here: off for the seed, rebuilt from the raw records after.
  await exec(sql`alter table usage_records disable trigger usage_rollup`);
  const spanS = 60 * 86400;
  for (let lo = 1; lo <= ROWS; lo += CHUNK) {
    const hi = Math.min(ROWS, lo + CHUNK - 1);
    await exec(sql`insert into usage_records (request_id, account_id, routing_key_id, attempt, record_key, endpoint, lane_index, provider, model,
        status, outcome, prompt_tokens, completion_tokens, cost_usd, latency_ms, ttfb_ms, tags, created_at)
      select 'req-' || g, ${acct.id}, 'rkey-bench', 1, 'bench.' || g || '.1', 'chat', 0, 'openai', 'gpt-4o-mini', 200, 'ok',
        200 + g % 300, 20 + g % 80, (g % 1000) / 1e6, 100 + g % 900, 50 + g % 950,
        case when g % 50 = 0 then (case when g % 100 = 0 then array['team-' || (g / 50) % 5, 'run:' || (g / 100) % 3] else array['team-' || (g / 50) % 5] end) end,
        now() - make_interval(secs => (${ROWS}::float8 - g) * ${spanS}::float8 / ${ROWS}::float8)
      from generate_series(${lo}::bigint, ${hi}::bigint) g`);
    console.log(`seeded ${hi.toLocaleString()} records`);
  }
  await exec(sql`alter table usage_records enable trigger usage_rollup`);
  await exec(sql`analyze usage_records`);
  const counts = (await exec(sql`select count(*)::int as all, count(*) filter (where tags is not null)::int as tagged,
    count(*) filter (where tags @> array['team-2'])::int as team2 from usage_records where account_id = ${acct.id}`))[0]!;
  console.log("records:", counts);

  const since = rollupWindow().since;
  // The records page is built by the query builder: its own SQL, its parameters inlined, explained as it runs.
  const page = pageQuery(gw.ctx.db, acct.id, { tag: "team-2" }).toSQL();
  const pageSql = sql.raw(page.sql.replace(/\$(\d+)/g, (_, n) => {
    const v = page.params[Number(n) - 1];
    return typeof v === "number" ? String(v) : `'${String(v).replaceAll("'", "''")}'`;
  }));
  const statements: Array<[string, ReturnType<typeof sql>]> = [
    ["records page ?tag=team-2", pageSql],
    ["groups ?by=tag (tagged records of the window)", rawGroupsSql(acct.id, since, null, "tag", undefined, true)],
    ["groups ?by=day&tag=team-2", rawGroupsSql(acct.id, since, null, "day", "team-2", false)],
  ];

  for (const [name, q] of statements) {
    const plan = (await exec(sql`explain (analyze, costs off, buffers) ${q}`)).map((r) => String(Object.values(r)[0])).join("\n");
    console.log(`\n--- ${name}\n${plan}`);
    // A scan of a month partition whole (a Seq Scan on usage_records_YYYY_MM that filters records
    // out) reads every record of the account; an empty partition's is nothing to read.
    const lines = plan.split("\n");
    const whole = lines.some((l, i) => l.includes("Seq Scan on usage_records_") && lines.slice(i + 1, i + 4).some((m) => /Rows Removed by Filter: [1-9]/.test(m)));
    if (whole) {
      console.error(`FAIL: ${name} scans a month partition whole`);
      failed = true;
    }
  }

  const get = async (path: string) => {
    const r = await gw.req(path, { token: acct.token });
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  };
  console.log("");
  for (const path of ["/v1/organizations/usage/records?tag=team-2", "/v1/organizations/usage/groups?by=tag", "/v1/organizations/usage/groups?by=day&tag=team-2"]) {
    await get(path);
    const xs: number[] = [];
    for (let i = 0; i < RUNS; i++) {
      const s = performance.now();
      await get(path);
      xs.push(performance.now() - s);
    }
    console.log(`${path}: p50 ${median(xs).toFixed(1)} ms (${RUNS} runs)`);
  }
} finally {
  await gw.stop();
}
if (failed) process.exit(1);
