// The daily usage rollup (usage_daily) every report, the dashboard and a budget counter rebuild
// read instead of the raw, month-partitioned usage_records: kept by the inserting statement, so
// it always equals the raw sums; client requests counted once (not per attempt), fallbacks and
// 402/429 refusals apart; raw partitions dropped by USAGE_RETENTION_MONTHS while the rollup stays.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq, sql } from "drizzle-orm";
import { maintainUsagePartitions, retentionCutoff } from "../../src/jobs/usage-partitions.ts";
import { reportRead } from "../../src/management/usage/report-read.ts";
import { counterKey, monthSpendUsd, recordedSpendUsd } from "../../src/store/spend-counters.ts";
import { usageDaily, usageRecords } from "../../src/store/db/schema/index.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";

type Row = typeof usageRecords.$inferInsert;
const rowsOf = (r: unknown) => (Array.isArray(r) ? r : (r as { rows: unknown[] }).rows) as Array<Record<string, unknown>>;

describe(`usage rollup and partitions (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  beforeAll(async () => {
    [A, B] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, PROVIDER_GROQ_BASE_URL: B.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A, B].map((m) => m?.stop()));
  }, 60_000);

  const groups = async (token: string, by: string, month?: string) =>
    (await gw.call(`/v1/organizations/usage/groups?by=${by}${month ? `&month=${month}` : ""}`, { token })).body;

  test("rollup equals the raw sums after retried and duplicate inserts (a redelivered record adds nothing)", async () => {
    const acct = await createAccount(gw);
    const q = gw.ctx.services.usageQueue;
    const at = new Date(Date.now() - 60_000);
    const tag = crypto.randomUUID().slice(0, 8);
    const rows: Row[] = [];
    for (let i = 0; i < 40; i++) {
      rows.push({ accountId: acct.id, routingKeyId: `rk-${i % 3}`, requestId: `${tag}-${i}`, recordKey: `${tag}.${i}.1`, attempt: 1, endpoint: "chat",
        laneIndex: 0, provider: i % 2 ? "openai" : "groq", model: `m${i % 4}`, status: 200, outcome: i % 5 ? "ok" : "error",
        promptTokens: i, completionTokens: 2 * i, costUsd: i / 1000, ttfbMs: 10 * i, createdAt: at });
    }
    for (const r of rows) q.push({ ...r, createdAt: at.toISOString() });
    await q.flushQueued();
    // The same records again (a usage-stream redelivery, a retried batch), and half of them a third time.
    for (const r of rows) q.push({ ...r, createdAt: at.toISOString() });
    await q.flushQueued();
    await gw.ctx.db.insert(usageRecords).values(rows.slice(0, 20)).onConflictDoNothing();

    const raw = rowsOf(await gw.ctx.db.execute(sql`select count(*)::int as n, sum(prompt_tokens)::int as p, sum(completion_tokens)::int as c,
      sum(cost_usd)::float8 as usd from usage_records where account_id = ${acct.id}`))[0]!;
    const roll = rowsOf(await gw.ctx.db.execute(sql`select sum(requests)::int as req, sum(attempts)::int as n, sum(prompt_tokens)::int as p,
      sum(completion_tokens)::int as c, sum(cost_usd)::float8 as usd from usage_daily where account_id = ${acct.id}`))[0]!;
    expect(raw.n).toBe(40);
    expect({ n: roll.n, p: roll.p, c: roll.c, req: roll.req }).toEqual({ n: raw.n, p: raw.p, c: raw.c, req: 40 });
    expect(Number(roll.usd)).toBeCloseTo(Number(raw.usd), 9);
    // Per group too: the model grouping adds up to the raw records grouped the same way.
    const byModel = (await groups(acct.token, "model")).groups;
    const rawByModel = rowsOf(await gw.ctx.db.execute(sql`select provider, model, count(*)::int as n, count(*) filter (where outcome = 'error')::int as e
      from usage_records where account_id = ${acct.id} group by 1, 2`));
    for (const r of rawByModel) {
      const g = byModel.find((x: any) => x.provider === r.provider && x.model === r.model);
      expect([g.requests, g.attempts, g.errors]).toEqual([r.n, r.n, r.e]);
    }
  });

  test("one INSERT of thousands of records rolls up like the raw records: 1,500 calls that fell back, half of them begun in an earlier statement, are 1,500 requests (all in the answering lane's group), 3,000 attempts, 1,500 fallbacks", async () => {
    // The rollup's latest-record rule is a window over the statement's records (migration 0011: it
    // was a lookup per record, quadratic in the batch); the usage drain writes batches this large.
    const acct = await createAccount(gw);
    const q = gw.ctx.services.usageQueue;
    const at = new Date(Date.now() - 60_000).toISOString();
    const tag = crypto.randomUUID().slice(0, 8);
    const record = (c: number, attempt: number) => ({ accountId: acct.id, routingKeyId: "rk-big", requestId: `${tag}-${c}`, recordKey: `${tag}c${c}.${attempt}`,
      attempt, endpoint: "chat", laneIndex: attempt - 1, provider: attempt === 1 ? "groq" : "openai", model: "m", status: attempt === 1 ? 500 : 200,
      outcome: attempt === 1 ? "error" : "ok", errorCode: attempt === 1 ? "http_500" : null, promptTokens: 10, completionTokens: attempt === 1 ? 0 : 5,
      cachedTokens: 0, cacheWriteTokens: 0, costUsd: attempt === 1 ? 0 : 0.001, priceEstimated: false, latencyMs: 5, ttfbMs: 5, seat: false, createdAt: at });
    const calls = Array.from({ length: 1500 }, (_, c) => c);
    q.pushJson(JSON.stringify(calls.slice(0, 750).map((c) => record(c, 1))));
    await q.flushQueued();
    q.pushJson(JSON.stringify([...calls.slice(750).map((c) => record(c, 1)), ...calls.map((c) => record(c, 2))]));
    await q.flushQueued();
    const roll = rowsOf(await gw.ctx.db.execute(sql`select sum(requests)::int as req, sum(attempts)::int as att, sum(fallbacks)::int as fb,
      (sum(requests) filter (where outcome = 'ok'))::int as ok from usage_daily where account_id = ${acct.id}`))[0]!;
    expect(roll).toEqual({ req: 1500, att: 3000, fb: 1500, ok: 1500 });
  });

  test("requests vs attempts vs fallbacks: 3 client calls that each fell back and succeeded are 3 requests, 6 attempts, 0 errors, 3 fallbacks, in the groups and in the summary's totals", async () => {
    const acct = await createAccount(gw);
    const credA = await addCredential(gw, acct.id, "openai");
    const credB = await addCredential(gw, acct.id, "groq");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id)] });
    A.setDefault({ status: 503 });
    try {
      for (let i = 0; i < 3; i++) {
        const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ mock: { content: "from B" } }) });
        expect(r.status).toBe(200);
      }
    } finally {
      A.setDefault({});
    }
    await gw.ctx.services.usage.flush();
    const summary = (await gw.call("/v1/organizations/usage", { token: acct.token })).body;
    expect(summary.totals).toMatchObject({ requests: 3, errors: 0, attempts: 6, fallbacks: 3, budget_refusals: 0, rate_limit_refusals: 0 });
    const lanes = Object.fromEntries((await groups(acct.token, "lane")).groups.map((g: any) => [g.provider, g]));
    expect(lanes.openai).toMatchObject({ requests: 0, attempts: 3, failed_attempts: 3, errors: 0, fallbacks: 3 });
    expect(lanes.groq).toMatchObject({ requests: 3, attempts: 3, failed_attempts: 0, errors: 0, fallbacks: 0 });
    const day = (await groups(acct.token, "day")).groups;
    expect(day.reduce((s: number, g: any) => s + g.requests, 0)).toBe(3);
    expect(day.reduce((s: number, g: any) => s + g.attempts, 0)).toBe(6);
  });

  test("requests vs attempts: a request's attempts delivered out of order and twice still count one request, in the lane of its last attempt", async () => {
    const acct = await createAccount(gw);
    const at = new Date(Date.now() - 5000);
    const call = `t-${crypto.randomUUID().slice(0, 8)}`;
    const attempt = (n: number, provider: string, ok: boolean): Row => ({ accountId: acct.id, routingKeyId: "rk", requestId: call, recordKey: `${call}.${n}`,
      attempt: n, endpoint: "chat", laneIndex: n - 1, provider, model: "m", status: ok ? 200 : 500, outcome: ok ? "ok" : "error", createdAt: new Date(at.getTime() + n) });
    await gw.ctx.db.insert(usageRecords).values([attempt(3, "mistral", true)]).onConflictDoNothing();
    await gw.ctx.db.insert(usageRecords).values([attempt(1, "openai", false)]).onConflictDoNothing();
    await gw.ctx.db.insert(usageRecords).values([attempt(2, "groq", false), attempt(1, "openai", false)]).onConflictDoNothing();
    await gw.ctx.db.insert(usageRecords).values([attempt(3, "mistral", true), attempt(2, "groq", false)]).onConflictDoNothing();
    const lanes = Object.fromEntries((await groups(acct.token, "lane")).groups.map((g: any) => [g.provider, g]));
    expect([lanes.openai.requests, lanes.openai.fallbacks, lanes.openai.attempts]).toEqual([0, 1, 1]);
    expect([lanes.groq.requests, lanes.groq.fallbacks, lanes.groq.attempts]).toEqual([0, 1, 1]);
    expect([lanes.mistral.requests, lanes.mistral.fallbacks, lanes.mistral.errors]).toEqual([1, 0, 0]);
  });

  test("refusals counted: 402 budget_exceeded and 429 rate_limit_exceeded are recorded apart from requests, without a record each, in the groups and in the summary's totals", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const broke = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 0.000000001, label: "broke" });
    const slow = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: 1, label: "slow" });
    for (let i = 0; i < 3; i++) expect((await gw.call("/v1/chat/completions", { token: broke.raw, body: chatBody() })).status).toBe(402);
    const statuses: number[] = [];
    for (let i = 0; i < 3; i++) statuses.push((await gw.call("/v1/chat/completions", { token: slow.raw, body: chatBody() })).status);
    expect(statuses).toEqual([200, 429, 429]);
    await gw.ctx.services.usage.flush();
    const keys = Object.fromEntries((await groups(acct.token, "key")).groups.map((g: any) => [g.label, g]));
    expect(keys.broke).toMatchObject({ requests: 0, budget_refusals: 3, rate_limit_refusals: 0 });
    expect(keys.slow).toMatchObject({ requests: 1, budget_refusals: 0, rate_limit_refusals: 2 });
    const summary = (await gw.call("/v1/organizations/usage", { token: acct.token })).body;
    expect(summary.totals).toMatchObject({ requests: 1, errors: 0, attempts: 1, budget_refusals: 3, rate_limit_refusals: 2 });
    // A refusal has no lane: it adds no by_provider row of its own.
    expect(summary.by_provider.map((p: any) => p.provider)).toEqual(["openai"]);
    const raw = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.accountId, acct.id));
    expect(raw.length).toBe(1); // the one served request; refusals have no raw record
  });

  test("USAGE_RETENTION_MONTHS: raw partitions of old months are dropped, the rollup stays, and reports and the counter rebuild over them still answer", async () => {
    const acct = await createAccount(gw);
    const key = { id: `rk-${crypto.randomUUID().slice(0, 8)}`, monthlyBudgetUsd: 10, budgetExcludesSeats: true };
    // A month far enough back that nothing else lives in it: its partition is made as the job would have.
    await gw.ctx.db.execute(sql`select usage_ensure_partition('2020-02-01'::date)`);
    const old = new Date(Date.UTC(2020, 1, 10, 12));
    await gw.ctx.db.insert(usageRecords).values([1, 2, 3].map((i) => ({ accountId: acct.id, routingKeyId: key.id, recordKey: `old-${key.id}.${i}.1`,
      attempt: 1, endpoint: "chat", laneIndex: 0, provider: "openai", model: "m", status: 200, outcome: "ok", promptTokens: 10, costUsd: 0.25, createdAt: old })));
    const before = await groups(acct.token, "day", "2020-02");
    expect(before.groups).toMatchObject([{ date: "2020-02-10", requests: 3, prompt_tokens: 30, cost_usd: 0.75 }]);

    const run = await maintainUsagePartitions(gw.ctx.db, 1);
    expect(run.dropped).toBeGreaterThanOrEqual(1);
    const raw = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.accountId, acct.id));
    expect(raw).toEqual([]);
    const parts = rowsOf(await gw.ctx.db.execute(sql`select to_regclass('usage_records_2020_02')::text as p`));
    expect(parts[0]!.p).toBeNull();
    // The current month and the ones ahead are never dropped.
    const now = new Date();
    const cur = `usage_records_${now.toISOString().slice(0, 7).replace("-", "_")}`;
    expect(rowsOf(await gw.ctx.db.execute(sql`select to_regclass(${cur})::text as p`))[0]!.p).toBe(cur);
    expect(retentionCutoff(new Date(Date.UTC(2026, 2, 31)), 1)).toBe("2026-02-28");

    expect((await groups(acct.token, "day", "2020-02")).groups).toEqual(before.groups);
    expect(await recordedSpendUsd(gw.ctx, key, "2020-02")).toBe(0.75);
    const rolled = await gw.ctx.db.select().from(usageDaily).where(and(eq(usageDaily.accountId, acct.id)));
    expect(rolled.length).toBe(1);
  });

  test("keyset pagination is stable across inserts: pages after the first neither repeat nor skip a record when new ones arrive", async () => {
    const acct = await createAccount(gw);
    const mk = (i: number): Row => ({ accountId: acct.id, routingKeyId: "rk", recordKey: `${acct.id}.p${i}.1`, attempt: 1, endpoint: "chat",
      provider: "openai", status: 200, outcome: "ok", requestId: `r${i}`, createdAt: new Date(Date.now() - 1000 + i) });
    await gw.ctx.db.insert(usageRecords).values(Array.from({ length: 25 }, (_, i) => mk(i)));
    const seen: string[] = [];
    let before: number | null = null;
    for (let page = 0; page < 10; page++) {
      const r: { records: Array<{ request_id: string }>; next_before: number | null } = (await gw.call(`/v1/organizations/usage/records?limit=7${before ? `&before=${before}` : ""}`, { token: acct.token })).body;
      seen.push(...r.records.map((x) => x.request_id));
      // Records written between two pages are newer: they belong before page 1, not in the pages after.
      await gw.ctx.db.insert(usageRecords).values([mk(100 + page)]);
      before = r.next_before;
      if (!before) break;
    }
    expect(seen).toEqual(Array.from({ length: 25 }, (_, i) => `r${24 - i}`));
  });

  test("counter rebuild single-flight: 20 concurrent reads of a key's month spend after the counter vanished run one month sum, from the rollup", async () => {
    const acct = await createAccount(gw);
    const key = { id: `rk-${crypto.randomUUID().slice(0, 8)}`, monthlyBudgetUsd: 100, budgetExcludesSeats: true };
    await gw.ctx.db.insert(usageRecords).values([1, 2].map((i) => ({ accountId: acct.id, routingKeyId: key.id, recordKey: `sf-${key.id}.${i}.1`,
      attempt: 1, endpoint: "chat", provider: "openai", status: 200, outcome: "ok", costUsd: 1.5, createdAt: new Date(Date.now() - 1000) })));
    const month = new Date().toISOString().slice(0, 7);
    expect(await gw.ctx.kv.getNumber(counterKey(key.id, month))).toBeNull();
    const q0 = gw.ctx.dbh.queries();
    const all = await Promise.all(Array.from({ length: 20 }, () => monthSpendUsd(gw.ctx, key)));
    expect(gw.ctx.dbh.queries() - q0).toBe(1);
    expect(all.every((s) => s.usd === 3)).toBe(true);
  });

  test("statement_timeout: a report read that runs too long is cancelled by the database, and the next read is served", async () => {
    const slow = reportRead(gw.ctx.db, (tx) => tx.execute(sql`select pg_sleep(3)`), 100);
    if (REAL_STORES) {
      const err = await slow.then(() => null, (e) => e);
      let code: unknown = null;
      for (let x = err; x && !code; x = x.cause) code = x.code;
      expect(code).toBe("57014"); // query_canceled
    } else {
      // The embedded database has no timer to cancel with: the fence there is the bounded slots.
      await slow.catch(() => {});
    }
    const ok = await reportRead(gw.ctx.db, (tx) => tx.execute(sql`select 1 as one`));
    expect(rowsOf(ok)[0]!.one).toBe(1);
  });
});

describe("usage partitioning migration", () => {
  test("the migration converts an existing usage_records table: rows kept in month partitions, ids continued, the rollup built from them", async () => {
    const { PGlite } = await import("@electric-sql/pglite");
    const { drizzle } = await import("drizzle-orm/pglite");
    const { migrate } = await import("drizzle-orm/pglite/migrator");
    const { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } = await import("node:fs");
    const { join } = await import("node:path");
    const { tmpdir } = await import("node:os");
    const all = join(import.meta.dir, "../../src/store/db/migrations");
    const before = mkdtempSync(join(tmpdir(), "usage-mig-"));
    try {
      // The migrations up to the last one before partitioning.
      cpSync(all, before, { recursive: true });
      const journal = JSON.parse(readFileSync(join(before, "meta/_journal.json"), "utf8"));
      journal.entries = journal.entries.filter((e: { tag: string }) => e.tag < "0006");
      writeFileSync(join(before, "meta/_journal.json"), JSON.stringify(journal));
      const c = new PGlite();
      const db = drizzle(c);
      await migrate(db, { migrationsFolder: before });
      await c.query(`insert into usage_records (account_id, routing_key_id, record_key, attempt, endpoint, lane_index, provider, status, outcome, cost_usd, created_at) values
        ('a','k','c1.1',1,'chat',0,'openai',500,'error',0,'2026-09-03'), ('a','k','c1.2',2,'chat',1,'groq',200,'ok',1,'2026-09-03'),
        ('a','k','c2.1',1,'chat',0,'openai',200,'ok',2,'2026-11-01')`);
      await migrate(db, { migrationsFolder: all });
      const rows = (await c.query<{ part: string; id: number }>("select tableoid::regclass::text as part, id from usage_records order by id")).rows;
      expect(rows).toEqual([{ part: "usage_records_2026_09", id: 1 }, { part: "usage_records_2026_09", id: 2 }, { part: "usage_records_2026_11", id: 3 }]);
      const roll = (await c.query<{ provider: string; requests: number; fallbacks: number; cost_usd: number }>(
        "select provider, requests::int, fallbacks::int, cost_usd from usage_daily order by day, provider")).rows;
      expect(roll).toEqual([
        { provider: "groq", requests: 1, fallbacks: 0, cost_usd: 1 },
        { provider: "openai", requests: 0, fallbacks: 1, cost_usd: 0 },
        { provider: "openai", requests: 1, fallbacks: 0, cost_usd: 2 },
      ]);
      const next = (await c.query<{ id: number }>("insert into usage_records (account_id, endpoint, provider, status, outcome) values ('a','chat','x',200,'ok') returning id")).rows;
      expect(next[0]!.id).toBe(4);
      await c.close();
    } finally {
      rmSync(before, { recursive: true, force: true });
    }
  });
});
