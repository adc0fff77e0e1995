// Usage reporting at scale: seeds N raw usage records (10 M by default) for one account into a
// fresh Postgres database, then measures the median latency of every usage report and dashboard
// call, of a records page at several depths and of a budget counter rebuilt after its Redis key
// vanished. Real stores only (DATABASE_URL, REDIS_URL); the database is dropped at the end.
//
//   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test REDIS_URL=redis://127.0.0.1:6379 npx bun bench/usage-scale.ts
//   … npx bun bench/usage-scale.ts --rows 200000 --runs 5     (a quick smoke)
//
// The seed is generate_series in Postgres: 10 % of the client requests fail on a first lane and
// fall back to a second (two records), spread over the last 60 days (three month partitions). The
// rollup trigger is off during the seed and the rollup is built by one aggregate over the same
// rules (a request counts at its last attempt, a fallback at the failed one), then compared with
// the raw table; the trigger is back on before anything is measured.
import { Redis } from "ioredis";
import { sql } from "drizzle-orm";
import { monthKey } from "../src/lib/time.ts";
import { counterKey } from "../src/store/spend-counters.ts";
import { routingKeys } from "../src/store/db/schema/index.ts";
import { newId } from "../src/lib/ids.ts";
import { randomToken, sha256Hex } from "../src/lib/crypto.ts";
import { createAccount, startTestGateway } from "../test/helpers/gateway.ts";
import { median } from "./lib/stats.ts";
import { pageQuery } from "../src/management/usage/records.ts";

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const ROWS = arg("rows", 10_000_000);
const RUNS = arg("runs", 21);
const CHUNK = 1_000_000;
const KEYS = 8;

if (!process.env.DATABASE_URL || !process.env.REDIS_URL) {
  console.error("usage-scale: set DATABASE_URL and REDIS_URL (the bench seeds a fresh Postgres database)");
  process.exit(2);
}

const gw = await startTestGateway();
const rows = (r: unknown) => (Array.isArray(r) ? r : (r as { rows: unknown[] }).rows) as Array<Record<string, unknown>>;
const exec = async (q: ReturnType<typeof sql>) => rows(await gw.ctx.db.execute(q));
const t0 = performance.now();
const secs = () => ((performance.now() - t0) / 1000).toFixed(1);

