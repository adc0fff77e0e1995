// `sub` lanes end to end through the gateway (CONTRACT §4): chat translated to Responses and back,
// Responses passed through, the sign-in's headers, tier aliases, per-lane settings, refresh on an
// expired token with one refresh for concurrent requests, fail-over when the session cannot
// serve, seat accounting.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { loadSubAuth } from "../../src/providers/sub/sign-in-store.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { chat, connectSub, createKey, expireStoredToken, startSubWorldWithOpenAI, usageOf, type SubOpenAIWorld } from "./helpers.ts";

let w: SubOpenAIWorld;

beforeAll(async () => {
  w = await startSubWorldWithOpenAI("sk-test-openai-0000000000");
}, 60_000);
afterAll(() => w.stop(), 60_000);

const subLane = (sessionId: string, extra: Record<string, unknown> = {}) => ({ provider: "sub", sub_session_id: sessionId, ...extra });
const openaiLane = () => ({ provider: "openai", credential_id: w.openaiCred, model: "gpt-4o-mini" });
const lastResponsesCall = () => w.backend.received.filter((r) => r.path === "/responses").at(-1)!;


describe(`sub lane through the gateway (${storesLabel})`, () => {
  test("chat request → Responses POST {SUB_API_BASE_URL}/responses with the sign-in's bearer token and chatgpt-account-id, answer translated back", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hello sub" }] });
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("chat.completion");
    expect(r.body.choices[0].message.content).toBe("sub answer to: hello sub");
    expect(r.body.usage.prompt_tokens).toBeGreaterThan(0);
    const call = lastResponsesCall();
    expect(call.headers.authorization).toBe(`Bearer ${authJson.tokens.access_token}`);
    expect(call.headers["chatgpt-account-id"]).toBe(subAccountId);
    expect(call.body.model).toBe("gpt-5");
    expect(call.body.input).toBeDefined();
    expect(call.body.messages).toBeUndefined();
    // Nothing of the caller's reaches the subscription backend.
    expect(JSON.stringify(call.headers)).not.toContain(rawKey);
  });

  test("CONTRACT §4: a lane keeps serving after the sign-in is reconnected, with the new sign-in's token and no PATCH", async () => {
    const first = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(first.sessionId)] });
    expect((await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "before" }] })).status).toBe(200);
    const second = await connectSub(w);
    expect(second.sessionId).toBe(first.sessionId);
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "after" }] });
    expect(r.status).toBe(200);
    expect(lastResponsesCall().headers.authorization).toBe(`Bearer ${second.authJson.tokens.access_token}`);
  });

  test("streaming chat request is translated from the Responses event stream", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const res = await w.gw.req("/v1/chat/completions", { token: rawKey, body: { model: "gpt-5", stream: true, messages: [{ role: "user", content: "stream me" }] } });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const text = await res.text();
    const chunks = text.split("\n\n").filter((b) => b.startsWith("data: {")).map((b) => JSON.parse(b.slice(6)));
    expect(chunks.every((c) => c.object === "chat.completion.chunk")).toBe(true);
    expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("sub answer to: stream me");
    expect(text.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(lastResponsesCall().body.stream).toBe(true);
  });

  test("Responses request passes through to the subscription backend, streamed events in the Responses shape", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const plain = await w.gw.call("/v1/responses", { token: rawKey, body: { model: "gpt-5", input: "pass me", instructions: "x" } });
    expect(plain.status).toBe(200);
    expect(plain.body.object).toBe("response");
    expect(plain.body.output[0].content[0].text).toBe("sub answer to: pass me");
    expect(lastResponsesCall().body.instructions).toBe("x");

    const res = await w.gw.req("/v1/responses", { token: rawKey, body: { model: "gpt-5", input: "stream pass", stream: true } });
    expect(res.status).toBe(200);
    const events = (await res.text()).split("\n\n").filter((b) => b.includes("data: ")).map((b) => JSON.parse(b.slice(b.indexOf("data: ") + 6)));
    expect(events[0].type).toBe("response.created");
    expect(events.at(-1).type).toBe("response.completed");
    expect(events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta).join("")).toBe("sub answer to: stream pass");
  });

  test("tier aliases flagship / mini / sub/flagship / sub/mini resolve against the live catalog at request time", async () => {
    w.backend.setModels(["gpt-5.1-codex-mini", "gpt-5.1-codex", { id: "gpt-5.2-codex", tier: "flagship" }]);
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const sent: Record<string, string> = {};
    for (const alias of ["flagship", "mini", "sub/flagship", "sub/mini"]) {
      const r = await chat(w.gw, rawKey, { model: alias, messages: [{ role: "user", content: alias }] });
      expect(r.status).toBe(200);
      sent[alias] = lastResponsesCall().body.model;
    }
    expect(sent).toEqual({ flagship: "gpt-5.2-codex", mini: "gpt-5.1-codex-mini", "sub/flagship": "gpt-5.2-codex", "sub/mini": "gpt-5.1-codex-mini" });
    // A lane naming a tier resolves it too.
    const { rawKey: laneKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId, { model: "mini" })] });
    expect((await chat(w.gw, laneKey, { model: "anything", messages: [{ role: "user", content: "x" }] })).status).toBe(200);
    expect(lastResponsesCall().body.model).toBe("gpt-5.1-codex-mini");
    w.backend.setModels(["gpt-5.1-codex", "gpt-5.1-codex-mini", "gpt-5"]);
  });

  test("per-lane reasoning_effort, verbosity and service_tier are applied to the Responses body", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, {
      providers: [subLane(sessionId, { reasoning_effort: "high", verbosity: "low", service_tier: "priority" })],
    });
    expect((await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "settings" }] })).status).toBe(200);
    const body = lastResponsesCall().body;
    expect(body.reasoning.effort).toBe("high");
    expect(body.text.verbosity).toBe("low");
    expect(body.service_tier).toBe("priority");
  });

  test("refresh: an expired stored token is refreshed once, and concurrent requests during the refresh share it", async () => {
    const { sessionId, subAccountId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    await expireStoredToken(w, sessionId, subAccountId);
    w.auth.setLatency(300);
    const before = w.auth.requests.length;
    try {
      const all = await Promise.all(Array.from({ length: 12 }, (_, i) => chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: `c${i}` }] })));
      expect(all.map((r) => r.status)).toEqual(Array(12).fill(200));
    } finally {
      w.auth.setLatency(0);
    }
    expect(w.auth.requests.length).toBe(before + 1);
    expect(lastResponsesCall().headers.authorization).toBe(`Bearer ${w.auth.latest(subAccountId)!.access_token}`);
  });

  test("refresh on 401: a token the backend stopped accepting is refreshed and the request retried once", async () => {
    const { sessionId, subAccountId, authJson } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    w.backend.revoke(authJson.tokens.access_token);
    const before = w.auth.refreshes;
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "again" }] });
    expect(r.status).toBe(200);
    expect(w.auth.refreshes).toBe(before + 1);
    expect((await loadSubAuth(w.gw.ctx, sessionId))!.tokens.access_token).toBe(w.auth.latest(subAccountId)!.access_token);
  });

  test("a sign-in that cannot be refreshed fails the lane over to the next one with the reason", async () => {
    const { sessionId, authJson } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    w.backend.revoke(authJson.tokens.access_token);
    w.auth.setFail(401);
    try {
      const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
      expect(r.status).toBe(502);
      expect(r.body.error.code).toBe("upstream_error");
      expect(r.body.error.message).toContain("could not be refreshed");
      const { rawKey: chainKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId), openaiLane()] });
      const served = await chat(w.gw, chainKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
      expect(served.status).toBe(200);
      expect(w.openai.received.at(-1)!.body.model).toBe("gpt-5"); // the request's model first (CONTRACT §8)
    } finally {
      w.auth.setFail(null);
    }
  });

  test("a revoked session makes the sub lane fail over with a clear reason", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const { rawKey: chainKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId), openaiLane()] });
    expect((await w.gw.call("/v1/organizations/sub-session", { method: "DELETE", token: w.account.token })).status).toBe(200);
    const sent = w.backend.received.length;
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
    expect(r.status).toBe(502);
    expect(r.body.error.message).toContain("revoked");
    const served = await chat(w.gw, chainKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
    expect(served.status).toBe(200);
    expect(w.backend.received.length).toBe(sent);
  });

  test("an expired session (ttl_seconds passed) makes the sub lane fail over", async () => {
    const { sessionId } = await connectSub(w, { ttl_seconds: 1 });
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId), openaiLane()] });
    await new Promise((r) => setTimeout(r, 1100));
    const sent = w.backend.received.filter((x) => x.path === "/responses").length;
    const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "late" }] });
    expect(r.status).toBe(200);
    expect(w.openai.received.at(-1)!.body.messages.at(-1).content).toBe("late");
    expect(w.backend.received.filter((x) => x.path === "/responses").length).toBe(sent);
    const { rawKey: alone } = await createKey(w.gw, w.account.token, { providers: [subLane(sessionId)] });
    const failed = await chat(w.gw, alone, { model: "gpt-5", messages: [{ role: "user", content: "late" }] });
    expect(failed.status).toBe(502);
    expect(failed.body.error.message).toContain("expired");
  });

  test("a sign-in the backend refused at connect (not provisioned) fails over with its last_error", async () => {
    const r = await w.gw.call("/v1/organizations/sub-session", {
      method: "POST", token: w.account.token,
      body: { auth_json: { tokens: { access_token: "not-a-known-token", refresh_token: "rt-unknown", account_id: "acc-x" } } },
    });
    expect(r.status).toBe(200);
    expect(r.body.sub_host.provisioned).toBe(false);
    const { rawKey } = await createKey(w.gw, w.account.token, { providers: [subLane(r.body.id)] });
    const res = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "x" }] });
    expect(res.status).toBe(502);
    expect(res.body.error.message).toContain("not prepared");
  });

  test("sub traffic is seat traffic: recorded with seat=true and priced, left out of the budget while budget_excludes_seats", async () => {
    const { sessionId } = await connectSub(w);
    const { rawKey, key } = await createKey(w.gw, w.account.token, { monthly_budget_usd: 0.000001, providers: [subLane(sessionId)] });
    for (let i = 0; i < 3; i++) {
      const r = await chat(w.gw, rawKey, { model: "gpt-5", messages: [{ role: "user", content: "seat ".repeat(200) }] });
      expect(r.status).toBe(200);
    }
    const rows = await usageOf(w.gw, key.id);
    expect(rows.length).toBe(3);
    expect(rows.every((x) => x.seat && x.provider === "sub" && x.outcome === "ok")).toBe(true);
    expect(rows.every((x) => x.costUsd > 0)).toBe(true);
    const info = await w.gw.call("/v1/key", { token: rawKey });
    expect(info.body.budget.current_month_spend_usd).toBe(0);
  });
});
