// GET /v1/models (no auth: the general catalog; with a routing key: what its lanes serve) and
// GET /v1/key (CONTRACT §6 shape).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { calcPrice, findProvider } from "@pydantic/genai-prices";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { isRealModelId } from "../../src/relay/models.ts";
import { isRetiredModel } from "../../src/relay/retired-models.ts";
import { newId } from "../../src/lib/ids.ts";
import { bridges } from "../../src/store/db/schema/index.ts";
import { startMockSubBackend, type MockSubBackend, type SubModel } from "../mocks/sub-backend.ts";
import { startMockSubAuth, type MockSubAuth } from "../mocks/sub-auth.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { connectSub, createKey, registerBridge } from "../lanes/helpers.ts";

describe(`models and key introspection (${storesLabel})`, () => {
  let gw: TestGateway;
  let A: MockUpstream;
  let acct: { id: string; token: string };
  let credA: { id: string }, credG: { id: string };

  beforeAll(async () => {
    A = await startMockOpenAI();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: A.url });
    acct = await createAccount(gw);
    credA = await addCredential(gw, acct.id, "openai");
    credG = await addCredential(gw, acct.id, "groq");
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
  }, 60_000);

  const ids = (body: any) => (body.data as Array<{ id: string }>).map((m) => m.id);

  test("GET /v1/models without a key: the general catalog from the pricing package, in the list shape", async () => {
    const r = await gw.call("/v1/models");
    expect(r.status).toBe(200);
    expect(r.body.object).toBe("list");
    for (const m of r.body.data) {
      expect(Object.keys(m).sort()).toEqual(["created", "id", "object", "owned_by"]);
      expect(m.object).toBe("model");
      expect(Number.isInteger(m.created)).toBe(true);
    }
    const all = ids(r.body);
    expect(new Set(all).size).toBe(all.length);
    for (const id of ["sub/flagship", "sub/mini", "bridge/coding-agent"]) expect(all).toContain(id);
    // Every current catalog model of a vendor we route to is listed, with its vendor as owner;
    // catalog patterns and fragments are not models (CONTRACT §8), and retired models cannot be called: both left out.
    for (const m of findProvider({ providerId: "openai" })!.models) {
      if (isRealModelId(m.id) && !isRetiredModel(m.id)) expect(all).toContain(m.id);
      else expect(all).not.toContain(m.id);
    }
    expect(r.body.data.find((m: any) => m.id === "gpt-4o-mini").owned_by).toBe("openai");
    expect(all).toContain("claude-sonnet-4-5");
  });

  test("SPEC Model entry: without a key, general model names only — no router's vendor/model paths, no retired models, far fewer than the catalog", async () => {
    const all = ids((await gw.call("/v1/models")).body);
    const catalogSize = ["openai", "anthropic", "openrouter", "together", "groq"].reduce((n, p) => n + (findProvider({ providerId: p })?.models.length ?? 0), 0);
    expect(all.length).toBeLessThan(catalogSize);
    expect(all.filter((id) => id.includes("/"))).toEqual(["sub/flagship", "sub/mini", "bridge/coding-agent"]);
    for (const retired of ["claude-2", "claude-v1", "ada", "babbage", "text-davinci-003", "gpt-4-32k"]) expect(all).not.toContain(retired);
    expect((await gw.call("/v1/models/claude-2")).status).toBe(404);
  });

  test("GET /v1/models with a routing key: the models its lanes serve, plus the alias of each lane kind it has", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4.1" }), lane("groq", credG.id)] });
    const r = await gw.call("/v1/models", { token: key.raw });
    expect(r.status).toBe(200);
    const got = ids(r.body);
    expect(got[0]).toBe("gpt-4.1");
    expect(r.body.data[0].owned_by).toBe("openai");
    for (const m of findProvider({ providerId: "groq" })!.models) if (isRealModelId(m.id) && !isRetiredModel(m.id)) expect(got).toContain(m.id);
    expect(got).not.toContain("gpt-4o-mini");
    // Key-scoped lists leave retired models out too (groq shut these down).
    expect(findProvider({ providerId: "groq" })!.models.map((m) => m.id)).toContain("llama3-70b-8192");
    expect(got).not.toContain("llama3-70b-8192");
    expect(got).not.toContain("sub/flagship");
    expect(got).not.toContain("bridge/coding-agent");

    // A bridge lane whose bridge is not registered cannot be called: nothing of it is listed.
    const withBridge = await addRoutingKey(gw, acct.id, { lanes: [lane("bridge", null, { bridge_instance_id: "brg_notregistered0000" })] });
    const b = await gw.call("/v1/models", { token: withBridge.raw });
    expect(b.status).toBe(200);
    expect(ids(b.body)).toEqual([]);

    const bad = await gw.call("/v1/models", { token: "gw_unknownkey00000000000000000000" });
    expect(bad.status).toBe(401);
    expect(bad.body.error.code).toBe("invalid_api_key");
  });

  test("GET /v1/key: id, label, key_prefix, mode, lanes and budget state", async () => {
    const key = await addRoutingKey(gw, acct.id, { label: "fleet-a", lanes: [lane("openai", credA.id, { model: "gpt-4o-mini" }), lane("groq", credG.id)], monthlyBudgetUsd: 5 });
    expect((await gw.call("/v1/chat/completions", { token: key.raw, body: chatBody({ mock: { prompt_tokens: 100_000, completion_tokens: 10_000 } }) })).status).toBe(200);
    await Bun.sleep(50);
    const r = await gw.call("/v1/key", { token: key.raw });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({
      id: key.id,
      label: "fleet-a",
      key_prefix: key.raw.slice(0, 10),
      mode: "fallback",
      lanes: [
        { provider: "openai", model: "gpt-4o-mini", subscription: false },
        { provider: "groq", model: null, subscription: false },
      ],
    });
    const b = r.body.budget;
    expect(Object.keys(b).sort()).toEqual(["current_month", "current_month_spend_usd", "exhausted", "monthly_budget_usd", "remaining_usd"]);
    expect(b.monthly_budget_usd).toBe(5);
    expect(b.current_month).toBe(new Date().toISOString().slice(0, 7));
    expect(b.current_month_spend_usd).toBeCloseTo(calcPrice({ input_tokens: 100_000, output_tokens: 10_000 }, "gpt-4o-mini", { providerId: "openai" })!.total_price, 6);
    expect(b.remaining_usd).toBeCloseTo(5 - b.current_month_spend_usd, 6);
    expect(b.exhausted).toBe(false);
    expect(JSON.stringify(r.body)).not.toContain(key.raw);

    const none = await addRoutingKey(gw, acct.id, { lanes: [] });
    const n = await gw.call("/v1/key", { token: none.raw });
    expect(n.body.budget).toMatchObject({ monthly_budget_usd: null, remaining_usd: null, exhausted: false, current_month_spend_usd: 0 });
    expect((await gw.call("/v1/key")).body.error.code).toBe("signup_required");
  });
});

