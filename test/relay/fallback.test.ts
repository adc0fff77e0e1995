// Lanes in order with mode `fallback` (CONTRACT §3, §8): which upstream failures move on, which
// go straight back, and what the client sees when nothing is left. Each lane is its own mock
// upstream (openai → A, groq → B, mistral → C), so per-lane behaviour is set with setDefault().
import { afterAll, afterEach, beforeAll, describe, expect, test } from "bun:test";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import type { AccessEntry } from "../../src/http/access-log.ts";
import { addCredential, addRoutingKey, chatBody, dataLines, lane } from "./fixtures.ts";

describe(`lane fallback (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream, B: MockUpstream, C: MockUpstream;
  let deadPort: number;
  let acct: { id: string; token: string };
  let credA: { id: string; apiKey: string }, credB: { id: string; apiKey: string }, credC: { id: string; apiKey: string };

  beforeAll(async () => {
    [A, B, C] = await Promise.all([startMockOpenAI(), startMockOpenAI(), startMockOpenAI()]);
    const dead = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("") });
    deadPort = dead.port!;
    await dead.stop(true);
    gw = await startTestGateway({
      PROVIDER_OPENAI_BASE_URL: A.url,
      PROVIDER_GROQ_BASE_URL: B.url,
      PROVIDER_MISTRAL_BASE_URL: C.url,
      PROVIDER_CEREBRAS_BASE_URL: `http://127.0.0.1:${deadPort}/v1`,
      UPSTREAM_TIMEOUT_SECONDS: "1",
    });
    acct = await createAccount(gw);
    credA = await addCredential(gw, acct.id, "openai");
    credB = await addCredential(gw, acct.id, "groq");
    credC = await addCredential(gw, acct.id, "mistral");
  }, 60_000);
  afterEach(() => {
    for (const m of [A, B, C]) m.setDefault({});
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([A, B, C].map((m) => m?.stop()));
  }, 60_000);

  const twoLanes = () => addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id)] });

  test("fallback: 408, 409, 429 and 5xx from a lane move to the next lane", async () => {
    const key = await twoLanes();
    for (const status of [408, 409, 429, 500, 502, 503, 504]) {
      A.setDefault({ status });
      const b0 = B.received.length;
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ mock: { content: "from B" } }) });
      expect(r.status).toBe(200);
      expect(B.received.length).toBe(b0 + 1);
      expect(B.received.at(-1)!.headers.authorization).toBe(`Bearer ${credB.apiKey}`);
    }
  });

  test("fallback: a connection error moves to the next lane", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("cerebras", (await addCredential(gw, acct.id, "cerebras")).id), lane("groq", credB.id)] });
    const b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    expect(B.received.length).toBe(b0 + 1);
  });

  test("fallback: a timeout (UPSTREAM_TIMEOUT_SECONDS) moves to the next lane and aborts the slow upstream", async () => {
    const key = await twoLanes();
    A.setDefault({ hang: true });
    const aborted0 = A.aborted;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    await A.waitForAborts(aborted0 + 1);
  });

  test("fallback: a stream broken before its first byte moves to the next lane", async () => {
    const key = await twoLanes();
    B.setDefault({ content: "served by B", chunks: 3 });
    // Reset before the headers, and after a 200 whose stream breaks before any data event
    // (the gateway has already answered 200 then: the next lane continues the same response).
    for (const broken of [{ break_after: 0 }, { break_after: 0, processing_comment: true, first_byte_ms: 30 }]) {
      A.setDefault(broken);
      const b0 = B.received.length;
      const res = await gw.req("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
      expect(res.status).toBe(200);
      const text = await res.text();
      const data = dataLines(text);
      expect(data.at(-1)).toBe("[DONE]");
      const content = data.slice(0, -1).map((d) => JSON.parse(d).choices[0]?.delta?.content ?? "").join("");
      expect(content).toBe("served by B");
      expect(text).not.toContain("error");
      expect(B.received.length).toBe(b0 + 1);
    }
  });

  test("a 400 saying the request is invalid goes straight back to the client (no fallback)", async () => {
    const key = await twoLanes();
    A.setDefault({ status: 400, error: { message: "Invalid value for 'temperature': must be at most 2.", type: "invalid_request_error", param: "temperature", code: "invalid_value" } });
    const b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ temperature: 9 }) });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain("temperature");
    expect(r.body.error.code).toBe("invalid_value");
    expect(B.received.length).toBe(b0);
  });

  test("400 no_providers for a key with no lanes", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [] });
    for (const stream of [false, true]) {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ stream }) });
      expect(r.status).toBe(400);
      expect(r.body.error.code).toBe("no_providers");
    }
  });

  test("no_credential: a streaming request on a lane whose saved key is gone answers 400; a plain one fails over", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", "cred_deleted0000000000"), lane("groq", credB.id)] });
    const s = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ stream: true }) });
    expect(s.status).toBe(400);
    expect(s.body.error.code).toBe("no_credential");
    const b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() });
    expect(r.status).toBe(200);
    expect(B.received.length).toBe(b0 + 1);
  });

  test("502 upstream_error when every lane failed, carrying the last provider error without secrets", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id), lane("mistral", credC.id)] });
    A.setDefault({ status: 500 });
    B.setDefault({ status: 429 });
    C.setDefault({ status: 503, error: { message: `Service unavailable. Incorrect API key provided: ${credC.apiKey}. Bearer ${credB.apiKey}`, type: "server_error", code: null } });
    for (const stream of [false, true]) {
      const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ stream }) });
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe("upstream_error");
      expect(r.body.error.message).toContain("mistral");
      expect(r.body.error.message).toContain("503");
      expect(r.body.error.message).toContain("Service unavailable");
      for (const secret of [credA.apiKey, credB.apiKey, credC.apiKey, key.raw]) expect(JSON.stringify(r.body)).not.toContain(secret);
    }
    for (const secret of [credA.apiKey, credB.apiKey, credC.apiKey, key.raw]) expect(gw.logs.join("")).not.toContain(secret);
  });

  test("per-lane settings: reasoning_effort is applied on openai lanes", async () => {
    // A model that reasons: OpenAI (and its mock) refuse reasoning_effort on gpt-4o and gpt-4.1.
    const model = "o4-mini";
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { reasoning_effort: "high" })] });
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model, reasoning_effort: "low" }) })).status).toBe(200);
    expect(A.received.at(-1)!.body.reasoning_effort).toBe("high");
    const max = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { reasoning_effort: "max" })] });
    expect((await gw.call("/v1/chat/completions", { token: max.raw, body: chatBody({ model }) })).status).toBe(200);
    expect(A.received.at(-1)!.body.reasoning_effort).toBe("xhigh");
    const none = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    expect((await gw.call("/v1/chat/completions", { token: none.raw, body: chatBody({ model, reasoning_effort: "low" }) })).status).toBe(200);
    expect(A.received.at(-1)!.body.reasoning_effort).toBe("low");
  });

  test("model per lane (CONTRACT §8): the request's model is sent first, whatever model the lane names", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4.1" }), lane("groq", credB.id)] });
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-4o-mini" }) })).status).toBe(200);
    expect(A.received.at(-1)!.body.model).toBe("gpt-4o-mini");
    const same = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4o-mini" })] });
    expect((await gw.call("/v1/chat/completions", { token: same.raw, body: chatBody({ model: "gpt-4o-mini" }) })).status).toBe(200);
    expect(A.received.at(-1)!.body.model).toBe("gpt-4o-mini");
  });

  test("fallback_to_default_model true: an unknown requested model is retried once on the same lane with the lane's own model", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4.1" }), lane("groq", credB.id)] });
    A.setDefault({ unknown_model: ["gpt-9-imaginary"] });
    const a0 = A.received.length, b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-9-imaginary" }) });
    A.setDefault({});
    expect(r.status).toBe(200);
    expect(A.received.slice(a0).map((x) => x.body.model)).toEqual(["gpt-9-imaginary", "gpt-4.1"]);
    expect(B.received.length).toBe(b0);
  });

  test("fallback_to_default_model false: an unknown requested model fails the lane and the chain moves on", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4.1", fallback_to_default_model: false }), lane("groq", credB.id, { model: "llama-3.3-70b-versatile" })] });
    A.setDefault({ unknown_model: ["gpt-9-imaginary"] });
    B.setDefault({ unknown_model: ["gpt-9-imaginary"] });
    const a0 = A.received.length, b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-9-imaginary" }) });
    A.setDefault({});
    B.setDefault({});
    expect(r.status).toBe(200);
    expect(A.received.slice(a0).map((x) => x.body.model)).toEqual(["gpt-9-imaginary"]);
    // The groq lane allows the retry: unknown there too, then its own model.
    expect(B.received.slice(b0).map((x) => x.body.model)).toEqual(["gpt-9-imaginary", "llama-3.3-70b-versatile"]);
  });

  test("unknown model: a lane with no model of its own to retry with counts as failed and the chain moves on", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id), lane("groq", credB.id)] });
    A.setDefault({ unknown_model: ["gpt-9-imaginary"] });
    const a0 = A.received.length, b0 = B.received.length;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ model: "gpt-9-imaginary" }) });
    expect(r.status).toBe(200);
    expect(A.received.length).toBe(a0 + 1); // no retry: the lane names no model
    expect(B.received.length).toBe(b0 + 1);
    // Alone on the key, the unknown model is the client's to fix (CONTRACT §8): 404 with the upstream's words.
    const solo = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id)] });
    const r2 = await gw.call("/v1/chat/completions", { token: solo.raw, body: chatBody({ model: "gpt-9-imaginary" }) });
    A.setDefault({});
    expect(r2.status).toBe(404);
    expect(r2.body.error.code).toBe("model_not_found");
    expect(r2.body.error.message).toContain("does not exist");
  });

  test("the request's record holds its upstream errors, fallbacks and outcome, released once", async () => {
    const seen: string[] = [];
    const note = (e: AccessEntry) => {
      for (const t of e.lanes ?? []) {
        if (t.upstreamCode) seen.push(`upstream:${t.provider}:${t.upstreamStatus}`);
        if (t.fellBack) seen.push(`fallback:${t.provider}`);
      }
      if (e.budgetRefused) seen.push("budget");
      if (e.outcome) seen.push(`done:${e.endpoint}:${e.provider}:${e.outcome}:${e.status}`);
    };
    const key = await twoLanes();
    const stop = gw.ctx.services.requestTracker.addSink((e) => { if (e.keyPrefix !== null && key.raw.startsWith(e.keyPrefix)) note(e); });
    try {
      A.setDefault({ status: 503 });
      expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody() })).status).toBe(200);
      expect(seen).toEqual(["upstream:openai:503", "fallback:openai", "done:chat:groq:ok:200"]);
    } finally {
      stop();
    }
  });
});
