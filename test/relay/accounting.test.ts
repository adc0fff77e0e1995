// Accounting (CONTRACT §7): one usage record per attempt, cost from the maintained pricing
// catalog (cached tokens at their own price), written in batches off the hot path, last_used_at
// batched with them, and nothing lost on a graceful shutdown (SIGTERM drains).
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { calcPrice } from "@pydantic/genai-prices";
import { eq, inArray } from "drizzle-orm";
import { createAccount, REAL_STORES, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { startGateway } from "../../src/gateway.ts";
import { routingKeys, usageRecords } from "../../src/store/db/schema/index.ts";
import { post, spawnGateway } from "./child-gateway.ts";
import { addCredential, addRoutingKey, chatBody, lane, startOpenAIGroqWorld } from "./fixtures.ts";
import { until } from "../helpers/until.ts";

describe(`accounting (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let acct: { id: string; token: string };
  let credA: { id: string }, credB: { id: string };
  const queue = () => gw.ctx.services.usage;
  /** Releases the usage pipeline after a test that held it. */
  let release = () => {};

  beforeAll(async () => {
    ({ gw, A, B, acct, credA, credB } = await startOpenAIGroqWorld());
  }, 60_000);
  afterEach(() => {
    A.setDefault({});
    release();
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A?.stop(), B?.stop()]);
  }, 60_000);

  const rowsFor = async (requestId: string) => {
    await queue().flush();
    return gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.requestId, requestId)).orderBy(usageRecords.id);
  };

  test("one usage record per attempt, failed attempts included", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id, { model: "llama-3.3-70b-versatile" })] });
    A.setDefault({ status: 503 });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ mock: { prompt_tokens: 40, completion_tokens: 9 } }) });
    expect(r.status).toBe(200);
    const rows = await rowsFor(r.headers.get("x-request-id")!);
    expect(rows.map((x) => [x.laneIndex, x.provider, x.status, x.outcome])).toEqual([[0, "openai", 503, "error"], [1, "groq", 200, "ok"]]);
    expect(rows[0]).toMatchObject({ accountId: acct.id, routingKeyId: key.id, endpoint: "chat", errorCode: "http_503", promptTokens: 0, costUsd: 0, seat: false });
    expect(rows[1]).toMatchObject({ model: "gpt-4o-mini", promptTokens: 40, completionTokens: 9 });
    expect(rows[1]!.latencyMs).toBeGreaterThanOrEqual(0);
    expect(rows[1]!.ttfbMs).not.toBeNull();
  });

  test("cost comes from the pricing catalog (@pydantic/genai-prices), with cached tokens at the cached price", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    const usage = { prompt_tokens: 10_000, cached_tokens: 8_000, completion_tokens: 1_000 };
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-mini", mock: usage }) });
    const plain = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-mini", mock: { ...usage, cached_tokens: 0 } }) });
    const [cachedRow] = await rowsFor(r.headers.get("x-request-id")!);
    const [plainRow] = await rowsFor(plain.headers.get("x-request-id")!);
    const expected = calcPrice({ input_tokens: 10_000, cache_read_tokens: 8_000, output_tokens: 1_000 }, "gpt-4o-mini", { providerId: "openai" })!.total_price;
    const expectedPlain = calcPrice({ input_tokens: 10_000, output_tokens: 1_000 }, "gpt-4o-mini", { providerId: "openai" })!.total_price;
    expect(cachedRow!.costUsd).toBeCloseTo(expected, 12);
    expect(plainRow!.costUsd).toBeCloseTo(expectedPlain, 12);
    expect(cachedRow!.costUsd).toBeLessThan(plainRow!.costUsd);
    expect(cachedRow!.cachedTokens).toBe(8_000);
    // Another vendor's model is priced from its own catalog entry.
    const groq = await addRoutingKey(gw, acct.id, { lanes: [lane("groq", credB.id)] });
    const g = await gw.call("/v1/chat/completions", { token: groq.raw, body: chatBody({ model: "llama-3.3-70b-versatile", mock: { prompt_tokens: 1000, completion_tokens: 100 } }) });
    const [gRow] = await rowsFor(g.headers.get("x-request-id")!);
    expect(gRow!.costUsd).toBeCloseTo(calcPrice({ input_tokens: 1000, output_tokens: 100 }, "llama-3.3-70b-versatile", { providerId: "groq" })!.total_price, 12);
  });

  test("usage records are written in batches off the hot path, with last_used_at in the same flush", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    await queue().flush();
    release = queue().hold();
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
      expect(r.status).toBe(200);
      ids.push(r.headers.get("x-request-id")!);
    }
    // Answered, but nothing written yet: the records wait in memory.
    expect(await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, ids))).toHaveLength(0);
    const [k0] = await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, key.id));
    expect(k0!.lastUsedAt).toBeNull();
    // Embedded: in the in-memory queue; with Redis: in the usage stream, drained by the next flush.
    if (!REAL_STORES) expect(gw.ctx.services.usageQueue.depth()).toBe(5);
    // One flush: one INSERT for the batch and one UPDATE for last_used_at. The query counter is
    // per gateway, so background jobs (bridge health, expiry sweep) and the budget settlements
    // still in their 10 ms batch are quieted first: only the flush's own statements are counted.
    for (const j of gw.jobs) await j.stop();
    await Bun.sleep(50);
    try {
      const q0 = gw.ctx.dbh.queries();
      await queue().flush();
      expect(gw.ctx.dbh.queries() - q0).toBe(2);
    } finally {
      for (const j of gw.jobs) j.start();
    }
    expect(await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, ids))).toHaveLength(5);
    const [k1] = await gw.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, key.id));
    expect(k1!.lastUsedAt).not.toBeNull();
    expect(Date.now() - k1!.lastUsedAt!.getTime()).toBeLessThan(60_000);
  });

  test("usage flush: the interval job writes queued records within about a second", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    const id = r.headers.get("x-request-id")!;
    const end = Date.now() + 3000;
    let rows: unknown[] = [];
    while (Date.now() < end && rows.length === 0) {
      await Bun.sleep(100);
      rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.requestId, id));
    }
    expect(rows).toHaveLength(1);
  });

  test("usage drain: SIGTERM on a gateway process writes every queued record before it exits", async () => {
    const dataDir = mkdtempSync(join(tmpdir(), "gw-child-"));
    const secret = randomBytes(32).toString("hex");
    // Embedded mode: the child's PGlite under dataDir, read back afterwards by a gateway on the
    // same directory. Real mode: the child shares this test gateway's Postgres and Redis.
    const env: Record<string, string> = { DATA_DIR: dataDir, GATEWAY_SECRET_KEY: REAL_STORES ? gw.env.GATEWAY_SECRET_KEY! : secret, PROVIDER_OPENAI_BASE_URL: A.url };
    if (REAL_STORES) Object.assign(env, { DATABASE_URL: gw.env.DATABASE_URL!, REDIS_URL: gw.env.REDIS_URL! });
    const seedDb = REAL_STORES ? gw : await startGateway({ ...env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
    const a = await createAccount(seedDb);
    const c = await addCredential(seedDb, a.id, "openai");
    const key = await addRoutingKey(seedDb, a.id, { lanes: [lane("openai", c.id)] });
    if (!REAL_STORES) await seedDb.stop();
    const child = await spawnGateway(env);
    const ids: string[] = [];
    try {
      // Slow answers, so requests are still in flight (and their records queued) at SIGTERM: it is
      // sent once the upstream holds all twelve (a fixed wait lost the race on a loaded machine,
      // SIGTERM landing before the child had read them).
      const seen = A.received.length;
      const inflight = Array.from({ length: 12 }, () =>
        post(child.url, key.raw, chatBody({ mock: { latency_ms: 1000 } }))
          .then((r) => { ids.push(r.headers.get("x-request-id")!); return r.status; }));
      for (let i = 0; i < 400 && A.received.length - seen < 12; i++) await Bun.sleep(25);
      expect(A.received.length - seen).toBe(12);
      const code = child.terminate();
      const statuses = await Promise.all(inflight);
      expect(statuses.every((s) => s === 200)).toBe(true);
      expect(await code).toBe(0);
    } catch (e) {
      console.error(child.output());
      throw e;
    }
    const reader = REAL_STORES ? gw : await startGateway({ ...env, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
    try {
      // Real mode: the child's records went through the usage stream this test's gateway drains too,
      // so one it read just before the child's last drain may still be on its way to Postgres here.
      const read = () => reader.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, ids));
      if (REAL_STORES) await until("the child's 12 records", async () => ((await read()).length === 12 ? true : null), 5000).catch(() => {});
      const rows = await read();
      expect(rows).toHaveLength(12);
      const [k] = await reader.ctx.db.select().from(routingKeys).where(eq(routingKeys.id, key.id));
      expect(k!.lastUsedAt).not.toBeNull();
    } finally {
      if (!REAL_STORES) await reader.stop();
      rmSync(dataDir, { recursive: true, force: true });
    }
    // Embedded, three gateways boot an embedded database in turn (33-36 s on a busy 2-core CI run).
  }, 120_000);
});