// CONTRACT §4, §8: with a key, the list is what that key can really call. Sub lanes list their live
// catalog (also when the lane names a model) and the tier aliases it lets resolve, bare ones
// included; bridge lanes list what the bridge answers at its GET /v1/models, asked through the
// same SSRF-pinned path as its inference, and `bridge/coding-agent` when it resolves there.
describe(`GET /v1/models with a key: sub tiers and bridge lists (${storesLabel})`, () => {
  let gw: TestGateway;
  let backend: MockSubBackend;
  let auth: MockSubAuth;
  let bridge: MockBridge, broken: MockBridge;

  beforeAll(async () => {
    backend = await startMockSubBackend({ strict: true });
    auth = await startMockSubAuth({ backend });
    [bridge, broken] = await Promise.all([startMockBridge(), startMockBridge()]);
    gw = await startTestGateway({ SUB_API_BASE_URL: backend.url, SUB_AUTH_BASE_URL: auth.url });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await Promise.all([backend?.stop(), auth?.stop(), bridge?.stop(), broken?.stop()]);
  }, 60_000);

  const ids = (body: any) => (body.data as Array<{ id: string }>).map((m) => m.id);

  /** A fresh account with its own sign-in (so its own catalog), connected while the backend lists `models`. */
  async function subKey(models: Array<string | SubModel>, laneModel: string | null = null) {
    backend.setModels(models);
    const account = await createAccount(gw);
    const { sessionId } = await connectSub({ gw, backend, auth, account });
    const { rawKey } = await createKey(gw, account.token, { providers: [{ provider: "sub", sub_session_id: sessionId, ...(laneModel ? { model: laneModel } : {}) }] });
    return rawKey;
  }

  test("a sub lane that names a model still lists the live catalog, and the bare flagship and mini aliases resolve and are served", async () => {
    const raw = await subKey(["gpt-5.1-codex", "gpt-5.1-codex-mini", "live-only-model-9"], "gpt-5");
    const r = await gw.call("/v1/models", { token: raw });
    expect(r.status).toBe(200);
    expect(ids(r.body).sort()).toEqual(["flagship", "gpt-5", "gpt-5.1-codex", "gpt-5.1-codex-mini", "live-only-model-9", "mini", "sub/flagship", "sub/mini"]);
    for (const m of r.body.data) expect(m.owned_by).toBe("sub");
    // GET /v1/models/{id} answers from the same list.
    const one = await gw.call("/v1/models/flagship", { token: raw });
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ id: "flagship", object: "model", owned_by: "sub" });
    expect((await gw.call(`/v1/models/${encodeURIComponent("sub/mini")}`, { token: raw })).status).toBe(200);
    // Listed means callable: the aliases resolve against the catalog at request time.
    for (const [alias, served] of [["flagship", "gpt-5.1-codex"], ["mini", "gpt-5.1-codex-mini"]]) {
      const c = await gw.call("/v1/chat/completions", { token: raw, body: { model: alias, messages: [{ role: "user", content: "hi" }] } });
      expect(c.status).toBe(200);
      expect(backend.received.filter((x) => x.path === "/responses").at(-1)!.body.model).toBe(served);
    }
  });

  test("a tier the catalog cannot resolve is not listed (nor retrievable), and a tagged entry wins", async () => {
    const raw = await subKey(["gpt-5", "gpt-5-pro"]);
    const r = await gw.call("/v1/models", { token: raw });
    expect(ids(r.body).sort()).toEqual(["flagship", "gpt-5", "gpt-5-pro", "sub/flagship"]);
    const mini = await gw.call("/v1/models/mini", { token: raw });
    expect(mini.status).toBe(404);
    expect(mini.body.error.code).toBe("model_not_found");
    // An entry tagged with its tier resolves it, whatever its id says.
    const tagged = await subKey(["gpt-5", { id: "small-one", tier: "mini" }]);
    expect(ids((await gw.call("/v1/models", { token: tagged })).body).sort()).toEqual(["flagship", "gpt-5", "mini", "small-one", "sub/flagship", "sub/mini"]);
  });

  test("a bridge lane lists what the bridge serves (asked with the bridge's token only) and bridge/coding-agent, which resolves there", async () => {
    bridge.setModels(["agent-large", "coding-agent"]);
    const account = await createAccount(gw);
    const bridgeId = await registerBridge(gw, account.token, bridge.url, bridge.token);
    const { rawKey } = await createKey(gw, account.token, { providers: [{ provider: "bridge", bridge_instance_id: bridgeId }] });
    const r = await gw.call("/v1/models", { token: rawKey });
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual(["agent-large", "coding-agent", "bridge/coding-agent"]);
    for (const m of r.body.data) expect(m.owned_by).toBe("bridge");
    const asked = bridge.received.filter((x) => x.path === "/v1/models");
    expect(asked.length).toBe(1);
    expect(asked[0]!.headers.authorization).toBe(`Bearer ${bridge.token}`);
    expect(JSON.stringify(asked[0]!.headers)).not.toContain(rawKey);
    // Retrieve answers from the same list; the list is cached briefly, not asked again.
    expect((await gw.call(`/v1/models/${encodeURIComponent("bridge/coding-agent")}`, { token: rawKey })).status).toBe(200);
    expect((await gw.call("/v1/models/agent-large", { token: rawKey })).body.id).toBe("agent-large");
    expect(bridge.received.filter((x) => x.path === "/v1/models").length).toBe(1);
    // The alias is called as the bridge's own model.
    const c = await gw.call("/v1/chat/completions", { token: rawKey, body: { model: "bridge/coding-agent", messages: [{ role: "user", content: "hi" }] } });
    expect(c.status).toBe(200);
    expect(bridge.completions.at(-1)!.body.model).toBe("coding-agent");
  });

  test("a bridge that fails its model list or cannot be reached drops its models, never the answer", async () => {
    broken.setModels(503);
    const account = await createAccount(gw);
    const failing = await registerBridge(gw, account.token, broken.url, broken.token);
    const { rawKey } = await createKey(gw, account.token, { providers: [{ provider: "bridge", bridge_instance_id: failing, model: "agent-x" }] });
    const r = await gw.call("/v1/models", { token: rawKey });
    expect(r.status).toBe(200);
    expect(ids(r.body)).toEqual(["agent-x"]);
    expect((await gw.call(`/v1/models/${encodeURIComponent("bridge/coding-agent")}`, { token: rawKey })).status).toBe(404);

    const gone = await startMockBridge();
    const goneId = await registerBridge(gw, account.token, gone.url, gone.token);
    await gone.stop();
    const k2 = await createKey(gw, account.token, { providers: [{ provider: "bridge", bridge_instance_id: goneId }] });
    const r2 = await gw.call("/v1/models", { token: k2.rawKey });
    expect(r2.status).toBe(200);
    expect(ids(r2.body)).toEqual([]);
  });

  test("ALLOW_PRIVATE_UPSTREAMS=false: a bridge whose host resolves to loopback is not asked for its models", async () => {
    const strict = await startTestGateway({ ALLOW_PRIVATE_UPSTREAMS: "false" });
    try {
      const account = await createAccount(strict);
      // Stored directly: registration would refuse the loopback address, so this stands for a
      // name that resolved publicly then and resolves to loopback now.
      const id = newId("brg");
      await strict.ctx.db.insert(bridges).values({ id, accountId: account.id, label: "b", baseUrl: bridge.url, tokenCiphertext: strict.ctx.secrets.seal(bridge.token, `bridges:${id}`), tokenFingerprint: bridge.token.slice(-4) });
      const key = await addRoutingKey(strict, account.id, { lanes: [lane("bridge", null, { bridge_instance_id: id })] });
      const before = bridge.received.length;
      const r = await strict.call("/v1/models", { token: key.raw });
      expect(r.status).toBe(200);
      expect(ids(r.body)).toEqual([]);
      expect(bridge.received.length).toBe(before);
    } finally {
      await strict.stop();
    }
  }, 60_000);
});
