// /blitz jobs when Redis loses the queue (CONTRACT §8, §7 store outages): BullMQ keeps its copy of
// the items only in Redis. A redis-server of this test's own, without persistence, is killed in the
// middle of a job and started again empty: prompts refused meanwhile (503 budget_unavailable) wait
// and try again, and the items Redis forgot are put back in the queue by the gateway. The job still
// completes, every prompt sent once and recorded once.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { jobWhenEnded, promptsSent } from "../helpers/blitz-jobs.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { addCredential, addRoutingKey, lane } from "../relay/fixtures.ts";

const name = REAL_STORES
  ? "/blitz jobs when Redis restarts empty (own redis-server)"
  : "/blitz jobs when Redis restarts empty: skipped in embedded mode (the in-process queue has no Redis to lose)";

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let mock: MockUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    [redis, mock] = await Promise.all([startPrivateRedis(), startMockOpenAI()]);
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: mock.url, BLITZ_JOB_CONCURRENCY: "4" });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await redis?.stop();
    await mock?.stop();
  }, 60_000);

  test("CONTRACT §8: a job whose queue Redis lost midway (killed, restarted empty) completes: its items are put back, every prompt sent once and recorded once", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 50 });
    const n = 60;
    const prompts = Array.from({ length: n }, (_, i) => ({ messages: [{ role: "user", content: `RL p${i}.` }], mock: { latency_ms: 80 } }));
    const sentOf = () => promptsSent(mock, "RL");
    const made = await gw.call("/blitz/jobs", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 20, prompts } });
    expect(made.status).toBe(202);
    const id = String(made.body.id);
    while (sentOf().size < 8) await Bun.sleep(10);

    await redis.kill();
    await Bun.sleep(500);
    await redis.restart();
    // The queue is gone with the rest of Redis: what was left of the job is known only to Postgres.
    const left = n - sentOf().size;
    expect(left).toBeGreaterThan(0);

    const job = await jobWhenEnded(gw, key.raw, id);
    expect(job.status).toBe("completed");
    expect(job.progress).toMatchObject({ done: n, remaining: 0, failed: 0, not_run: 0 });
    expect(job.progress.succeeded + job.progress.interrupted).toBe(n);
    const sent = sentOf();
    expect(sent.size).toBe(n);
    expect([...sent.values()].every((c) => c === 1)).toBe(true);

    let rows: Array<typeof usageRecords.$inferSelect> = [];
    for (const until = Date.now() + 20_000; Date.now() < until; await Bun.sleep(200)) {
      await gw.ctx.services.usage.flush().catch(() => {});
      rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, key.id));
      if (rows.length >= n) break;
    }
    expect(rows).toHaveLength(n);
    expect(new Set(rows.map((r) => r.requestId)).size).toBe(n);
  }, 120_000);
});
