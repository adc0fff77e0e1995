// GET /v1/models (no auth: the general catalog; with a routing key: what its lanes serve) and
// GET /v1/key (CONTRACT §6 shape).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { calcPrice, findProvider } from "@pydantic/genai-prices";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { startMockOpenAI, type MockUpstream } from "../mocks/openai-upstream.ts";
import { addCredential, addRoutingKey, chatBody, lane } from "./fixtures.ts";
import { isRealModelId } from "../../src/relay/models.ts";

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
  });
  afterAll(async () => {
    await gw?.stop();
    await A?.stop();
  });

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
    // Every catalog model of a vendor we route to is listed, with its vendor as owner; catalog
    // patterns and fragments are not models (CONTRACT §8) and are left out.
    for (const m of findProvider({ providerId: "openai" })!.models) {
      if (isRealModelId(m.id)) expect(all).toContain(m.id);
      else expect(all).not.toContain(m.id);
    }
    expect(r.body.data.find((m: any) => m.id === "gpt-4o-mini").owned_by).toBe("openai");
    expect(all).toContain(findProvider({ providerId: "anthropic" })!.models[0]!.id);
  });

  test("GET /v1/models with a routing key: the models its lanes serve, plus the alias of each lane kind it has", async () => {
    const key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", credA.id, { model: "gpt-4.1" }), lane("groq", credG.id)] });
    const r = await gw.call("/v1/models", { token: key.raw });
    expect(r.status).toBe(200);
    const got = ids(r.body);
    expect(got[0]).toBe("gpt-4.1");
    expect(r.body.data[0].owned_by).toBe("openai");
    for (const m of findProvider({ providerId: "groq" })!.models) if (isRealModelId(m.id)) expect(got).toContain(m.id);
    expect(got).not.toContain("gpt-4o-mini");
    expect(got).not.toContain("sub/flagship");
    expect(got).not.toContain("bridge/coding-agent");

    const withBridge = await addRoutingKey(gw, acct.id, { lanes: [lane("bridge", null, { bridge_instance_id: "brg_notregistered0000" })] });
    const b = await gw.call("/v1/models", { token: withBridge.raw });
    expect(ids(b.body)).toContain("bridge/coding-agent");
    expect(ids(b.body)).not.toContain("sub/mini");

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
