// CONTRACT §9 "Cost in the answer": every answer says what the request cost, and says the same as
// its usage records. Non-streamed answers carry x-gateway-cost-usd and `usage.cost`; streams carry
// `cost` in the event that carries their usage (chat: the usage chunk, Responses:
// response.completed, Messages: message_delta), on a pass-through lane (the one usage event
// rewritten) and a translated one (the encoder's ending). A cache hit says 0, and what it saved.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { usdText } from "../../src/relay/cost-headers.ts";
import { dataLines } from "./fixtures.ts";

type Shape = "chat" | "responses" | "anthropic";
const PATH: Record<Shape, string> = { chat: "/v1/chat/completions", responses: "/v1/responses", anthropic: "/v1/messages" };

function bodyFor(shape: Shape, model: string, stream: boolean): Record<string, unknown> {
  const text = "Tell me about the cost of things, in a few words.";
  if (shape === "chat") return { model, messages: [{ role: "user", content: text }], stream, ...(stream ? { stream_options: { include_usage: true } } : {}) };
  if (shape === "responses") return { model, input: text, stream };
  return { model, max_tokens: 200, messages: [{ role: "user", content: text }], stream };
}

/** The usage the client got: a JSON answer's, or a stream's usage event's, per protocol. */
function clientUsage(shape: Shape, stream: boolean, body: any): any {
  if (!stream) return body.usage;
  const events = dataLines(String(body)).filter((d) => d !== "[DONE]").map((d) => JSON.parse(d));
  if (shape === "chat") return events.filter((e) => e.usage).at(-1)?.usage;
  if (shape === "responses") return events.find((e) => e.type === "response.completed")?.response?.usage;
  return events.find((e) => e.type === "message_delta")?.usage;
}

