// Requests through the gateway move its /metrics: counts and latency by endpoint, provider and
// outcome, time to first byte, fallbacks with the upstream error that caused them, budget
// rejections, and the usage-queue depth. Real HTTP: mock OpenAI-protocol upstreams on loopback.
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway, REAL_STORES } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { sample } from "./scrape.ts";

describe(`metrics through the relay (${storesLabel})`, () => {
  let gw: TestGateway;
  /** Releases the usage pipeline after a test that held it. */
  let release = () => {};
  let A: MockUpstream;
  let B: MockUpstream;
  let token: string;
  let openaiCred: string;
  let groqCred: string;

  const scrape = async () => {
    const r = await gw.req("/metrics");
    expect(r.status).toBe(200);
    return r.text();
  };
  const newKey = async (body: Record<string, unknown>) => {
    const r = await gw.call("/v1/organizations/routing-keys", { token, body });
    expect(r.status).toBe(200);
    return r.body.raw_key as string;
  };
  const chat = (key: string, extra: Record<string, unknown> = {}) =>
    gw.req("/v1/chat/completions", { token: key, body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "Say hello." }], ...extra } });

  beforeAll(async () => {
    [A, B] = await Promise.all([startMockOpenAI(), startMockOpenAI()]);
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url, PROVIDER_GROQ_BASE_URL: B.url });
    ({ token } = await createAccount(gw));
    const cred = async (provider: string) => {
      const r = await gw.call("/v1/organizations/credentials", { token, body: { provider, api_key: `sk-test-${provider}-0123456789abcdef` } });
      expect(r.status).toBe(200);
      return r.body.credential.id as string;
    };
    [openaiCred, groqCred] = await Promise.all([cred("openai"), cred("groq")]);
  }, 30_000); // an embedded gateway's first start (PGlite migrations) outlasts 5 s on a loaded machine
  afterEach(() => {
    A.setDefault({});
    release();
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A?.stop(), B?.stop()]);
  }, 60_000);

  test("a chat completion through the gateway counts one request and its latency by endpoint, provider and outcome", async () => {
    const key = await newKey({ label: "metrics-chat", providers: [{ provider: "openai", credential_id: openaiCred }] });
    const labels = { endpoint: "chat", provider: "openai", outcome: "ok" };
    const before = await scrape();
    const r = await chat(key);
    expect(r.status).toBe(200);
    await r.text();
    const after = await scrape();
    expect((sample(after, "gateway_requests_total", labels) ?? 0) - (sample(before, "gateway_requests_total", labels) ?? 0)).toBe(1);
    expect((sample(after, "gateway_request_duration_seconds_count", labels) ?? 0) - (sample(before, "gateway_request_duration_seconds_count", labels) ?? 0)).toBe(1);
    const sum = sample(after, "gateway_request_duration_seconds_sum", labels)! - (sample(before, "gateway_request_duration_seconds_sum", labels) ?? 0);
    expect(sum).toBeGreaterThan(0);
    expect(sum).toBeLessThan(30);
  });

  test("a stream records its time to first byte, no later than its whole duration", async () => {
    const key = await newKey({ label: "metrics-stream", providers: [{ provider: "openai", credential_id: openaiCred }] });
    const labels = { endpoint: "chat", provider: "openai", outcome: "ok" };
    const before = await scrape();
    const r = await chat(key, { stream: true, mock: { chunks: 5, first_byte_ms: 30, chunk_delay_ms: 40 } });
    expect(r.status).toBe(200);
    expect(await r.text()).toContain("[DONE]");
    const after = await scrape();
    const d = (name: string) => (sample(after, name, labels) ?? 0) - (sample(before, name, labels) ?? 0);
    expect(d("gateway_time_to_first_byte_seconds_count")).toBe(1);
    const ttfb = d("gateway_time_to_first_byte_seconds_sum");
    const total = d("gateway_request_duration_seconds_sum");
    // The upstream's first chunk comes after ~30 ms and the last after ~190 ms.
    expect(ttfb).toBeGreaterThan(0.02);
    expect(total).toBeGreaterThan(ttfb);
  });

  test("an upstream 503 counts the upstream error by status and code, and the fallback to the next lane", async () => {
    const key = await newKey({
      label: "metrics-fallback",
      providers: [{ provider: "openai", credential_id: openaiCred }, { provider: "groq", credential_id: groqCred, model: "llama-3.3-70b-versatile" }],
    });
    A.setDefault({ status: 503 });
    const before = await scrape();
    const r = await chat(key);
    expect(r.status).toBe(200);
    await r.text();
    const after = await scrape();
    const d = (name: string, labels: Record<string, string>) => (sample(after, name, labels) ?? 0) - (sample(before, name, labels) ?? 0);
    expect(d("gateway_upstream_errors_total", { provider: "openai", status: "503", code: "http_503" })).toBe(1);
    expect(d("gateway_fallbacks_total", { endpoint: "chat", from_provider: "openai", reason: "http_503" })).toBe(1);
    expect(d("gateway_requests_total", { endpoint: "chat", provider: "groq", outcome: "ok" })).toBe(1);
  });

  test("SPEC metrics (gateway_requests_total help text): a request whose every lane failed is counted under the provider last tried", async () => {
    const key = await newKey({
      label: "metrics-all-failed",
      providers: [{ provider: "openai", credential_id: openaiCred }, { provider: "groq", credential_id: groqCred, model: "llama-3.3-70b-versatile" }],
    });
    A.setDefault({ status: 503 });
    B.setDefault({ status: 503 });
    try {
      const before = await scrape();
      const r = await chat(key);
      expect(r.status).toBe(502);
      await r.text();
      const after = await scrape();
      const d = (labels: Record<string, string>) => (sample(after, "gateway_requests_total", labels) ?? 0) - (sample(before, "gateway_requests_total", labels) ?? 0);
      expect(d({ endpoint: "chat", provider: "groq", outcome: "error" })).toBe(1);
      expect(d({ endpoint: "chat", provider: "none", outcome: "error" })).toBe(0);
    } finally {
      B.setDefault({});
    }
  });

  test("errors that say what to do: an upstream 401 on a saved key names the credential replacement (POST credentials, then PATCH the key's lane)", async () => {
    const r0 = await gw.call("/v1/organizations/routing-keys", { token, body: { label: "refused-key", providers: [{ provider: "openai", credential_id: openaiCred }] } });
    const keyId = r0.body.routing_key.id as string;
    A.setDefault({ status: 401 });
    const r = await chat(r0.body.raw_key);
    expect(r.status).toBe(502);
    const err = ((await r.json()) as { error: { message: string; code: string } }).error;
    expect(err.code).toBe("upstream_auth_failed"); // CONTRACT §8: the operator's failure, when no lane served
    expect(err.message).toContain("saved openai API key of lane 1 was refused");
    expect(err.message).toContain("POST /v1/organizations/credentials");
    expect(err.message).toContain(`PATCH /v1/organizations/routing-keys?id=${keyId}`);
    expect(err.message).toContain("providers[0].credential_id");
    expect(err.message).not.toContain("Retry later");
  });

  test("errors that say what to do: 402 budget_exceeded names PATCH /v1/organizations/routing-keys?id=<key id> with monthly_budget_usd", async () => {
    const r0 = await gw.call("/v1/organizations/routing-keys", { token, body: { label: "budget-msg", monthly_budget_usd: 0.000001, providers: [{ provider: "openai", credential_id: openaiCred }] } });
    const r = await chat(r0.body.raw_key, { max_tokens: 100000 });
    expect(r.status).toBe(402);
    const err = ((await r.json()) as { error: { message: string } }).error;
    expect(err.message).toContain(`PATCH /v1/organizations/routing-keys?id=${r0.body.routing_key.id}`);
    expect(err.message).toContain("monthly_budget_usd");
  });

  test("a request refused for its budget counts a budget rejection", async () => {
    // A budget far below the worst case of max_tokens: refused before any upstream call.
    const key = await newKey({ label: "metrics-budget", monthly_budget_usd: 0.000001, providers: [{ provider: "openai", credential_id: openaiCred }] });
    const before = await scrape();
    const r = await chat(key, { max_tokens: 100000 });
    expect(r.status).toBe(402);
    expect(((await r.json()) as { error: { code: string } }).error.code).toBe("budget_exceeded");
    const after = await scrape();
    const labels = { endpoint: "chat" };
    expect((sample(after, "gateway_budget_rejections_total", labels) ?? 0) - (sample(before, "gateway_budget_rejections_total", labels) ?? 0)).toBe(1);
  });

  test("/blitz: each prompt counts as one blitz request with its own lane attempt; a batch refused for its budget counts one budget rejection and no request", async () => {
    const key = await newKey({ label: "metrics-blitz", providers: [{ provider: "openai", credential_id: openaiCred }] });
    const ok = { endpoint: "blitz", provider: "openai", outcome: "ok" };
    const lane = { provider: "openai", outcome: "ok" };
    const delta = (after: string, before: string, name: string, labels: Record<string, string>) => (sample(after, name, labels) ?? 0) - (sample(before, name, labels) ?? 0);
    let before = await scrape();
    const r = await gw.req("/blitz", { token: key, body: { model: "gpt-4o-mini", prompts: ["Say hello.", "Say goodbye."] } });
    expect(r.status).toBe(200);
    await r.text();
    let after = await scrape();
    expect(delta(after, before, "gateway_requests_total", ok)).toBe(2);
    expect(delta(after, before, "gateway_request_duration_seconds_count", ok)).toBe(2);
    expect(delta(after, before, "gateway_upstream_duration_seconds_count", lane)).toBe(2);

    const poor = await newKey({ label: "metrics-blitz-budget", monthly_budget_usd: 0.000001, providers: [{ provider: "openai", credential_id: openaiCred }] });
    before = after;
    const refused = await gw.req("/blitz", { token: poor, body: { model: "gpt-4o-mini", max_tokens: 100000, prompts: ["a", "b"] } });
    expect(refused.status).toBe(402);
    await refused.text();
    after = await scrape();
    expect(delta(after, before, "gateway_budget_rejections_total", { endpoint: "blitz" })).toBe(1);
    for (const outcome of ["ok", "refused", "error"]) expect(delta(after, before, "gateway_requests_total", { endpoint: "blitz", provider: "none", outcome })).toBe(0);
  });

  test("gateway_requests_total counts inference requests refused before any provider (401, 400, 402) with provider=\"none\"", async () => {
    const key = await newKey({ label: "metrics-refused", monthly_budget_usd: 0.000001, providers: [{ provider: "openai", credential_id: openaiCred }] });
    const labels = { endpoint: "chat", provider: "none", outcome: "refused" };
    const before = await scrape();
    const unauth = await chat("gw_not_a_key");
    expect(unauth.status).toBe(401);
    await unauth.text();
    const invalid = await gw.req("/v1/chat/completions", { token: key, body: { messages: "not a list" } });
    expect(invalid.status).toBe(400);
    await invalid.text();
    const broke = await chat(key, { max_tokens: 100000 });
    expect(broke.status).toBe(402);
    await broke.text();
    const after = await scrape();
    expect((sample(after, "gateway_requests_total", labels) ?? 0) - (sample(before, "gateway_requests_total", labels) ?? 0)).toBe(3);
  });

  test("the usage-queue depth gauge shows records waiting to be written", async () => {
    const key = await newKey({ label: "metrics-queue", providers: [{ provider: "openai", credential_id: openaiCred }] });
    const q = gw.ctx.services.usage;
    await q.flush();
    release = q.hold();
    for (let i = 0; i < 3; i++) await (await chat(key)).text();
    // With Redis the records wait in the usage stream (durable), not in this process's queue.
    if (!REAL_STORES) expect(sample(await scrape(), "gateway_usage_queue_depth")).toBeGreaterThanOrEqual(3);
    release();
    await q.flush();
    expect(sample(await scrape(), "gateway_usage_queue_depth")).toBe(0);
  });

  test("scraping /metrics needs no token and carries no secrets", async () => {
    const text = await scrape();
    expect(text).not.toContain("sk-test-");
    expect(text).not.toContain(token);
  });
});
