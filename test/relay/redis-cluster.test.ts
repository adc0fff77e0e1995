// Every Redis key of one routing key lives under one hash tag, so each admission, settlement and
// ledger script touches one slot and runs unchanged on Redis Cluster (DESIGN: hot path; CONTRACT
// §8: one atomic admission). Proven against a Redis of the test's own in cluster mode, one node
// owning every slot: a script or multi-key command whose keys hash to different slots is refused
// there with CROSSSLOT exactly as on a real cluster, and Redis counts each refusal in INFO
// errorstats. The whole money path runs: budget + limits admission, streamed and non-streamed
// settlement, /blitz, the ledger's flush, a 429, and a SIGKILLed instance's in-flight request
// reconciled into an `interrupted` record by a survivor.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import Redis from "ioredis";
import { createAccount, REAL_STORES, startTestGateway, type TestGateway } from "../helpers/gateway.ts";
import { usageRows } from "../helpers/relay-world.ts";
import { startPrivateRedis, type PrivateRedis } from "../helpers/private-redis.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { post, spawnSibling, tryPost } from "./child-gateway.ts";
import { addCredential, addRoutingKey, lane } from "./fixtures.ts";

const name = REAL_STORES ? "Redis Cluster: every script stays in one slot (cluster-mode redis-server, postgres)" : "Redis Cluster: skipped in embedded mode (no Redis)";

const chat = (extra: Record<string, unknown> = {}) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], ...extra });

describe.if(REAL_STORES)(name, () => {
  let redis: PrivateRedis;
  let probe: Redis;
  let mock: MockUpstream;
  let gw: TestGateway;
  let acct: { id: string };
  let cred: { id: string };

  const errorstats = async () => String(await probe.info("errorstats"));

  beforeAll(async () => {
    redis = await startPrivateRedis({ cluster: true });
    probe = new Redis(redis.url);
    mock = await startMockOpenAI();
    // This in-process instance is also the survivor that reconciles a killed peer's ledger.
    gw = await startTestGateway({ REDIS_URL: redis.url, PROVIDER_OPENAI_BASE_URL: mock.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    acct = await createAccount(gw);
    cred = await addCredential(gw, acct.id, "openai");
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    probe?.disconnect();
    await mock?.stop();
    await redis?.stop();
  }, 60_000);

  test("the node refuses cross-slot scripts (the test can fail)", async () => {
    await expect(probe.eval("return 1", 2, "gw:{a}:x", "gw:{b}:y")).rejects.toThrow(/CROSSSLOT/);
    expect(await errorstats()).toContain("errorstat_CROSSSLOT");
    await probe.config("RESETSTAT");
    expect(await errorstats()).not.toContain("CROSSSLOT");
  });

  test("admission with budget and every limit, settlement of streamed and non-streamed answers, /blitz, a 429 and the ledger: no CROSSSLOT anywhere", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5, rpmLimit: 6, tpmLimit: 100_000, maxConcurrentRequests: 3 });
    for (let i = 0; i < 3; i++) {
      const r = await post(gw.url, k.raw, chat());
      expect(r.status).toBe(200);
      expect(r.headers.get("x-ratelimit-limit-requests")).toBe("6");
      await r.text();
    }
    const s = await post(gw.url, k.raw, chat({ stream: true, stream_options: { include_usage: true } }));
    expect(s.status).toBe(200);
    expect(await s.text()).toContain("[DONE]");
    const b = await post(gw.url, k.raw, { model: "gpt-4o-mini", prompts: ["a", "b"] }, "/blitz");
    expect(b.status).toBe(200);
    expect(((await b.json()) as { results: unknown[] }).results).toHaveLength(2);
    const over = await post(gw.url, k.raw, chat());
    expect(over.status).toBe(429);
    expect(((await over.json()) as any).error.code).toBe("rate_limit_exceeded");
    const me = await fetch(gw.url + "/v1/key", { headers: { authorization: `Bearer ${k.raw}` } });
    expect(me.status).toBe(200);
    await me.text();
    // Every answered request reaches Postgres through the usage stream (the ledger's XADD and its consumer).
    let recorded = 0;
    for (let i = 0; i < 100 && recorded < 6; i++) {
      await Bun.sleep(100);
      await gw.ctx.services.usage.flush();
      recorded = (await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id))).length;
    }
    expect(recorded).toBe(6);
    expect(await errorstats()).not.toContain("CROSSSLOT");
    expect(gw.logs.join("")).not.toContain("CROSSSLOT");
  }, 30_000);

  test("a SIGKILLed instance's in-flight requests are reconciled by a survivor into interrupted records: no CROSSSLOT", async () => {
    const k = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], monthlyBudgetUsd: 5, maxConcurrentRequests: 4 });
    const peer = await spawnSibling(gw, { PROVIDER_OPENAI_BASE_URL: mock.url, INSTANCE_DEAD_AFTER_SECONDS: "3" });
    try {
      const start = mock.received.length;
      const hanging = [false, true].map((stream) => tryPost(peer.url, k.raw, chat({ stream, mock: { latency_ms: 30_000 } })));
      for (let i = 0; i < 200 && mock.received.length - start < 2; i++) await Bun.sleep(50);
      expect(mock.received.length - start).toBe(2);
      await peer.kill();
      await Promise.all(hanging);
      let interrupted = 0;
      for (let i = 0; i < 200 && interrupted < 2; i++) {
        await Bun.sleep(100);
        const rows = await usageRows(gw, eq(usageRecords.routingKeyId, k.id));
        interrupted = rows.filter((r) => r.outcome === "interrupted").length;
      }
      expect(interrupted).toBe(2);
      expect(await errorstats()).not.toContain("CROSSSLOT");
      expect(gw.logs.join("") + peer.output()).not.toContain("CROSSSLOT");
    } finally {
      await peer.kill().catch(() => {});
    }
  }, 60_000);
});