describe(`cost in the answer (${storesLabel})`, () => {
  let w: RelayWorld<"openai" | "anthropic" | "openrouter">;
  let keys: Record<"openai" | "anthropic" | "openrouter", string>;

  beforeAll(async () => {
    w = await startRelayWorld({ providers: ["openai", "anthropic", "openrouter"] });
    keys = {
      openai: (await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)] })).raw,
      anthropic: (await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("anthropic", w.cred.anthropic.id)] })).raw,
      openrouter: (await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openrouter", w.cred.openrouter.id)] })).raw,
    };
  }, 60_000);
  afterAll(async () => {
    await w?.stop();
  }, 60_000);

  const recordedCost = async (requestId: string) => {
    const rows = await usageRows(w.gw, eq(usageRecords.requestId, requestId));
    expect(rows.length).toBeGreaterThan(0);
    return rows.reduce((a, r) => a + r.costUsd, 0);
  };

  // Pass-through: the client's protocol is the lane's. Translated: it is not.
  const cases: Array<{ shape: Shape; lane: "openai" | "anthropic"; model: string; how: string }> = [
    { shape: "chat", lane: "openai", model: "gpt-4o-mini", how: "pass-through" },
    { shape: "responses", lane: "openai", model: "gpt-4o-mini", how: "pass-through" },
    { shape: "anthropic", lane: "anthropic", model: "claude-3-5-haiku-latest", how: "pass-through" },
    { shape: "chat", lane: "anthropic", model: "claude-3-5-haiku-latest", how: "translated" },
    { shape: "responses", lane: "anthropic", model: "claude-3-5-haiku-latest", how: "translated" },
    { shape: "anthropic", lane: "openai", model: "gpt-4o-mini", how: "translated" },
  ];
  for (const c of cases) {
    for (const stream of [false, true]) {
      test(`CONTRACT §9: a ${stream ? "streamed" : "non-streamed"} ${c.shape} answer on a ${c.how} ${c.lane} lane carries the cost its usage records hold`, async () => {
        const r = await w.gw.call(PATH[c.shape], { token: keys[c.lane], body: bodyFor(c.shape, c.model, stream), headers: c.shape === "anthropic" ? { "anthropic-version": "2023-06-01" } : undefined });
        expect(r.status).toBe(200);
        const usage = clientUsage(c.shape, stream, r.body);
        expect(typeof usage?.cost).toBe("number");
        const recorded = await recordedCost(r.headers.get("x-request-id")!);
        expect(recorded).toBeGreaterThan(0);
        expect(usage.cost).toBeCloseTo(recorded, 12);
        if (stream) expect(r.headers.get("x-gateway-cost-usd")).toBeNull();
        else {
          expect(r.headers.get("x-gateway-cost-usd")).toBe(usdText(recorded));
          expect(Number(r.headers.get("x-gateway-cost-usd"))).toBeCloseTo(recorded, 11);
        }
      });
    }
  }

  test("CONTRACT §9: an upstream's own usage.cost (OpenRouter style) is replaced by the gateway's, streamed and not", async () => {
    const mock = { upstream_cost: 12.5 };
    const plain = await w.gw.call(PATH.chat, { token: keys.openrouter, body: { ...bodyFor("chat", "openai/gpt-4o-mini", false), mock } });
    expect(plain.status).toBe(200);
    const recorded = await recordedCost(plain.headers.get("x-request-id")!);
    expect(plain.body.usage.cost).toBeCloseTo(recorded, 12);
    expect(plain.body.usage.cost).not.toBe(12.5);
    expect(plain.body.usage.cost_details).toBeUndefined();
    const streamed = await w.gw.call(PATH.chat, { token: keys.openrouter, body: { ...bodyFor("chat", "openai/gpt-4o-mini", true), mock } });
    const u = clientUsage("chat", true, streamed.body);
    expect(u.cost).toBeCloseTo(await recordedCost(streamed.headers.get("x-request-id")!), 12);
    expect(u.cost).not.toBe(12.5);
    expect(u.cost_details).toBeUndefined();
    // Only the usage event was rewritten: every content chunk is the upstream's.
    expect(String(streamed.body)).not.toContain("12.5");
  });

  test("CONTRACT §9: a budgeted key's answer also says what was reserved and what the settlement counted", async () => {
    const key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)], monthlyBudgetUsd: 50 });
    const r = await w.gw.call(PATH.chat, { token: key.raw, body: { ...bodyFor("chat", "gpt-4o-mini", false), max_tokens: 100 } });
    expect(r.status).toBe(200);
    const recorded = await recordedCost(r.headers.get("x-request-id")!);
    const reserved = Number(r.headers.get("x-gateway-cost-reserved-usd"));
    expect(reserved).toBeGreaterThan(recorded);
    expect(Number(r.headers.get("x-gateway-cost-settled-usd"))).toBeCloseTo(recorded, 11);
    expect(r.headers.get("x-gateway-cost-usd")).toBe(usdText(recorded));
    // A key without a budget reserves nothing: no such headers.
    const free = await w.gw.call(PATH.chat, { token: keys.openai, body: bodyFor("chat", "gpt-4o-mini", false) });
    expect(free.headers.get("x-gateway-cost-reserved-usd")).toBeNull();
  });

  for (const shape of ["chat", "responses", "anthropic"] as const) {
    test(`CONTRACT §9: a cache hit of a ${shape} answer says cost 0, streamed and not, and what it saved`, async () => {
      const key = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id)], cache: { ttl_seconds: 300, shared: false } });
      const headers: Record<string, string> = shape === "anthropic" ? { "anthropic-version": "2023-06-01" } : {};
      // Responses answers are cached only with store: false (docs/caching.md).
      const body = (stream: boolean) => ({ ...bodyFor(shape, "gpt-4o-mini", stream), ...(shape === "responses" ? { store: false } : {}) });
      const miss = await w.gw.call(PATH[shape], { token: key.raw, body: body(false), headers });
      expect(miss.headers.get("x-cache")).toBe("MISS");
      const bought = await recordedCost(miss.headers.get("x-request-id")!);
      expect(miss.body.usage.cost).toBeCloseTo(bought, 12);
      const hit = await w.gw.call(PATH[shape], { token: key.raw, body: body(false), headers });
      expect(hit.headers.get("x-cache")).toBe("HIT");
      expect(hit.body.usage.cost).toBe(0);
      expect(hit.headers.get("x-gateway-cost-usd")).toBe("0");
      expect(Number(hit.headers.get("x-gateway-cache-saved-usd"))).toBeCloseTo(bought, 11);
      const sHit = await w.gw.call(PATH[shape], { token: key.raw, body: body(true), headers });
      expect(sHit.headers.get("x-cache")).toBe("HIT");
      expect(clientUsage(shape, true, sHit.body)?.cost).toBe(0);
      const rows = await usageRows(w.gw, eq(usageRecords.requestId, hit.headers.get("x-request-id")!));
      expect(rows.map((x) => [x.outcome, x.costUsd])).toEqual([["cache_hit", 0]]);
    });
  }
});
