// Redis failovers (CONTRACT §2 REDIS_SENTINELS, §7 store outages): a Sentinel-managed Redis of the
// test's own (master, replica, Sentinel: redis-server processes on loopback, stopped by PID), and
// a private Redis restored from an older snapshot, the way a failover or an AOF restart loses
// the last writes the old master acknowledged.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import Redis from "ioredis";
import { counterKey, inflightKey } from "../../src/money/counters.ts";
import { monthKey } from "../../src/lib/time.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { BullJobQueue } from "../../src/blitz/jobs/bullmq-queue.ts";
import { SENTINEL_MASTER, startPrivateSentinelRedis, type PrivateSentinelRedis } from "../helpers/private-sentinel.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "../relay/fixtures.ts";

const HAVE = Boolean(Bun.which("redis-server"));
const label = HAVE ? storesLabel : "SKIPPED: redis-server is missing (apt-get install redis-server)";

async function records(gw: TestGateway, keyId: string) {
  await gw.ctx.services.usage.flush();
  return gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, keyId));
}

async function until(f: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
  const t0 = Date.now();
  while (Date.now() - t0 < timeoutMs) {
    if (await f().catch(() => false)) return true;
    await Bun.sleep(100);
  }
  return false;
}

describe.if(HAVE)(`Redis Sentinel failover under load (${label})`, () => {
  let sentinel: PrivateSentinelRedis;
  let mock: MockUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    sentinel = await startPrivateSentinelRedis();
    mock = await startMockOpenAI();
    gw = await startTestGateway({
      REDIS_URL: "", REDIS_SENTINELS: sentinel.sentinels, REDIS_SENTINEL_MASTER: SENTINEL_MASTER, REDIS_PASSWORD: sentinel.password,
      PROVIDER_OPENAI_BASE_URL: mock.url,
    });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await mock?.stop();
    await sentinel?.stop();
  }, 60_000);

  // The job queue is shared only over a shared database: with the embedded one it stays in process.
  test.if(Boolean(process.env.DATABASE_URL))("CONTRACT §2 + §8: /blitz jobs run on BullMQ through the Sentinels' master (REDIS_SENTINELS, not REDIS_URL)", async () => {
    expect(gw.ctx.services.blitzJobs.queue).toBeInstanceOf(BullJobQueue);
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    const r = await gw.call("/blitz/jobs", { token: k.raw, body: { model: "gpt-4o-mini", prompts: Array.from({ length: 20 }, (_, i) => `sentinel job ${i}`) } });
    expect(r.status).toBe(202);
    let job = r.body;
    for (let i = 0; i < 600 && job.progress.remaining > 0; i++) {
      await Bun.sleep(100);
      job = (await gw.call(`/blitz/jobs/${r.body.id}?limit=1`, { token: k.raw })).body;
    }
    expect([job.status, job.progress.succeeded]).toEqual(["completed", 20]);
  }, 90_000);

  test("CONTRACT §2 + §7: a killed master: budgeted requests answer 503 budget_unavailable fast while no master answers, /readyz says not ready, service resumes after the promotion, the ceiling holds and every upstream call has one usage record", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const budget = 0.05;
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
    const upstream0 = mock.received.length;
    const statuses: number[] = [];
    const codes = new Set<string>();
    let ok = 0;
    let okAfterPromotion = 0;
    let promoted = false;
    let exhausted = 0;
    const deadline = Date.now() + 60_000;
    const worker = async (w: number) => {
      for (let i = 0; Date.now() < deadline; i++) {
        const stream = (w + i) % 2 === 0;
        const body = chatBody({ stream, max_tokens: 1000, mock: { completion_tokens: 1000, latency_ms: 40 }, ...(stream ? { stream_options: { include_usage: true } } : {}) });
        const r = await fetch(gw.url + "/v1/chat/completions", {
          method: "POST", headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" }, body: JSON.stringify(body),
          signal: AbortSignal.timeout(20_000),
        });
        const text = await r.text();
        statuses.push(r.status);
        if (r.status === 200) {
          ok++;
          if (promoted) okAfterPromotion++;
          if (stream) expect(text).toContain("[DONE]");
        } else {
          const err = JSON.parse(text).error;
          codes.add(`${r.status} ${err.code}`);
          if (r.status === 503) expect(r.headers.get("retry-after")).toBeTruthy();
          if (r.status === 402) {
            exhausted++;
            return;
          }
          await Bun.sleep(50);
        }
      }
    };
    const load = Promise.all([0, 1, 2, 3].map(worker));
    expect(await until(async () => ok >= 10, 30_000)).toBe(true);
    const old = await sentinel.masterPort();
    await sentinel.kill(old);
    expect(await until(async () => (await fetch(gw.url + "/readyz")).status === 503, 10_000)).toBe(true);
    await sentinel.waitPromoted(old);
    promoted = true;
    expect(await until(async () => (await fetch(gw.url + "/readyz")).status === 200, 20_000)).toBe(true);
    await load;
    // Nothing but answers, budget refusals and fast outage refusals; the load ran until the budget ended.
    expect([...new Set(statuses)].filter((s) => ![200, 402, 503].includes(s))).toEqual([]);
    expect([...codes].filter((c) => c !== "402 budget_exceeded" && c !== "503 budget_unavailable")).toEqual([]);
    expect(okAfterPromotion).toBeGreaterThan(0);
    expect(exhausted).toBe(4);
    // Every call that reached the upstream has exactly one record, and the spend kept the ceiling.
    const upstream = mock.received.length - upstream0;
    let rows = await records(gw, k.id);
    for (let i = 0; i < 200 && rows.length < upstream; i++) {
      await Bun.sleep(100);
      rows = await records(gw, k.id);
    }
    expect(rows.length).toBe(upstream);
    expect(new Set(rows.map((r) => r.recordKey)).size).toBe(rows.length);
    const spent = rows.reduce((s, r) => s + r.costUsd, 0);
    expect(spent).toBeLessThanOrEqual(budget + 1e-4);
    expect(spent).toBeGreaterThan(budget * 0.8);
    // The counter on the new master never counts less than was spent (it is what admission trusts).
    const probe = sentinel.client(await sentinel.masterPort());
    try {
      await probe.connect();
      const counter = Number(await probe.get(counterKey(k.id, monthKey())));
      expect(counter / 1e9).toBeGreaterThanOrEqual(spent - 1e-6);
    } finally {
      probe.disconnect();
    }
  }, 90_000);
});

