// Inference auth and request checks (SPEC Authentication 5, CONTRACT §6 and §8), through real
// HTTP: gateway → mock OpenAI upstream.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, createAccount, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startRelayWorld, type RelayWorld } from "../helpers/relay-world.ts";
import type { MockUpstream } from "../mocks/openai-upstream.ts";
import { accounts } from "../../src/store/db/schema/index.ts";
import { addCredential, addRoutingKey, chatBody, lane, revokeKey } from "./fixtures.ts";

describe(`inference auth and validation (${storesLabel})`, () => {
  let gw: TestGateway;
  let mock: MockUpstream;
  let acct: { id: string; token: string };
  let key: { id: string; raw: string; hash: string };

  let w: RelayWorld<"openai">;
  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai"], env: { MAX_REQUEST_BYTES: "4096" } });
    ({ gw, acct, up: { openai: mock } } = w);
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", w.cred.openai.id)] });
  }, 60_000);
  afterAll(() => w?.stop(), 60_000);

  test("no key answers 401 signup_required", async () => {
    for (const path of ["/v1/chat/completions", "/v1/responses"]) {
      const r = await gw.call(path, { body: chatBody() });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("signup_required");
      expect(r.body.error.message).toContain("agent-signup");
    }
  });

  test("a raw upstream key (sk-…) answers 401 signup_required and is never forwarded", async () => {
    const before = mock.received.length;
    const r = await gw.call("/v1/chat/completions", { token: "sk-proj-abcdefghijklmnop", body: chatBody() });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("signup_required");
    expect(mock.received.length).toBe(before);
  });

  test("an account token (sk_/rk_) answers 401 invalid_api_key with an explanation", async () => {
    const rk = await addToken(gw, acct.id, "read_only");
    for (const t of [acct.token, rk]) {
      const r = await gw.call("/v1/chat/completions", { token: t, body: chatBody() });
      expect(r.status).toBe(401);
      expect(r.body.error.code).toBe("invalid_api_key");
      expect(r.body.error.message).toContain("account token");
      expect(r.body.error.message).toContain("gw_");
      expect(JSON.stringify(r.body)).not.toContain(t);
    }
  });

  test("an unknown routing key answers 401 invalid_api_key (Bearer optional)", async () => {
    const r = await gw.call("/v1/chat/completions", { token: "gw_doesnotexist000000000000000000", body: chatBody() });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("invalid_api_key");
    const bare = await gw.call("/v1/chat/completions", { headers: { authorization: key.raw }, body: chatBody() });
    expect(bare.status).toBe(200);
  });

  test("a revoked key answers 401 invalid_api_key at once, even when it was cached", async () => {
    const a = await createAccount(gw);
    const c = await addCredential(gw, a.id, "openai");
    const k = await addRoutingKey(gw, a.id, { lanes: [lane("openai", c.id)] });
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() })).status).toBe(200);
    await revokeKey(gw, k);
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("invalid_api_key");
  });

  test("a removed account's key answers 401 invalid_api_key (removed_at, or unpaid past its deadline)", async () => {
    const removed = await createAccount(gw);
    const c1 = await addCredential(gw, removed.id, "openai");
    const k1 = await addRoutingKey(gw, removed.id, { lanes: [lane("openai", c1.id)] });
    await gw.ctx.db.update(accounts).set({ removedAt: new Date() }).where(eq(accounts.id, removed.id));
    expect((await gw.call("/v1/chat/completions", { token: k1.raw, body: chatBody() })).body.error.code).toBe("invalid_api_key");

    const unpaid = await createAccount(gw, { plan: "free" });
    const c2 = await addCredential(gw, unpaid.id, "openai");
    const k2 = await addRoutingKey(gw, unpaid.id, { lanes: [lane("openai", c2.id)] });
    expect((await gw.call("/v1/chat/completions", { token: k2.raw, body: chatBody() })).status).toBe(200);
    // Deadline passes while the key sits in the cache: the cached entry checks it too.
    // Far enough ahead that a loaded machine still serves the next request before it.
    const deadline = Date.now() + 1500;
    await gw.ctx.db.update(accounts).set({ accountExpiresAt: new Date(deadline) }).where(eq(accounts.id, unpaid.id));
    const { publishInvalidation } = await import("../../src/store/invalidation.ts");
    await publishInvalidation(gw.ctx, { kind: "account", accountId: unpaid.id });
    expect((await gw.call("/v1/chat/completions", { token: k2.raw, body: chatBody() })).status).toBe(200);
    await Bun.sleep(Math.max(0, deadline - Date.now()) + 100);
    const r = await gw.call("/v1/chat/completions", { token: k2.raw, body: chatBody() });
    expect(r.status).toBe(401);
    expect(r.body.error.code).toBe("invalid_api_key");
  });

  test("missing model / messages / input answer 400 nested, type invalid_request_error, no code", async () => {
    const cases: Array<[string, unknown, string]> = [
      ["/v1/chat/completions", { messages: [] }, "model"],
      ["/v1/chat/completions", { model: "gpt-4o-mini" }, "messages"],
      ["/v1/responses", { model: "gpt-4o-mini" }, "input"],
      ["/v1/responses", { input: "hi" }, "model"],
    ];
    for (const [path, body, field] of cases) {
      const r = await gw.call(path, { token: key.raw, body });
      expect(r.status).toBe(400);
      expect(r.body.error.type).toBe("invalid_request_error");
      expect(r.body.error.message).toContain(field);
      expect(r.body.error.code).toBeNull(); // CONTRACT §8: "no code" is code: null, param present too
      expect(r.body.error.param).toBe(field);
    }
    const bad = await gw.call("/v1/chat/completions", { token: key.raw, body: "{not json" });
    expect(bad.status).toBe(400);
    expect(bad.body.error.type).toBe("invalid_request_error");
  });

  test("a body over MAX_REQUEST_BYTES answers 413 before it is parsed", async () => {
    const big = "x".repeat(5000);
    // Not even JSON: the size is refused first.
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: big });
    expect(r.status).toBe(413);
    expect(r.body.error.message).toContain("4096");
    // Chunked upload without content-length is cut at the cap too.
    const stream = new ReadableStream({ start(c) { c.enqueue(new TextEncoder().encode(big)); c.close(); } });
    const res = await fetch(gw.url + "/v1/chat/completions", { method: "POST", headers: { authorization: `Bearer ${key.raw}` }, body: stream });
    expect(res.status).toBe(413);
  });

  test("wrong method on an inference path answers 405 nested without code", async () => {
    const r = await gw.call("/v1/chat/completions", { method: "GET", token: key.raw });
    expect(r.status).toBe(405);
    expect(r.body.error).toBeDefined();
    expect(r.body.error).toMatchObject({ type: "invalid_request_error", param: null, code: null }); // CONTRACT §8
  });

  test("order of checks: 405 → key 401 → validation 400 → budget 402", async () => {
    // 405 beats a missing key.
    expect((await gw.call("/v1/chat/completions", { method: "PUT", body: {} })).status).toBe(405);
    // 401 beats an invalid body.
    expect((await gw.call("/v1/chat/completions", { body: { nothing: true } })).status).toBe(401);
    // 400 beats an exhausted budget.
    const a = await createAccount(gw);
    const c = await addCredential(gw, a.id, "openai");
    const k = await addRoutingKey(gw, a.id, { lanes: [lane("openai", c.id)], monthlyBudgetUsd: 0.001 });
    const spend = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody({ mock: { prompt_tokens: 10000, completion_tokens: 10000 } }) });
    expect(spend.status).toBe(200);
    await Bun.sleep(50);
    expect((await gw.call("/v1/chat/completions", { token: k.raw, body: { model: "gpt-4o-mini" } })).status).toBe(400);
    const r = await gw.call("/v1/chat/completions", { token: k.raw, body: chatBody() });
    expect(r.status).toBe(402);
    expect(r.body.error.code).toBe("budget_exceeded");
  });

  test("additional properties are forwarded to the upstream untouched", async () => {
    const extra = { temperature: 0.3, seed: 7, metadata: { team: "a", run: "7" }, vendor_flag: "keep-me", vendor_options: { nested: [1, { x: null }] }, tools: [{ type: "function", function: { name: "f", parameters: { type: "object" } } }] };
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody(extra) });
    expect(r.status).toBe(200);
    const got = mock.received.at(-1)!.body;
    for (const [k, v] of Object.entries(extra)) expect(got[k]).toEqual(v);
    expect(got.messages).toEqual(chatBody().messages);
    expect(mock.received.at(-1)!.headers.authorization).toStartWith("Bearer sk-test-");
  });
});
