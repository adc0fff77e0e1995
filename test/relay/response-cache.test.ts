// The response cache (CONTRACT §8 "Response cache", CONTRACT §7 "A cache hit costs nothing and
// reserves nothing", docs/caching.md): opt-in per routing key, Cache-Control per request,
// x-cache and age, entries scoped to a key or its account's shared namespace and never across
// accounts, only complete answers kept, single flight, $0 hits with the cost they saved.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, dataLines, lane } from "./fixtures.ts";

const CACHE = { ttl_seconds: 300, shared: false };
let n = 0;
/** A body no other test sends (entries outlive tests in the shared Redis). */
const unique = (extra: Record<string, unknown> = {}) => chatBody({ messages: [{ role: "user", content: `cache test ${Date.now()}-${++n}-${Math.random()}` }], ...extra });

describe(`response cache (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let acct: { id: string; token: string };
  let cred: { id: string };

  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai"] });
    ({ gw, acct, up: { openai: A }, cred: { openai: cred } } = w);
  }, 60_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(() => w?.stop(), 60_000);

  const key = (opts: { cache?: typeof CACHE | null; account?: { id: string }; credential?: { id: string }; budget?: number; rpm?: number } = {}) =>
    addRoutingKey(gw, (opts.account ?? acct).id, {
      lanes: [lane("openai", (opts.credential ?? cred).id)],
      cache: opts.cache === undefined ? CACHE : opts.cache,
      monthlyBudgetUsd: opts.budget, rpmLimit: opts.rpm,
    });
  const post = (raw: string, body: unknown, headers: Record<string, string> = {}) =>
    gw.req("/v1/chat/completions", { method: "POST", token: raw, body, headers });
  const calls = (body: { messages: { content: string }[] }) => A.received.filter((r) => r.body?.messages?.[0]?.content === body.messages[0]!.content).length;

  test("CONTRACT §8: a key without cache answers without x-cache and never stores", async () => {
    const k = await key({ cache: null });
    const body = unique();
    for (let i = 0; i < 2; i++) {
      const r = await post(k.raw, body);
      expect(r.status).toBe(200);
      expect(r.headers.get("x-cache")).toBeNull();
      await r.text();
    }
    expect(calls(body)).toBe(2);
  });

  test("CONTRACT §8: MISS then HIT with age; the upstream is called once and the hit has a fresh id", async () => {
    const k = await key();
    const body = unique();
    const r1 = await post(k.raw, body);
    expect(r1.headers.get("x-cache")).toBe("MISS");
    expect(r1.headers.get("age")).toBeNull();
    const j1: any = await r1.json();
    const r2 = await post(k.raw, body);
    expect(r2.status).toBe(200);
    expect(r2.headers.get("x-cache")).toBe("HIT");
    expect(Number(r2.headers.get("age"))).toBeGreaterThanOrEqual(0);
    const j2: any = await r2.json();
    expect(calls(body)).toBe(1);
    expect(j2.choices[0].message.content).toBe(j1.choices[0].message.content);
    expect(j2.choices[0].finish_reason).toBe("stop");
    expect(j2.usage.prompt_tokens).toBe(j1.usage.prompt_tokens);
    expect(j2.usage.completion_tokens).toBe(j1.usage.completion_tokens);
    expect(j2.id).not.toBe(j1.id);
  });

  test("CONTRACT §8: a stream and a JSON answer share one entry; the stream replays chunk by chunk with usage", async () => {
    const k = await key();
    const body = unique();
    const json: any = await (await post(k.raw, body)).json();
    const r = await post(k.raw, { ...body, stream: true, stream_options: { include_usage: true } });
    expect(r.headers.get("x-cache")).toBe("HIT");
    expect(r.headers.get("content-type")).toContain("text/event-stream");
    const lines = dataLines(await r.text());
    expect(lines.at(-1)).toBe("[DONE]");
    const chunks = lines.slice(0, -1).map((l) => JSON.parse(l));
    const text = chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("");
    expect(text).toBe(json.choices[0].message.content);
    expect(chunks.filter((c) => c.choices[0]?.delta?.content).length).toBeGreaterThan(1);
    expect(chunks.at(-1).usage.completion_tokens).toBe(json.usage.completion_tokens);
    expect(new Set(chunks.map((c) => c.id)).size).toBe(1);
    expect(chunks[0].id).not.toBe(json.id);
    // A second SSE hit of the entry is written from the same pre-encoded bytes: its ids are its own.
    const again = dataLines(await (await post(k.raw, { ...body, stream: true, stream_options: { include_usage: true } })).text()).slice(0, -1).map((l) => JSON.parse(l));
    expect(again.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe(text);
    expect(new Set(again.map((c) => c.id)).size).toBe(1);
    expect(again[0].id).not.toBe(chunks[0].id);
    expect(calls(body)).toBe(1);

    // And the other way: a stream stored, then a JSON hit (its usage from the stream the client did not see).
    const body2 = unique();
    const live = await (await post(k.raw, { ...body2, stream: true })).text();
    const liveText = dataLines(live).slice(0, -1).map((l) => JSON.parse(l).choices[0]?.delta?.content ?? "").join("");
    const hit = await post(k.raw, body2);
    expect(hit.headers.get("x-cache")).toBe("HIT");
    const j: any = await hit.json();
    expect(j.object).toBe("chat.completion");
    expect(j.choices[0].message.content).toBe(liveText);
    expect(j.usage.completion_tokens).toBeGreaterThan(0);
    expect(calls(body2)).toBe(1);
  });

  test("CONTRACT §8: entries never cross keys unless shared, and never cross accounts even when shared", async () => {
    const other = await createAccount(gw);
    const otherCred = await addCredential(gw, other.id, "openai");
    const shared = { ttl_seconds: 300, shared: true };
    const [k1, k2, s1, s2, o1] = [
      await key(), await key(), await key({ cache: shared }), await key({ cache: shared }),
      await key({ cache: shared, account: other, credential: otherCred }),
    ];
    const body = unique();
    for (const k of [k1, k2, s1]) expect((await post(k.raw, body)).headers.get("x-cache")).toBe("MISS");
    expect(calls(body)).toBe(3);
    // s2 shares s1's namespace (same account); o1 is another account's shared namespace.
    expect((await post(s2.raw, body)).headers.get("x-cache")).toBe("HIT");
    expect((await post(o1.raw, body)).headers.get("x-cache")).toBe("MISS");
    expect((await post(k1.raw, body)).headers.get("x-cache")).toBe("HIT");
    expect(calls(body)).toBe(4);
  });

  test("CONTRACT §8: Cache-Control no-store neither reads nor writes, no-cache skips the read but stores, max-age bounds the age", async () => {
    const k = await key();
    const body = unique();
    const r1 = await post(k.raw, body, { "cache-control": "no-store" });
    expect(r1.headers.get("x-cache")).toBe("BYPASS");
    await r1.text();
    const r2 = await post(k.raw, body);
    expect(r2.headers.get("x-cache")).toBe("MISS"); // no-store kept nothing
    await r2.text();
    const r3 = await post(k.raw, body, { "cache-control": "no-store" });
    expect(r3.headers.get("x-cache")).toBe("BYPASS"); // and does not read the entry r2 left
    await r3.text();
    expect(calls(body)).toBe(3);

    const body2 = unique();
    await (await post(k.raw, body2)).text();
    const r4 = await post(k.raw, body2, { "cache-control": "no-cache" });
    expect(r4.headers.get("x-cache")).toBe("BYPASS");
    await r4.text();
    expect(calls(body2)).toBe(2);
    expect((await post(k.raw, body2)).headers.get("x-cache")).toBe("HIT");

    await Bun.sleep(1100); // the entry is now at least 1 s old
    const old = await post(k.raw, body2, { "cache-control": "max-age=0" });
    expect(old.headers.get("x-cache")).toBe("MISS");
    await old.text();
    await Bun.sleep(300); // its new entry is written after the answer: let a loaded machine land it
    const fresh = await post(k.raw, body2, { "cache-control": "max-age=3600" });
    expect(fresh.headers.get("x-cache")).toBe("HIT");
    expect(Number(fresh.headers.get("age"))).toBeLessThanOrEqual(1);
    expect(calls(body2)).toBe(3);
  });

  test("CONTRACT §8: errors are never cached: a failed request goes upstream again and says MISS", async () => {
    const k = await key();
    for (const mock of [{ status: 400, error: { message: "bad", type: "invalid_request_error", param: null, code: "bad" } }, { status: 500 }]) {
      const body = unique({ mock });
      for (let i = 0; i < 2; i++) {
        const r = await post(k.raw, body);
        expect(r.status).toBeGreaterThanOrEqual(400);
        expect(r.headers.get("x-cache")).toBe("MISS");
        await r.text();
      }
      expect(calls(body)).toBe(2);
    }
    // A stream broken mid-answer is not kept either.
    const body = unique({ stream: true, mock: { chunks: 5, break_after: 2 } });
    for (let i = 0; i < 2; i++) await (await post(k.raw, body)).text();
    expect(calls(body)).toBe(2);
  });

  test("CONTRACT §8: the entry changes with the key's lanes: a PATCH of reasoning_effort, a rewire to another credential, a deleted credential", async () => {
    const own = await addCredential(gw, acct.id, "openai");
    const k = await key({ credential: own });
    const body = unique({ model: "gpt-5-mini" }); // a model that takes reasoning_effort
    const patch = async (lanes: unknown[]) => {
      const r = await gw.call(`/v1/organizations/routing-keys?id=${k.id}`, { method: "PATCH", token: acct.token, body: { providers: lanes } });
      expect(r.status).toBe(200);
    };
    const xcache = async (r: Response) => (await r.text(), r.headers.get("x-cache"));
    expect(await xcache(await post(k.raw, body))).toBe("MISS");
    expect(await xcache(await post(k.raw, body))).toBe("HIT");
    await patch([{ provider: "openai", credential_id: own.id, reasoning_effort: "high" }]);
    expect(await xcache(await post(k.raw, body))).toBe("MISS");
    expect(A.received.filter((r) => r.body?.messages?.[0]?.content === body.messages[0]!.content).at(-1)?.body.reasoning_effort).toBe("high");
    expect(await xcache(await post(k.raw, body))).toBe("HIT");
    // Rewired to another saved key: another entry.
    await patch([{ provider: "openai", credential_id: cred.id, reasoning_effort: "high" }]);
    expect(await xcache(await post(k.raw, body))).toBe("MISS");
    expect(calls(body)).toBe(3);
    // Back on the first credential, then it is deleted: its entries are never served again.
    await patch([{ provider: "openai", credential_id: own.id, reasoning_effort: "high" }]);
    expect(await xcache(await post(k.raw, body))).toBe("HIT");
    const del = await gw.call(`/v1/organizations/credentials?id=${own.id}`, { method: "DELETE", token: acct.token });
    expect(del.status).toBe(200);
    const gone = await post(k.raw, body);
    expect(gone.status).toBeGreaterThanOrEqual(400); // the lane has no saved key: no lane serves
    expect(gone.headers.get("x-cache")).not.toBe("HIT");
    expect(((await gone.json()) as any).error.message).toBeString();
  });

  test("CONTRACT §8: shared keys with different lane settings never get each other's answers", async () => {
    const shared = { ttl_seconds: 300, shared: true };
    const low = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id, { reasoning_effort: "low" })], cache: shared });
    const high = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id, { reasoning_effort: "high" })], cache: shared });
    const same = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id, { reasoning_effort: "low" })], cache: shared });
    const body = unique({ model: "gpt-5-mini" });
    const xcache = async (r: Response) => (await r.text(), r.headers.get("x-cache"));
    expect(await xcache(await post(low.raw, body))).toBe("MISS");
    expect(await xcache(await post(high.raw, body))).toBe("MISS");
    expect(await xcache(await post(same.raw, body))).toBe("HIT");
    const sent = A.received.filter((r) => r.body?.messages?.[0]?.content === body.messages[0]!.content).map((r) => r.body.reasoning_effort);
    expect(sent).toEqual(["low", "high"]);
  });

  test("only complete answers are kept: `length` is kept only when the client set the limit", async () => {
    const k = await key();
    const cut = unique({ mock: { finish_reason: "length" } });
    for (let i = 0; i < 2; i++) expect((await post(k.raw, cut)).headers.get("x-cache")).toBe("MISS");
    expect(calls(cut)).toBe(2);
    const limited = unique({ max_tokens: 50, mock: { finish_reason: "length" } });
    await (await post(k.raw, limited)).text();
    expect((await post(k.raw, limited)).headers.get("x-cache")).toBe("HIT");
    expect(calls(limited)).toBe(1);
  });

  test("CONTRACT §8: 50 identical concurrent requests make one upstream call; the others replay it", async () => {
    const k = await key();
    const body = unique({ mock: { latency_ms: 300 } });
    const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => post(k.raw, i % 2 ? body : { ...body, stream: true })));
    const texts = await Promise.all(rs.map((r) => r.text()));
    expect(rs.every((r) => r.status === 200)).toBe(true);
    expect(calls(body)).toBe(1);
    expect(rs.filter((r) => r.headers.get("x-cache") === "MISS").length).toBe(1);
    expect(rs.filter((r) => r.headers.get("x-cache") === "HIT").length).toBe(49);
    for (const [i, t] of texts.entries()) {
      if (i % 2) expect(JSON.parse(t).choices[0].message.content.length).toBeGreaterThan(0);
      else expect(dataLines(t).at(-1)).toBe("[DONE]");
    }
  });

  test.skipIf(!REAL_STORES)("CONTRACT §8: across two instances sharing Redis, 50 identical concurrent requests make one upstream call", async () => {
    const gw2 = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url }, { shareWith: gw });
    try {
      const k = await key();
      const body = unique({ mock: { latency_ms: 400 } });
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => (i % 2 ? gw2 : gw).req("/v1/chat/completions", { method: "POST", token: k.raw, body })));
      const texts = await Promise.all(rs.map((r) => r.text()));
      expect(rs.every((r) => r.status === 200)).toBe(true);
      expect(calls(body)).toBe(1);
      expect(rs.filter((r) => r.headers.get("x-cache") === "HIT").length).toBe(49);
      expect(new Set(texts.map((t) => JSON.parse(t).choices[0].message.content)).size).toBe(1);
    } finally {
      await gw2.stop();
    }
  });

  test("single flight: when the leader's answer fails, its followers go upstream themselves", async () => {
    const k = await key();
    const body = unique({ mock: { latency_ms: 200, status: 503 } });
    const rs = await Promise.all(Array.from({ length: 5 }, () => post(k.raw, body)));
    await Promise.all(rs.map((r) => r.text()));
    expect(rs.every((r) => r.status >= 500)).toBe(true);
    expect(calls(body)).toBe(5);
  });

  test("CONTRACT §7: a hit costs $0, reserves nothing and passes rate limits; its record says cache_hit with the cost it saved", async () => {
    const k = await key({ budget: 100, rpm: 1 });
    const body = unique({ model: "gpt-4o" });
    const missId = `rc-miss-${n}`;
    const first = await post(k.raw, body, { "x-request-id": missId });
    expect(first.status).toBe(200);
    await first.text();
    // rpm_limit 1 is used up: a live request would be 429; hits are not admitted at all.
    const hitIds = [`${missId}-hit-a`, `${missId}-hit-b`];
    for (const id of hitIds) {
      const r = await post(k.raw, body, { "x-request-id": id });
      expect(r.status).toBe(200);
      expect(r.headers.get("x-cache")).toBe("HIT");
      await r.text();
    }
    const live = await post(k.raw, unique());
    expect(live.status).toBe(429);
    await live.text();
    await gw.ctx.services.usage.flush();
    await Bun.sleep(REAL_STORES ? 300 : 0);
    await gw.ctx.services.usage.flush();
    const rows = await gw.ctx.db.select().from(usageRecords).where(eq(usageRecords.routingKeyId, k.id));
    const miss = rows.find((r) => r.requestId === missId)!;
    expect(miss.outcome).toBe("ok");
    expect(miss.costUsd).toBeGreaterThan(0);
    for (const id of hitIds) {
      const hit = rows.find((r) => r.requestId === id)!;
      expect(hit.outcome).toBe("cache_hit");
      expect(hit.costUsd).toBe(0);
      expect(hit.promptTokens).toBe(0);
      expect(hit.completionTokens).toBe(0);
      expect(hit.savedUsd).toBeCloseTo(miss.costUsd, 12);
    }
    // The usage rollup shows the key's hits and the money they saved.
    const usage = (await gw.call("/v1/organizations/usage", { token: acct.token })).body;
    const byKey = usage.by_key.find((r: { routing_key_id: string }) => r.routing_key_id === k.id);
    expect(byKey.cache_hits).toBe(2);
    expect(byKey.saved_usd).toBeCloseTo(2 * miss.costUsd, 9);
    expect(byKey.cost_usd).toBeCloseTo(miss.costUsd, 9);
    // The month's spend is the miss's cost alone once its settlement is in (settlements are batched).
    let spent = -1;
    for (let i = 0; i < 50 && Math.abs(spent - miss.costUsd) > 1e-6; i++) {
      if (i) await Bun.sleep(100);
      spent = (await gw.call("/v1/key", { token: k.raw })).body.budget.current_month_spend_usd;
    }
    expect(spent).toBeCloseTo(miss.costUsd, 6);
    expect(calls(body)).toBe(1);
  });
});