describe.if(HAVE)(`REDIS_URL on a master a failover demoted (${label})`, () => {
  let sentinel: PrivateSentinelRedis;
  let mock: MockUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    sentinel = await startPrivateSentinelRedis();
    mock = await startMockOpenAI();
    gw = await startTestGateway({ REDIS_URL: `redis://:${sentinel.password}@127.0.0.1:${sentinel.ports[0]}`, PROVIDER_OPENAI_BASE_URL: mock.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await mock?.stop();
    await sentinel?.stop();
  }, 60_000);

  test("CONTRACT §7: READONLY from a demoted master is an outage: budgeted requests answer 503 budget_unavailable and /readyz 503, not writes into a replica", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5 });
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(200);
    expect((await gw.call("/readyz")).status).toBe(200);
    const s = new Redis({ host: "127.0.0.1", port: Number(sentinel.sentinels.split(",")[0]!.split(":")[1]), lazyConnect: true });
    try {
      await s.connect();
      await s.call("SENTINEL", "failover", SENTINEL_MASTER);
    } finally {
      s.disconnect();
    }
    const promoted = await sentinel.waitPromoted(sentinel.ports[0]!);
    // What the Sentinel does to a live old master at its next check (it polls every 10 s).
    const old = sentinel.client(sentinel.ports[0]!);
    try {
      await old.connect();
      await old.call("REPLICAOF", "127.0.0.1", String(promoted));
    } finally {
      old.disconnect();
    }
    expect(await until(async () => (await gw.call("/readyz")).status === 503, 15_000)).toBe(true);
    const r = await gw.call("/readyz");
    expect(r.body.kv.status).toBe("unavailable");
    const refused = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe("budget_unavailable");
  }, 60_000);
});

describe.if(HAVE)(`a Redis that lost acknowledged writes but kept its epoch (${label})`, () => {
  let redis: PrivateRedis;
  let probe: Redis;
  let mock: MockUpstream;
  let gw: TestGateway;

  beforeAll(async () => {
    redis = await startPrivateRedis();
    probe = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    probe.on("error", () => {});
    mock = await startMockOpenAI();
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: mock.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    probe?.disconnect();
    await mock?.stop();
    await redis?.stop();
  }, 60_000);

  test("CONTRACT §7: a master that comes back from an older snapshot (failover lag, AOF loss) gets this instance's requests in flight re-asserted: the lost reservation is counted again before the next admission", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5 });
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(200);
    await Bun.sleep(300); // the settlement of that request is applied
    await probe.save(); // the state a replica (or an AOF file) holds: epoch, counter, no request in flight
    const counter = counterKey(k.id, monthKey());
    const before = Number(await probe.get(counter));
    const upstream0 = mock.received.length;
    const hanging = gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ max_tokens: 2000, mock: { latency_ms: 3000 } }) });
    expect(await until(async () => mock.received.length > upstream0, 10_000)).toBe(true);
    const reserved = Number(await probe.get(counter)) - before;
    expect(reserved).toBeGreaterThan(0);
    // The request's own entry, and the lease it was admitted from when the key holds one (CONTRACT §7).
    const entries = Object.keys(await probe.hgetall(inflightKey(k.id))).sort();
    expect(entries.length).toBeGreaterThanOrEqual(1);
    // What the restart loads: same epoch, the reservation and its entry gone. Read from the
    // snapshot itself: on the restarted master the gateway may re-assert before any probe looks.
    const lost = await redis.readSnapshot(async (r) => ({ counter: Number(await r.get(counter)), inflight: Object.keys(await r.hgetall(inflightKey(k.id))).length }));
    expect(lost).toEqual({ counter: before, inflight: 0 });
    await redis.restart();
    expect(await until(async () => JSON.stringify(Object.keys(await probe.hgetall(inflightKey(k.id))).sort()) === JSON.stringify(entries) && Number(await probe.get(counter)) === before + reserved, 10_000)).toBe(true);
    expect((await hanging).status).toBe(200);
    const rows = await (async () => {
      for (let i = 0; i < 100; i++) {
        const r = await records(gw, k.id);
        if (r.length === 2) return r;
        await Bun.sleep(100);
      }
      return records(gw, k.id);
    })();
    expect(rows).toHaveLength(2);
    // Settled to the real cost: the counter equals what the records say.
    expect(await until(async () => Math.abs(Number(await probe.get(counter)) / 1e9 - rows.reduce((s, r) => s + r.costUsd, 0)) < 1e-6, 5_000)).toBe(true);
    expect(gw.logs.join("")).toContain("Redis master changed");
  }, 60_000);
});
