// Redis side of store outages (CONTRACT §7): budgeted inference while Redis is unreachable or
// frozen answers 503 budget_unavailable fast with Retry-After, never hangs; keys without a budget
// keep being served and their spend still reaches the counter once Redis is back.
// A child gateway process over the test's own redis-server (stopped, frozen and restarted by PID)
// and the shared Postgres: real stores only.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { post, spawnSibling, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";

const name = REAL_STORES ? "Redis outages (child gateway, own redis-server)" : "Redis outages: skipped in embedded mode (needs a real redis-server to stop and freeze)";

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let A: MockUpstream;
  let gw: TestGateway;
  let child: ChildGateway;
  let budgeted: { raw: string };
  let free: { raw: string };

  beforeAll(async () => {
    redis = await startPrivateRedis();
    A = await startMockOpenAI();
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    budgeted = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 100 });
    free = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
    child = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: A.url });
  }, 30_000);
  afterAll(async () => {
    redis?.thaw();
    await child?.terminate();
    await gw?.stop();
    await A?.stop();
    await redis?.stop();
  }, 60_000);

  const ask = async (raw: string) => {
    const t = performance.now();
    const r = await post(child.url, raw, chatBody({ max_tokens: 50 }));
    return { status: r.status, body: await r.json() as any, retryAfter: r.headers.get("retry-after"), ms: performance.now() - t };
  };
  const spend = async (raw: string) => (await (await fetch(child.url + "/v1/key", { headers: { authorization: `Bearer ${raw}` } })).json() as any).budget.current_month_spend_usd as number;

  function expectUnavailable(r: Awaited<ReturnType<typeof ask>>) {
    expect(r.status).toBe(503);
    expect(r.body.error.type).toBe("server_error");
    expect(r.body.error.code).toBe("budget_unavailable");
    expect(r.retryAfter).toBe("1");
    // Bounded by the command timeout (500 ms), not by the length of the outage; generous for a loaded machine.
    expect(r.ms).toBeLessThan(3000);
  }

  test("CONTRACT §7 store outages: Redis frozen (SIGSTOP) → budgeted 503 budget_unavailable with Retry-After, unbudgeted served", async () => {
    // Warm both keys (key cache) while Redis answers.
    expect((await ask(budgeted.raw)).status).toBe(200);
    expect((await ask(free.raw)).status).toBe(200);
    redis.freeze();
    try {
      expectUnavailable(await ask(budgeted.raw));
      for (let i = 0; i < 3; i++) expect((await ask(free.raw)).status).toBe(200);
    } finally {
      redis.thaw();
    }
    // Back: budgeted is admitted again, and the unbudgeted spend made during the freeze reaches the counter.
    let ok = 0;
    for (let i = 0; i < 20 && ok === 0; i++) {
      if ((await ask(budgeted.raw)).status === 200) ok++;
      else await Bun.sleep(200);
    }
    expect(ok).toBe(1);
  }, 30_000);

  test("CONTRACT §7 store outages: Redis stopped → budgeted 503 budget_unavailable fast, unbudgeted served; restarted empty → served again", async () => {
    const before = await spend(free.raw);
    await redis.kill();
    try {
      expectUnavailable(await ask(budgeted.raw));
      for (let i = 0; i < 3; i++) expect((await ask(free.raw)).status).toBe(200);
      // The key's own view still answers, from the spend recorded in Postgres.
      expect(await spend(free.raw)).toBeGreaterThanOrEqual(0);
    } finally {
      await redis.restart();
    }
    let status = 0;
    for (let i = 0; i < 30 && status !== 200; i++) {
      status = (await ask(budgeted.raw)).status;
      if (status !== 200) await Bun.sleep(200);
    }
    expect(status).toBe(200);
    // The counter was lost with Redis and is rebuilt from the usage records: it covers the spend
    // made while Redis was down (written to Postgres) as well as before.
    let now = 0;
    for (let i = 0; i < 75; i++) {
      now = await spend(free.raw);
      if (now > before) break;
      await Bun.sleep(200);
    }
    expect(now).toBeGreaterThan(before);
  }, 30_000);

  test("CONTRACT §7 /readyz: a Redis connection that was up and is down answers 503 at once (kv unavailable), not after waiting for the reconnection", async () => {
    expect((await fetch(gw.url + "/readyz")).status).toBe(200);
    await redis.kill();
    // Back within a second, well inside /readyz's 2 s check: a probe that waited for the
    // reconnection would answer 200 through the outage.
    const back = Bun.sleep(800).then(() => redis.restart());
    try {
      const r = await fetch(gw.url + "/readyz");
      expect(r.status).toBe(503);
      expect(((await r.json()) as any).kv).toEqual({ kind: "redis", status: "unavailable" });
    } finally {
      await back;
    }
    let status = 0;
    for (let i = 0; i < 50 && status !== 200; i++) {
      status = (await fetch(gw.url + "/readyz")).status;
      if (status !== 200) await Bun.sleep(100);
    }
    expect(status).toBe(200);
  }, 30_000);
});