try {
  const acct = await createAccount(gw);
  const keyIds: string[] = [];
  let budgetKey = { id: "", raw: "" };
  for (let i = 0; i < KEYS; i++) {
    const id = newId("rkey");
    const raw = `gw_${randomToken(40)}`;
    await gw.ctx.db.insert(routingKeys).values({ id, accountId: acct.id, label: `bench-${i}`, keyHash: sha256Hex(raw), keyPrefix: raw.slice(0, 10),
      monthlyBudgetUsd: i === 0 ? 1e9 : null, budgetExcludesSeats: true, lanes: [] });
    keyIds.push(id);
    if (i === 0) budgetKey = { id, raw };
  }
  const keysArray = sql.raw(`ARRAY[${keyIds.map((k) => `'${k}'`).join(",")}]`);

  // ---- seed ----
  await exec(sql`select usage_ensure_partition((now() - make_interval(months => m))::date) from generate_series(0, 2) m`);
  await exec(sql`alter table usage_records disable trigger usage_rollup`);
  const spanMs = 60 * 86400_000;
  for (let lo = 1; lo <= ROWS; lo += CHUNK) {
    const hi = Math.min(ROWS, lo + CHUNK - 1);
    // Row g: g % 10 = 1 is a failed first attempt on lane 0 whose request (call g) falls back to
    // row g + 1, its second attempt on lane 1; every other row is a request of its own.
    await exec(sql`insert into usage_records (request_id, account_id, routing_key_id, attempt, record_key, endpoint, lane_index, provider, model,
        status, outcome, error_code, prompt_tokens, completion_tokens, cost_usd, latency_ms, ttfb_ms, seat, created_at)
      select 'req-' || c, ${acct.id}, (${keysArray})[1 + (c % ${KEYS})], a, 'bench.' || c || '.' || a, 'chat', a - 1,
        case when g % 10 = 1 then 'anthropic' when g % 7 = 0 then 'sub' else 'openai' end,
        (ARRAY['gpt-4o-mini','gpt-4o','claude-sonnet-4','o3'])[1 + (g % 4)],
        case when g % 10 = 1 then 529 else 200 end, case when g % 10 = 1 then 'error' else 'ok' end,
        case when g % 10 = 1 then 'upstream_error' end,
        case when g % 10 = 1 then 0 else 200 + g % 300 end, case when g % 10 = 1 then 0 else 20 + g % 80 end,
        case when g % 10 = 1 then 0 else (g % 1000) / 1e6 end, 100 + g % 900, case when g % 10 = 1 then null else 50 + g % 950 end,
        g % 7 = 0 and g % 10 <> 1,
        now() - make_interval(secs => (${ROWS}::float8 - g) * ${spanMs / 1000}::float8 / ${ROWS}::float8)
      from generate_series(${lo}::bigint, ${hi}::bigint) g,
        lateral (select case when g % 10 = 2 then g - 1 else g end as c, case when g % 10 = 2 then 2 else 1 end as a) x`);
    console.log(`[${secs()} s] seeded ${hi.toLocaleString()} records`);
  }
  const bucket = `case when ttfb_ms is null then null ${[25, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000].map((b, i) => `when ttfb_ms < ${b} then ${i + 1}`).join(" ")} else 16 end`;
  await exec(sql`insert into usage_daily as d (account_id, day, routing_key_id, provider, model, outcome, requests, attempts, fallbacks,
      prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, cost_usd, seat_requests, seat_cost_usd, saved_usd, ttfb)
    select account_id, (created_at at time zone 'UTC')::date, routing_key_id, provider, model, outcome,
      count(*) filter (where outcome <> 'error'), count(*), count(*) filter (where outcome = 'error'),
      sum(prompt_tokens), sum(completion_tokens), 0, 0, sum(cost_usd), count(*) filter (where seat), coalesce(sum(cost_usd) filter (where seat), 0), 0,
      ARRAY[${sql.raw(Array.from({ length: 16 }, (_, i) => `count(*) filter (where b = ${i + 1})`).join(", "))}]
    from (select *, ${sql.raw(bucket)} as b from usage_records where account_id = ${acct.id}) r
    group by 1, 2, 3, 4, 5, 6`);
  await exec(sql`alter table usage_records enable trigger usage_rollup`);
  await exec(sql`analyze usage_records`);
  await exec(sql`analyze usage_daily`);
  const check = (await exec(sql`select (select count(*) from usage_records)::bigint as raw, (select sum(attempts) from usage_daily)::bigint as attempts,
    (select sum(requests) from usage_daily)::bigint as requests, (select count(*) from usage_daily)::int as cells,
    pg_size_pretty(pg_total_relation_size('usage_daily')) as rollup_size,
    (select pg_size_pretty(sum(pg_total_relation_size(inhrelid))) from pg_inherits where inhparent = 'usage_records'::regclass) as raw_size`))[0]!;
  console.log(`[${secs()} s] rollup built:`, check);
  if (Number(check.raw) !== ROWS || Number(check.attempts) !== ROWS) throw new Error("seed and rollup disagree");

  // ---- measure ----
  const time = async (fn: () => Promise<unknown>) => {
    const s = performance.now();
    await fn();
    return performance.now() - s;
  };
  const get = (path: string, token = acct.token) => async () => {
    const r = await gw.req(path, { token });
    if (r.status !== 200) throw new Error(`${path}: ${r.status} ${await r.text()}`);
    await r.arrayBuffer();
  };
  const p50 = async (fn: () => Promise<unknown>) => {
    await fn(); // warm: plan cache, key cache
    const xs: number[] = [];
    for (let i = 0; i < RUNS; i++) xs.push(await time(fn));
    return median(xs);
  };
  const maxId = Number((await exec(sql`select max(id) as m from usage_records`))[0]!.m);
  // The plans of a deep records page and of its lanes lookup (index scans expected, no full scan).
  for (const q of [
    sql`explain (analyze, costs off) select * from usage_records where account_id = ${acct.id} and id < ${maxId - Math.floor(ROWS / 2)} order by id desc limit 50`,
    sql`explain (analyze, costs off) select id, request_id from usage_records where account_id = ${acct.id} and request_id in ('req-11', 'req-12', 'req-13')`,
  ]) console.log((await exec(q)).map((r) => Object.values(r)[0]).join("\n"));
  // The records page's own statement (page and lanes in one), as the gateway sends it, at every
  // depth measured below: its plan once, and Postgres's own execution time per depth.
  const pageSql = (before?: number, key?: string) => {
    const q = pageQuery(gw.ctx.db, acct.id, { limit: 50, ...(before ? { before } : {}), ...(key ? { key } : {}) }).toSQL();
    return q.sql.replace(/\$(\d+)/g, (_, n) => { const v = q.params[Number(n) - 1]; return typeof v === "number" ? String(v) : `'${String(v).replace(/'/g, "''")}'`; });
  };
  console.log((await exec(sql.raw(`explain (analyze, costs off) ${pageSql(maxId - Math.floor(ROWS / 2))}`))).map((r) => Object.values(r)[0]).join("\n"));
  console.log((await exec(sql.raw(`explain (analyze, costs off) ${pageSql(undefined, keyIds[3])}`))).map((r) => Object.values(r)[0]).join("\n"));
  const execMs = async (before?: number, key?: string) => {
    const xs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const plan = (await exec(sql.raw(`explain (analyze, format json) ${pageSql(before, key)}`)))[0]!;
      const j = (Object.values(plan)[0] as Array<Record<string, number>> | string);
      const p = (typeof j === "string" ? JSON.parse(j) : j)[0]!;
      xs.push(p["Planning Time"]! + p["Execution Time"]!);
    }
    return median(xs);
  };
  const month = new Date().toISOString().slice(0, 7);
  const results: Array<[string, number, number]> = [];
  const report = async (name: string, fn: () => Promise<unknown>, target: number) => {
    const ms = await p50(fn);
    results.push([name, ms, target]);
    console.log(`${name.padEnd(58)} p50 ${ms.toFixed(1).padStart(7)} ms  (target ≤ ${target} ms)`);
  };
  await report("GET /v1/organizations/usage", get("/v1/organizations/usage"), 50);
  for (const by of ["day", "key", "lane", "model"]) await report(`GET /usage/groups?by=${by}`, get(`/v1/organizations/usage/groups?by=${by}`), 50);
  await report(`GET /usage/groups?by=day&month=${month}`, get(`/v1/organizations/usage/groups?by=day&month=${month}`), 50);
  await report("GET /v1/organizations/routing-keys (dashboard)", get("/v1/organizations/routing-keys"), 50);
  await report("GET /v1/organizations/me (dashboard)", get("/v1/organizations/me"), 50);
  for (const depth of [...new Set([0, 10_000, 1_000_000, Math.floor(ROWS / 2), ROWS - 100].filter((x) => x < ROWS))]) {
    const before = depth === 0 ? "" : `&before=${maxId - depth + 1}`;
    await report(`GET /usage/records?limit=50 at depth ${depth.toLocaleString()}`, get(`/v1/organizations/usage/records?limit=50${before}`), 20);
    console.log(`  its statement in Postgres: ${(await execMs(depth === 0 ? undefined : maxId - depth + 1)).toFixed(2)} ms planning + execution (median of 5 EXPLAIN ANALYZE)`);
  }
  await report("GET /usage/records?limit=50&key=… (filtered by key)", get(`/v1/organizations/usage/records?limit=50&key=${keyIds[3]}`), 20);
  console.log(`  its statement in Postgres: ${(await execMs(undefined, keyIds[3])).toFixed(2)} ms planning + execution (median of 5 EXPLAIN ANALYZE)`);

  // The budget counter after an empty Redis: its key deleted, GET /v1/key answers the month's spend
  // from the rollup (a reader never rebuilds a counter: the money path does, after the recovery barrier).
  const redis = new Redis(process.env.REDIS_URL!);
  const ck = counterKey(budgetKey.id, monthKey());
  await report("counter missing: DEL the counter, GET /v1/key (the rollup answers)", async () => {
    await redis.del(ck);
    await get("/v1/key", budgetKey.raw)();
  }, 100);
  await redis.del(ck);
  const q0 = gw.ctx.dbh.queries();
  const wall = await time(() => Promise.all(Array.from({ length: 20 }, () => get("/v1/key", budgetKey.raw)())));
  const sums = gw.ctx.dbh.queries() - q0;
  console.log(`20 concurrent GET /v1/key after the counter vanished: ${wall.toFixed(1)} ms wall, ${sums} Postgres statement(s)`);
  redis.disconnect();

  console.log("\n| call | p50 (ms) | target |\n|---|---:|---:|");
  for (const [n, ms, target] of results) console.log(`| ${n} | ${ms.toFixed(1)} | ≤ ${target}${ms <= target ? "" : " (missed)"} |`);
  console.log(`\n${ROWS.toLocaleString()} records, raw ${check.raw_size}, rollup ${check.rollup_size} (${check.cells} cells); ${RUNS} runs per call after one warm-up; 20 concurrent reads of a missing counter: ${sums} statement(s), ${wall.toFixed(1)} ms`);
} finally {
  await gw.stop();
}
