// Rate limits and concurrency caps (CONTRACT §8): rpm_limit, tpm_limit and
// max_concurrent_requests admitted with the budget in one store call; OpenAI's x-ratelimit-*
// headers on every inference response for the limits the key has; over a limit 429
// rate_limit_exceeded (nested type requests/tokens, flat on /blitz, Anthropic's rate_limit_error
// on /v1/messages) with Retry-After and retry-after-ms; the order 402 budget → 429 limits.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, lane } from "./fixtures.ts";

/** The header names OpenAI sends (https://platform.openai.com/docs/guides/rate-limits#rate-limits-in-headers). */
const OPENAI_HEADERS = [
  "x-ratelimit-limit-requests", "x-ratelimit-limit-tokens",
  "x-ratelimit-remaining-requests", "x-ratelimit-remaining-tokens",
  "x-ratelimit-reset-requests", "x-ratelimit-reset-tokens",
];
const GO_DURATION = /^(\d+h)?(\d+m)?(\d+(\.\d+)?(ms|s))$/;

describe(`rate limits (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let acct: { id: string; token: string };
  let cred: { id: string };
  // A counting hop in front of the mock: how many requests are at the upstream at once.
  let counter: ReturnType<typeof Bun.serve>;
  let inFlight = 0;
  let peak = 0;

  beforeAll(async () => {
    A = await startMockOpenAI();
    counter = Bun.serve({
      port: 0, hostname: "127.0.0.1",
      async fetch(req) {
        inFlight++;
        peak = Math.max(peak, inFlight);
        try {
          const url = new URL(req.url);
          const res = await fetch(A.url.replace(/\/v1$/, "") + url.pathname, { method: req.method, headers: req.headers, body: await req.arrayBuffer(), signal: req.signal });
          // Streams pass through as they come (their count ends at the headers; no test counts them).
          if (res.headers.get("content-type")?.includes("event-stream")) return new Response(res.body, { status: res.status, headers: res.headers });
          return new Response(await res.arrayBuffer(), { status: res.status, headers: res.headers });
        } finally {
          inFlight--;
        }
      },
    });
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: `http://127.0.0.1:${counter.port}/v1` });
    acct = await createAccount(gw);
    cred = await addCredential(gw, acct.id, "openai");
  }, 60_000);
  afterEach(() => A.setDefault({}), 60_000);
  afterAll(async () => {
    await gw?.stop();
    counter?.stop(true);
    await A?.stop();
  }, 60_000);

  const key = (opts: { rpm?: number; tpm?: number; cap?: number; budget?: number }) =>
    addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)], rpmLimit: opts.rpm, tpmLimit: opts.tpm, maxConcurrentRequests: opts.cap, monthlyBudgetUsd: opts.budget });

  const post = (raw: string, body: Record<string, unknown>, path = "/v1/chat/completions", signal?: AbortSignal) =>
    fetch(gw.url + path, { method: "POST", signal, headers: { authorization: `Bearer ${raw}`, "content-type": "application/json", "x-api-key": raw, "anthropic-version": "2023-06-01" }, body: JSON.stringify(body) });

  const chat = (extra: Record<string, unknown> = {}) => ({ model: "gpt-4o-mini", messages: [{ role: "user", content: "hi" }], ...extra });

  test("rpm_limit: OpenAI's x-ratelimit-*-requests headers count down, then 429 rate_limit_exceeded (type requests) with Retry-After and retry-after-ms; nothing reaches the upstream", async () => {
    const k = await key({ rpm: 3 });
    const remaining: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await post(k.raw, chat());
      expect(res.status).toBe(200);
      await res.text();
      expect(res.headers.get("x-ratelimit-limit-requests")).toBe("3");
      expect(res.headers.get("x-ratelimit-reset-requests")).toMatch(GO_DURATION);
      expect(res.headers.get("x-ratelimit-limit-tokens")).toBeNull(); // only the limits the key has
      remaining.push(res.headers.get("x-ratelimit-remaining-requests")!);
    }
    expect(remaining).toEqual(["2", "1", "0"]);
    const before = A.received.length;
    const res = await post(k.raw, chat());
    expect(res.status).toBe(429);
    const body = (await res.json()) as any;
    expect(body.error).toEqual({ message: expect.stringContaining("requests per minute"), type: "requests", param: null, code: "rate_limit_exceeded" });
    expect(body.error.message).toContain(`PATCH /v1/organizations/routing-keys?id=${k.id}`);
    const ms = Number(res.headers.get("retry-after-ms"));
    expect(ms).toBeGreaterThan(55_000); // the oldest of the three leaves the window in ~60 s
    expect(ms).toBeLessThanOrEqual(60_000);
    expect(Number(res.headers.get("retry-after"))).toBe(Math.ceil(ms / 1000));
    expect(res.headers.get("x-ratelimit-remaining-requests")).toBe("0");
    expect(A.received.length).toBe(before);
  });

  test("header names are byte-equal to OpenAI's on 200 and on 429", async () => {
    const k = await key({ rpm: 1, tpm: 100_000 });
    const ok = await post(k.raw, chat({ max_tokens: 50 }));
    await ok.text();
    const refused = await post(k.raw, chat({ max_tokens: 50 }));
    await refused.text();
    for (const res of [ok, refused]) {
      const names = [...res.headers.keys()].filter((n) => n.startsWith("x-ratelimit-")).sort();
      expect(names).toEqual([...OPENAI_HEADERS].sort());
    }
    expect(ok.headers.get("x-ratelimit-remaining-tokens")).toBe(String(100_000 - (Math.ceil(Buffer.byteLength(JSON.stringify(chat({ max_tokens: 50 }))) / 4) + 50)));
  });

  test("tpm_limit: tokens are reserved up front (prompt estimate + max_tokens): a 10k TPM key with max_tokens 1000 has at most 10 requests at the upstream, and a refund after a short answer is usable at once", async () => {
    const k = await key({ tpm: 10_000 });
    const mock = { latency_ms: 400, prompt_tokens: 10, completion_tokens: 90 };
    peak = 0;
    const results = await Promise.all(Array.from({ length: 30 }, () => post(k.raw, chat({ max_tokens: 1000, mock })).then(async (r) => ({ status: r.status, body: (await r.json()) as any, headers: r.headers }))));
    expect(peak).toBeLessThanOrEqual(10);
    const ok = results.filter((r) => r.status === 200).length;
    expect(ok).toBeGreaterThanOrEqual(9);
    expect(ok).toBeLessThanOrEqual(10);
    const refused = results.find((r) => r.status === 429)!;
    expect(refused.body.error.type).toBe("tokens");
    expect(refused.body.error.code).toBe("rate_limit_exceeded");
    // Each answer used 100 tokens: the rest went back at settlement, so there is room again now.
    await Bun.sleep(100);
    const again = await post(k.raw, chat({ max_tokens: 1000 }));
    expect(again.status).toBe(200);
    await again.text();
    expect(Number(again.headers.get("x-ratelimit-remaining-tokens"))).toBeGreaterThan(5000);
  });

  test("max_concurrent_requests: a cap of 4 never shows more than 4 requests at the upstream; the others get 429 and the slots come back when requests end", async () => {
    const k = await key({ cap: 4 });
    const mock = { latency_ms: 300 };
    peak = 0;
    const results = await Promise.all(Array.from({ length: 12 }, () => post(k.raw, chat({ mock })).then(async (r) => ({ status: r.status, body: (await r.json()) as any }))));
    expect(results.filter((r) => r.status === 200).length).toBe(4);
    expect(peak).toBeLessThanOrEqual(4);
    const refused = results.filter((r) => r.status === 429);
    expect(refused.length).toBe(8);
    expect(refused[0]!.body.error).toMatchObject({ type: "requests", code: "rate_limit_exceeded" });
    expect(refused[0]!.body.error.message).toContain("max_concurrent_requests");
    const again = await Promise.all(Array.from({ length: 4 }, () => post(k.raw, chat()).then((r) => r.status)));
    expect(again).toEqual([200, 200, 200, 200]);
  });

  test("cancelled streams give their concurrency slots back at once", async () => {
    const k = await key({ cap: 3 });
    const controllers = Array.from({ length: 3 }, () => new AbortController());
    const streams = await Promise.all(controllers.map((c) => post(k.raw, chat({ stream: true, mock: { chunks: 50, chunk_delay_ms: 200 } }), "/v1/chat/completions", c.signal)));
    expect(streams.map((r) => r.status)).toEqual([200, 200, 200]);
    const blocked = await post(k.raw, chat());
    expect(blocked.status).toBe(429);
    await blocked.text();
    for (const c of controllers) c.abort();
    await A.waitForAborts(A.aborted >= 3 ? 0 : 3).catch(() => {});
    await Bun.sleep(200);
    const after = await Promise.all(Array.from({ length: 3 }, () => post(k.raw, chat()).then(async (r) => { await r.text(); return r.status; })));
    expect(after).toEqual([200, 200, 200]);
  });

  test("order of checks: an exhausted budget answers 402 even when the rate limit is also reached", async () => {
    const k = await key({ rpm: 1, budget: 0.000001 });
    const res = await post(k.raw, chat({ max_tokens: 100_000 }));
    expect(res.status).toBe(402);
    expect(((await res.json()) as any).error.code).toBe("budget_exceeded");
  });

  test("/v1/messages answers Anthropic's rate_limit_error with Retry-After", async () => {
    const k = await key({ rpm: 1 });
    const body = { model: "gpt-4o-mini", max_tokens: 20, messages: [{ role: "user", content: "hi" }] };
    const first = await post(k.raw, body, "/v1/messages");
    expect(first.status).toBe(200);
    await first.text();
    const res = await post(k.raw, body, "/v1/messages");
    expect(res.status).toBe(429);
    expect(await res.json()).toEqual({ type: "error", error: { type: "rate_limit_error", message: expect.stringContaining("requests per minute") } });
    expect(Number(res.headers.get("retry-after"))).toBeGreaterThan(0);
  });

  test("/blitz takes N requests at once, all or nothing, and answers 429 in the flat shape", async () => {
    const k = await key({ rpm: 5 });
    const blitz = (n: number) => fetch(gw.url + "/blitz", {
      method: "POST", headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", prompts: Array.from({ length: n }, (_, i) => `p${i}`) }),
    });
    const tooBig = await blitz(6);
    expect(tooBig.status).toBe(429);
    expect(tooBig.headers.get("x-should-retry")).toBe("false");
    expect(await tooBig.json()).toEqual({ error: expect.stringContaining("rpm_limit of 5"), code: "rate_limit_exceeded" });
    const four = await blitz(4);
    expect(four.status).toBe(200);
    expect(four.headers.get("x-ratelimit-remaining-requests")).toBe("1");
    expect(((await four.json()) as any).results).toHaveLength(4);
    const two = await blitz(2); // only one request left: nothing runs
    expect(two.status).toBe(429);
    expect(await two.json()).toMatchObject({ code: "rate_limit_exceeded" });
    const one = await blitz(1);
    expect(one.status).toBe(200);
    await one.text();
  });

  test("/blitz on a key with a concurrency cap runs at most that many prompts at a time", async () => {
    const k = await key({ cap: 2 });
    const before = A.received.length;
    peak = 0;
    const res = await fetch(gw.url + "/blitz", {
      method: "POST", headers: { authorization: `Bearer ${k.raw}`, "content-type": "application/json" },
      body: JSON.stringify({ model: "gpt-4o-mini", mock: { latency_ms: 150 }, prompts: ["a", "b", "c", "d", "e", "f"] }),
    });
    expect(res.status).toBe(200);
    const out = (await res.json()) as any;
    expect(out.results.every((r: { status: number }) => r.status === 200)).toBe(true);
    expect(A.received.length - before).toBe(6);
    expect(peak).toBe(2);
  });

  test("the OpenAPI document names the three limits on routing keys and the 429 on every inference route", async () => {
    const doc = (await (await fetch(gw.url + "/openapi.json")).json()) as any;
    const schemaText = JSON.stringify(doc.paths["/v1/organizations/routing-keys"]);
    for (const f of ["rpm_limit", "tpm_limit", "max_concurrent_requests"]) expect(schemaText).toContain(f);
    for (const path of ["/v1/chat/completions", "/v1/responses", "/v1/messages", "/v1/embeddings", "/blitz"]) {
      expect(doc.paths[path].post.responses["429"].description).toContain("rate_limit_exceeded");
    }
  });

  test("a key without limits carries no x-ratelimit headers", async () => {
    const k = await key({});
    const res = await post(k.raw, chat());
    await res.text();
    expect([...res.headers.keys()].some((n) => n.startsWith("x-ratelimit-"))).toBe(false);
  });
});
