// CONTRACT §7 durability, the recovery barrier: after Redis restarts empty, no instance admits a
// budgeted request until every live instance has re-asserted its requests in flight. Three gateway
// processes over the test's own redis-server (restarted empty by PID) and the shared Postgres hold
// a key's budget in requests in flight; one of them is frozen (SIGSTOP) across the restart, so it
// re-asserts late, while new requests keep arriving at the other two. Without the barrier they admit
// on a counter missing the frozen instance's reservations and spend passes the budget.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { keyContextOf } from "../helpers/relay-world.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { estimateCostUsd } from "../../src/money/estimate.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { spawnSibling, tryPost, type ChildGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { until as waitUntil } from "../helpers/until.ts";

const name = REAL_STORES
  ? "recovery barrier after an empty Redis restart (3 gateway processes, own redis-server)"
  : "recovery barrier: skipped in embedded mode (needs real Redis and several processes; embedded mode is one process)";

const until = <T>(what: string, fn: () => Promise<T | null>, ms = 30_000) => waitUntil(what, fn, ms, 50);

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let A: MockUpstream;
  let gw: TestGateway;
  const kids: ChildGateway[] = [];

  beforeAll(async () => {
    redis = await startPrivateRedis();
    A = await startMockOpenAI();
    // Provisions and reads the database; an instance too, with nothing in flight.
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: A.url });
  }, 30_000);
  afterAll(async () => {
    for (const c of kids) await c.kill().catch(() => {});
    await gw?.stop();
    await A?.stop();
    await redis?.stop();
  }, 60_000);

  test("CONTRACT §7 durability: Redis restarted empty with requests in flight on 3 instances, one re-asserting late → no admission before every instance re-asserted, spend ≤ budget", async () => {
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    // Each answer is as long as its output limit, so a request costs what it reserved.
    const body = chatBody({ max_tokens: 100, mock: { completion_tokens: 100, latency_ms: 8000 } });
    const probe = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 1 });
    const probeKey = await keyContextOf(gw, probe.raw);
    const est = estimateCostUsd(gw.ctx, probeKey, body, Buffer.byteLength(JSON.stringify(body)))!;
    const budget = est * 10.5;
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: budget });
    const env = { PROVIDER_OPENAI_BASE_URL: A.url };
    kids.push(...(await Promise.all([spawnSibling(gw, env), spawnSibling(gw, env), spawnSibling(gw, env)])));
    const [a, b, c] = kids as [ChildGateway, ChildGateway, ChildGateway];
    const post = (g: ChildGateway) => tryPost(g.url, k.raw, body);

    // The whole budget in flight over the three instances, c holding most of it (six requests).
    const start = A.received.length;
    const first = Array.from({ length: 6 }, () => post(c));
    await until("c's requests at the upstream", async () => (A.received.length - start >= 6 ? true : null));
    first.push(...Array.from({ length: 6 }, (_, i) => post(i % 2 ? a : b)));
    await until("the budget in flight at the upstream", async () => (A.received.length - start >= 10 ? true : null));
    await Bun.sleep(200); // the last admissions' replies (an 11th with a lowered limit, a 402) are in

    // c misses the restart and comes back after the other two have recovered.
    c.signal("SIGSTOP");
    let second: Array<Promise<Response | null>> = [];
    try {
      await redis.restart(); // empty: counters, in-flight ledger, epoch and stream are gone
      // New requests right after, at the two instances that are running: some land before their
      // recovery (503 at once), the rest wait for the barrier.
      for (let i = 0; i < 16; i++) {
        second.push(post(i % 2 ? a : b));
        await Bun.sleep(50);
      }
    } finally {
      c.signal("SIGCONT");
    }
    for (let i = 0; i < 8; i++) {
      second.push(post(kids[i % 3]!));
      await Bun.sleep(100);
    }
    const all = await Promise.all([...first, ...second]);
    const statuses = all.map((r) => r?.status ?? 0);
    expect(statuses.filter((s) => s !== 200 && s !== 402 && s !== 503)).toEqual([]);
    const ok = all.filter((r) => r?.status === 200).length;
    expect(ok).toBeGreaterThanOrEqual(10);
    for (const g of kids) expect(await g.terminate()).toBe(0); // each drains its records
    kids.length = 0;
    await gw.ctx.services.usage.flush();
    const rows = await until("a record per answered request", async () => {
      const r = await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.routingKeyId, [k.id]));
      return r.length >= ok ? r : null;
    });
    const spent = rows.reduce((s, r) => s + r.costUsd, 0);
    // The prompt estimate (a token per byte) is an upper bound here, so no estimate error to allow.
    expect(spent).toBeLessThanOrEqual(budget + 1e-12);
  }, 120_000);
});
