// POST /v1/embeddings through the official openai SDK, unmodified: passed through on an OpenAI
// lane, translated to batchEmbedContents on a Gemini lane (float and base64, single and batch),
// lanes that cannot embed fail over, and the spend counts against the key's budget with one
// usage record per attempt, priced from the catalog.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import OpenAI from "openai";
import { costUsd } from "../../src/money/pricing.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { mockVector } from "../mocks/gemini-upstream.ts";
import { startWorld, usageRowsOf, type World } from "../translation/world.ts";

let w: World;
const sdk = (key: string) => new OpenAI({ apiKey: key, baseURL: `${w.gw.url}/v1`, maxRetries: 0 });
const rid = (name: string) => `${name}-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;

beforeAll(async () => {
  w = await startWorld();
}, 60_000);
afterAll(async () => {
  await w.stop();
}, 60_000);

describe(`embeddings (${storesLabel})`, () => {
  test("openai SDK on an OpenAI lane: the request passes through (the SDK's own base64), vectors and usage come back", async () => {
    const requestId = rid("emb-openai");
    const r = await sdk(w.keys.openai!.rawKey).embeddings.create({ model: "text-embedding-3-small", input: "The food was delicious." }, { headers: { "x-request-id": requestId } });
    expect(r.data).toHaveLength(1);
    expect(r.data[0]!.embedding).toHaveLength(8);
    const sent = w.openai.served.filter((x) => x.path === "/v1/embeddings").at(-1)!;
    expect(sent.body).toEqual({ model: "text-embedding-3-small", input: "The food was delicious.", encoding_format: "base64" });
    expect(r.usage.prompt_tokens).toBeGreaterThan(0);
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.endpoint).toBe("embeddings");
    expect(rows[0]!.promptTokens).toBe(r.usage.prompt_tokens);
    expect(rows[0]!.costUsd).toBeCloseTo(costUsd("openai", "text-embedding-3-small", { prompt_tokens: r.usage.prompt_tokens, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 }), 15);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
  });

  test("a batch in float on an OpenAI lane: one vector per input, in order", async () => {
    const r = await sdk(w.keys.openai!.rawKey).embeddings.create({ model: "text-embedding-3-small", input: ["first", "second text"], encoding_format: "float", dimensions: 4 });
    expect(r.data.map((d) => d.index)).toEqual([0, 1]);
    expect(r.data[0]!.embedding).toHaveLength(4);
  });

  for (const format of ["float", "base64", undefined] as const) {
    test(`openai SDK on a Gemini lane (${format ?? "SDK default"}): batchEmbedContents, vectors in OpenAI's list`, async () => {
      const requestId = rid("emb-gemini");
      const input = ["hello world", "¿qué tal? 晴れ"];
      const r = await sdk(w.keys.google!.rawKey).embeddings.create({ model: "gemini-embedding-001", input, dimensions: 6, ...(format ? { encoding_format: format } : {}) }, { headers: { "x-request-id": requestId } });
      const sent = w.gemini.served.at(-1)!;
      expect(sent.path).toBe("/v1beta/models/gemini-embedding-001:batchEmbedContents");
      expect(sent.body.requests).toEqual(input.map((text) => ({ model: "models/gemini-embedding-001", content: { parts: [{ text }] }, outputDimensionality: 6 })));
      expect(r.object).toBe("list");
      expect(r.model).toBe("gemini-embedding-001");
      expect(r.data).toHaveLength(2);
      r.data.forEach((d, i) => {
        expect(d.index).toBe(i);
        const want = mockVector(input[i]!, 6);
        // Asked for base64 explicitly, the SDK hands the string over as it came.
        const got: number[] = typeof d.embedding === "string" ? Array.from(new Float32Array(new Uint8Array(Buffer.from(d.embedding as string, "base64")).buffer)) : d.embedding;
        expect(got).toHaveLength(6);
        got.forEach((v, j) => expect(v).toBeCloseTo(want[j]!, 5));
      });
      // Gemini reports no token counts: the documented estimate (a quarter token per byte).
      const bytes = input.reduce((n, t) => n + Buffer.byteLength(t), 0);
      expect(r.usage.prompt_tokens).toBe(Math.ceil(bytes / 4));
      const rows = await usageRowsOf(w.gw, requestId);
      expect(rows).toHaveLength(1);
      expect(rows[0]!.provider).toBe("google");
      expect(rows[0]!.costUsd).toBeGreaterThan(0);
    });
  }

  test("a raw base64 request on a Gemini lane answers little-endian float32 in base64, as OpenAI does", async () => {
    const r = await w.gw.call("/v1/embeddings", { token: w.keys.google!.rawKey, body: { model: "gemini-embedding-001", input: "abc", encoding_format: "base64", dimensions: 3 } });
    expect(r.status).toBe(200);
    const buf = Buffer.from(r.body.data[0].embedding, "base64");
    const got = Array.from(new Float32Array(buf.buffer, buf.byteOffset, buf.byteLength / 4));
    mockVector("abc", 3).forEach((v, j) => expect(got[j]!).toBeCloseTo(v, 5));
  });

  test("CONTRACT §8: lanes that cannot embed fail over to one that can", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.sub!, w.lanes.openai!]);
    const before = w.anthropic.received.length;
    const requestId = rid("emb-fallover");
    const r = await sdk(key.rawKey).embeddings.create({ model: "text-embedding-3-small", input: "x" }, { headers: { "x-request-id": requestId } });
    expect(r.data).toHaveLength(1);
    expect(w.anthropic.received.length).toBe(before);
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows.map((x) => x.provider)).toEqual(["openai"]);
  });

  test("CONTRACT §8: a key none of whose lanes can embed answers 400 unsupported_feature", async () => {
    const r = await w.gw.call("/v1/embeddings", { token: w.keys.anthropic!.rawKey, body: { model: "text-embedding-3-small", input: "x" } });
    expect(r.status).toBe(400);
    expect(r.body.error.code).toBe("unsupported_feature");
  });

  test("bad input is a 400 in the nested shape, never a 5xx", async () => {
    for (const body of [{ model: "text-embedding-3-small" }, { model: "text-embedding-3-small", input: [] }, { model: "text-embedding-3-small", input: "x", encoding_format: "int8" }, { model: "text-embedding-3-small", input: [{}] }]) {
      const r = await w.gw.call("/v1/embeddings", { token: w.keys.openai!.rawKey, body });
      expect(r.status).toBe(400);
      expect(typeof r.body.error.message).toBe("string");
    }
  });

  test("CONTRACT §7: embedding spend counts against the key's budget", async () => {
    const created = await w.gw.call("/v1/organizations/routing-keys", { method: "POST", token: w.accountToken, body: { label: "emb budget", providers: [w.lanes.openai], monthly_budget_usd: 5 } });
    expect(created.status).toBe(200);
    const raw = created.body.raw_key as string;
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const id = rid("emb-budget");
      ids.push(id);
      await sdk(raw).embeddings.create({ model: "text-embedding-3-large", input: "a long enough text to cost something ".repeat(20) }, { headers: { "x-request-id": id } });
    }
    let recorded = 0;
    for (const id of ids) recorded += (await usageRowsOf(w.gw, id)).reduce((a, x) => a + x.costUsd, 0);
    expect(recorded).toBeGreaterThan(0);
    let spend = 0;
    // /v1/key reports dollars to six decimals.
    for (let i = 0; i < 100 && Math.abs(spend - recorded) > 1e-6; i++) {
      await Bun.sleep(20);
      spend = (await w.gw.call("/v1/key", { token: raw })).body.budget.current_month_spend_usd;
    }
    expect(spend).toBeCloseTo(recorded, 6);
  });
});
