// Accounting (CONTRACT §7): every inference attempt becomes one usage record and none is lost.
// A record the database would refuse (a NUL character, which Postgres text cannot hold; a token
// count beyond the integer column) must neither be lost itself nor hold back the records queued
// after it: it is sanitised when queued, and a batch that still fails is written row by row.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { inArray } from "drizzle-orm";
import { storesLabel, type TestGateway, REAL_STORES } from "../helpers/gateway.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createUsageQueue, type UsageRow } from "../../src/relay/usage-queue.ts";
import { addRoutingKey, chatBody, lane, startOpenAIGroqWorld } from "./fixtures.ts";

describe(`usage records the database would refuse (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream;
  let acct: { id: string; token: string };
  let credA: { id: string };
  const queue = () => gw.ctx.services.usage;
  /** Releases the usage pipeline after a test that held it. */
  let release = () => {};

  beforeAll(async () => {
    ({ gw, A, B, acct, credA } = await startOpenAIGroqWorld());
  }, 60_000);
  afterEach(() => release(), 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A?.stop(), B?.stop()]);
  }, 60_000);

  test("one usage record per attempt, none lost: a model name with a NUL byte is recorded and does not block the queue", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    await queue().flush();
    release = queue().hold();
    const ids: string[] = [];
    const send = async (body: Record<string, unknown>) => {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body });
      expect(r.status).toBe(200);
      ids.push(r.headers.get("x-request-id")!);
    };
    await send(chatBody());
    await send(chatBody({ model: "gpt\u0000x" }));
    // Token counts beyond int4 (an upstream reporting nonsense) are clamped, not fatal.
    await send(chatBody({ mock: { prompt_tokens: 3_000_000_000, completion_tokens: 5 } }));
    await send(chatBody());
    if (!REAL_STORES) expect(gw.ctx.services.usageQueue.depth()).toBe(4); // with Redis they wait in the usage stream
    release();
    await queue().flush();
    expect(gw.ctx.services.usageQueue.depth()).toBe(0);
    const rows = await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, ids));
    expect(rows).toHaveLength(4);
    const byId = new Map(rows.map((r) => [r.requestId, r]));
    expect(byId.get(ids[1]!)!.model).toBe("gptx");
    expect(byId.get(ids[2]!)!.promptTokens).toBe(2_147_483_647);
    expect(byId.get(ids[2]!)!.completionTokens).toBe(5);
    // The queue keeps moving: a later record is written by the next flush.
    await send(chatBody());
    await queue().flush();
    expect(gw.ctx.services.usageQueue.depth()).toBe(0);
    expect(await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, ids))).toHaveLength(5);
  });

  test("none lost: a batch the database still refuses is written row by row, the refused row dropped with a log line", async () => {
    // A second queue over the same database (its job never started), fed a row the sanitiser
    // cannot repair (no account id: a NOT NULL column), between two good ones.
    const q = createUsageQueue(gw.ctx, gw.ctx.services.settleBatcher);
    const base = (requestId: string): UsageRow => ({
      requestId, accountId: acct.id, routingKeyId: null, endpoint: "chat", laneIndex: 0, provider: "openai",
      model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null, createdAt: new Date().toISOString(),
    });
    const good1 = `poison-good-${crypto.randomUUID()}`;
    const bad = `poison-bad-${crypto.randomUUID()}`;
    const good2 = `poison-good-${crypto.randomUUID()}`;
    q.push(base(good1));
    q.push({ ...base(bad), accountId: null as unknown as string });
    q.push(base(good2));
    await q.flushQueued();
    expect(q.depth()).toBe(0);
    const rows = await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, [good1, bad, good2]));
    expect(rows.map((r) => r.requestId).sort()).toEqual([good1, good2].sort());
    const line = gw.logs.find((l) => l.includes(bad));
    expect(line).toBeDefined();
    expect(line).toContain("usage record");
    // The reason and the request id only: the row's values stay out of the log.
    expect(line).not.toContain("gpt-4o-mini");
  });

  test("none lost: streamed records are written from the stream's JSON text as it is; a text the database refuses goes row by row, the refused row dropped", async () => {
    const q = createUsageQueue(gw.ctx, gw.ctx.services.settleBatcher);
    const row = (requestId: string): UsageRow => ({
      requestId, recordKey: `${requestId}.1`, accountId: acct.id, routingKeyId: null, endpoint: "chat", laneIndex: 0, provider: "openai",
      model: "gpt-4o-mini", status: 200, outcome: "ok", errorCode: null, createdAt: new Date().toISOString(),
    });
    const id = (what: string) => `streamed-${what}-${crypto.randomUUID()}`;
    const [g1, g2, g3, g4, bad, keyless] = [id("g1"), id("g2"), id("g3"), id("g4"), id("bad"), id("keyless")];
    q.pushJson(JSON.stringify([row(g1), row(g2)]));
    q.pushJson(JSON.stringify([row(g3), { ...row(bad), accountId: null }, row(g4)]));
    // A record without a record key is not counted from the text: it is read the long way.
    q.pushJson(JSON.stringify([{ ...row(keyless), recordKey: undefined }]));
    q.pushJson("[]");
    // Not JSON at all (its INSERT is refused, and it cannot be read row by row): dropped, loudly, and nothing else held back.
    q.pushJson('[{"recordKey": oops}]');
    expect(q.depth()).toBe(7);
    await q.flushQueued();
    expect(q.depth()).toBe(0);
    const rows = await gw.ctx.db.select().from(usageRecords).where(inArray(usageRecords.requestId, [g1, g2, g3, g4, bad, keyless]));
    expect(rows.map((r) => r.requestId).sort()).toEqual([g1, g2, g3, g4, keyless].sort());
    expect(gw.logs.find((l) => l.includes(bad))).toContain("usage record");
    expect(gw.logs.some((l) => l.includes("not a JSON array of records"))).toBe(true);
  });
});
