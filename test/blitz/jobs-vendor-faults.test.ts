// A vendor batch job through the faults a fleet meets (CONTRACT §9 "Batch work", §7 store outages),
// on stores of this test's own: the gateway process that submitted the job and polls it is killed
// with SIGKILL while the vendor works, then Redis (a redis-server without persistence) is killed
// and started again empty. The job's hold on the budget comes back from Postgres in the rebuilt
// counter; another gateway over the same database finishes the job: one upload, one record per
// item, the key's counter equal to the records' sum, the hold released. And Postgres (a cluster of
// this test's own) stopped while the vendor works: the polls fail and are tried again, and once
// it is back the job ends with every line written once.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq, like } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startPrivatePostgres, type PrivatePostgres } from "../helpers/private-postgres.ts";
import postgres from "postgres";
import { until } from "../helpers/until.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";
import { post, spawnSibling, type ChildGateway } from "../relay/child-gateway.ts";
import { keyContextOf } from "../helpers/relay-world.ts";
import { counterKey, fromNano, monthSpendUsd } from "../../src/money/counters.ts";
import { monthKey } from "../../src/lib/time.ts";
import { relayDeps } from "../../src/relay/relay-deps.ts";
import { blitzVendorBatches, usageRecords } from "../../src/store/db/schema/index.ts";

const name = REAL_STORES
  ? "a vendor batch job through SIGKILL and an empty Redis (own redis-server)"
  : "a vendor batch job through SIGKILL and an empty Redis: skipped in embedded mode (no second process shares PGlite, no Redis to lose)";

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let A: MockUpstream;
  let gw: TestGateway;
  let child: ChildGateway | null = null;

  beforeAll(async () => {
    [redis, A] = await Promise.all([startPrivateRedis(), startMockOpenAI()]);
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url });
  }, 60_000);
  afterAll(async () => {
    await child?.kill().catch(() => {});
    await gw?.stop();
    await redis?.stop();
    await A?.stop();
  }, 60_000);

  test("CONTRACT §9 batch work: the polling instance SIGKILLed and Redis restarted empty while the vendor works lose and double nothing; the hold comes back from Postgres", async () => {
    A.batch.setOptions({ hold: true });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const n = 300;
    const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `VF p${i}` }], mock: { prompt_tokens: 80, completion_tokens: 40 } }));
    child = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: A.url });
    const r = await post(child.url, key.raw, { model: "gpt-4o-mini", max_tokens: 50, completion_window: "24h", prompts }, "/blitz/jobs");
    expect(r.status).toBe(202);
    const id = String(((await r.json()) as { id: string }).id);
    const row = await until("the vendor batch id stored", async () => {
      const [x] = await gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, id));
      return x?.vendorBatchId ? x : null;
    }, 30_000);
    expect(row.heldUsd).toBeGreaterThan(0);
    const k = (await keyContextOf(gw, key.raw))!;
    expect(fromNano((await gw.ctx.kv.getNumber(counterKey(key.id, monthKey())))!)).toBeCloseTo(row.heldUsd, 9);

    await child.kill();
    child = null;
    await redis.kill();
    await Bun.sleep(300);
    await redis.restart();
    // Redis has forgotten the counter; a live request on the key rebuilds it, hold included.
    const live = await until("a live request admitted after the restart", async () => {
      const res = await post(gw.url, key.raw, { model: "gpt-4o-mini", max_tokens: 20, messages: [{ role: "user", content: "VF live" }] });
      return res.status === 200 ? res : null;
    }, 30_000);
    expect(live.status).toBe(200);
    await gw.ctx.services.usage.flush();
    const [liveRecord] = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, key.id));
    expect((await monthSpendUsd(relayDeps(gw.ctx), k)).usd).toBeCloseTo(row.heldUsd + liveRecord!.costUsd, 9);

    // The vendor finishes; this gateway takes the batch over (the dead one's claim lapses) and ends it.
    A.batch.setOptions({});
    gw.ctx.services.blitzJobs.nudgeVendor?.();
    const done = await until("the job's end", async () => {
      const j = await gw.call(`/blitz/jobs/${id}?limit=1`, { token: key.raw });
      return j.body.status === "completed" ? j.body : null;
    }, 90_000);
    expect(done.progress.succeeded).toBe(n);
    expect(A.batch.uploads).toBe(1);
    expect(A.batch.batches.size).toBe(1);
    await gw.ctx.services.usage.flush();
    const rows = await gw.ctx.db.select().from(usageRecords).where(like(usageRecords.requestId, `${id}.%`));
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    expect(sum).toBeGreaterThan(0);
    expect((await monthSpendUsd(relayDeps(gw.ctx), k)).usd).toBeCloseTo(sum + liveRecord!.costUsd, 9);
    const [ended] = await gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, id));
    expect([ended!.status, ended!.heldUsd]).toEqual(["ended", 0]);
  }, 150_000);
});

describe.if(REAL_STORES)(REAL_STORES ? "a vendor batch job through a Postgres outage (own Postgres cluster)" : "skipped", () => {
  let pg: PrivatePostgres;
  let A: MockUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    [pg, A] = await Promise.all([startPrivatePostgres(), startMockOpenAI()]);
    const admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    await admin.unsafe("create database vendor_outage");
    await admin.end();
    gw = await startTestGateway({ DATABASE_URL: pg.url.replace(/\/postgres$/, "/vendor_outage"), REDIS_URL: "", PROVIDER_OPENAI_BASE_URL: A.url });
  }, 60_000);
  // The postmaster gets 5 s to shut down before it is killed: more than the default hook timeout.
  afterAll(async () => {
    await gw?.stop();
    await pg?.destroy();
    await A?.stop();
  }, 30_000);

  test("CONTRACT §9 batch work: Postgres stopped while the vendor works: the polls fail and are tried again; once it is back the job ends, every line written once", async () => {
    A.batch.setOptions({ hold: true });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    const n = 120;
    const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `VP p${i}` }], mock: { prompt_tokens: 60, completion_tokens: 20 } }));
    const r = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 30, completion_window: "24h", prompts } });
    expect(r.status).toBe(202);
    const id = String(r.body.id);
    await until("the vendor batch id stored", async () => {
      const [x] = await gw.ctx.db.select().from(blitzVendorBatches).where(eq(blitzVendorBatches.jobId, id));
      return x?.vendorBatchId ? x : null;
    }, 30_000);

    // Postgres away while the vendor works: every poll fails (the claim cannot be taken) and is
    // tried again at the next tick; the vendor batch waits at the vendor meanwhile.
    const polls = () => [...A.batch.batches.values()].reduce((a, b) => a + b.polls, 0);
    await pg.stopServer();
    const before = polls();
    await Bun.sleep(4000);
    expect(polls()).toBe(before);
    await pg.startServer();
    A.batch.setOptions({});

    const done = await until("the job's end", async () => {
      const j = await gw.call(`/blitz/jobs/${id}?limit=1`, { token: key.raw }).catch(() => null);
      return j?.body?.status === "completed" ? j.body : null;
    }, 60_000);
    expect(done.progress.succeeded).toBe(n);
    expect(A.batch.uploads).toBe(1);
    const rows = await gw.ctx.db.select().from(usageRecords).where(like(usageRecords.requestId, `${id}.%`));
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((x) => x.requestId)).size).toBe(n);
    const sum = rows.reduce((a, x) => a + x.costUsd, 0);
    expect((await monthSpendUsd(relayDeps(gw.ctx), (await keyContextOf(gw, key.raw))!)).usd).toBeCloseTo(sum, 9);
  }, 150_000);
});
