// The Gemini-native inbound API through a test gateway (CONTRACT §9): the routing key in each of
// Google's places, generateContent and streamGenerateContent (alt=sse and the JSON array) passed
// through on a google lane with its usage recorded, translated on openai and anthropic lanes with
// a function call going out and its response coming back, countTokens, the model list, and
// errors in Google's shape.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { and, eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { addRoutingKey, lane, startRelayWorld, usageRows, type RelayWorld } from "../helpers/relay-world.ts";

let w: RelayWorld<"google" | "openai" | "anthropic">;
let googleKey: { id: string; raw: string };
let openaiKey: { id: string; raw: string };
let anthropicKey: { id: string; raw: string };

beforeAll(async () => {
  w = await startRelayWorld({ providers: ["google", "openai", "anthropic"] });
  googleKey = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id, { model: "gemini-2.5-flash" })] });
  openaiKey = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("openai", w.cred.openai.id, { model: "gpt-4o-mini" })] });
  anthropicKey = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("anthropic", w.cred.anthropic.id, { model: "claude-sonnet-4-5" })] });
}, 60_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

const hello = { contents: [{ role: "user", parts: [{ text: "hello there" }] }], generationConfig: { maxOutputTokens: 200, temperature: 0.5 } };
const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  w.gw.req(path, { method: "POST", body, headers, token: null });
const recordsOf = (keyId: string) => usageRows(w.gw, and(eq(usageRecords.routingKeyId, keyId), eq(usageRecords.endpoint, "generate_content")));

/** SSE data objects of a Gemini stream. */
function events(text: string): any[] {
  return text.split(/\r?\n\r?\n/).map((f) => f.trim()).filter((f) => f.startsWith("data:")).map((f) => JSON.parse(f.slice(5).trim()));
}

describe(`CONTRACT §9: Gemini-native inbound on a google lane: pass-through (${storesLabel})`, () => {
  test("CONTRACT §9: generateContent with the key in x-goog-api-key: Google's answer as sent, usage recorded", async () => {
    const before = w.up.google.received.length;
    const res = await post("/v1beta/models/gemini-2.5-flash:generateContent", hello, { "x-goog-api-key": googleKey.raw });
    expect(res.status).toBe(200);
    const body = (await res.json()) as any;
    expect(body.candidates[0].content.parts[0].text).toBe("gemini answer to: hello there");
    expect(body.candidates[0].finishReason).toBe("STOP");
    const sent = w.up.google.received.slice(before);
    expect(sent).toHaveLength(1);
    expect(sent[0]!.rejected).toBeNull();
    expect(sent[0]!.path).toBe("/v1beta/models/gemini-2.5-flash:generateContent");
    // The URL's model and stream stay out of Google's body; the rest is the client's.
    expect(sent[0]!.body).toEqual(hello);
    const rows = await recordsOf(googleKey.id);
    const row = rows.at(-1)!;
    expect(row).toMatchObject({ provider: "google", outcome: "ok", status: 200, promptTokens: body.usageMetadata.promptTokenCount, completionTokens: body.usageMetadata.candidatesTokenCount });
    expect(row.costUsd).toBeGreaterThan(0);
  });

  test("CONTRACT §9: streamGenerateContent?alt=sse with the key in ?key=: events passed through, the finishReason event last, usage recorded; the key reaches no log", async () => {
    const before = (await recordsOf(googleKey.id)).length;
    const res = await post(`/v1beta/models/models%2Fgemini-2.5-flash:streamGenerateContent?alt=sse&key=${googleKey.raw}`, hello);
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const evs = events(await res.text());
    expect(evs.length).toBeGreaterThan(1);
    expect(evs.map((e) => e.candidates[0].content.parts[0].text).join("")).toBe("gemini answer to: hello there");
    const last = evs.at(-1);
    expect(last.candidates[0].finishReason).toBe("STOP");
    // The upstream was asked with the lane's key in its header, never the routing key in a URL.
    const sent = w.up.google.received.at(-1)!;
    expect(sent.rejected).toBeNull();
    expect(sent.query).toEqual({ alt: "sse" });
    const rows = await recordsOf(googleKey.id);
    expect(rows.length).toBe(before + 1);
    expect(rows.at(-1)).toMatchObject({ provider: "google", outcome: "ok", promptTokens: last.usageMetadata.promptTokenCount, completionTokens: last.usageMetadata.candidatesTokenCount });
    expect(w.gw.logs.join("\n")).not.toContain(googleKey.raw);
  });

  test("CONTRACT §9: streamGenerateContent without alt=sse (key as Bearer) answers one JSON array of the events", async () => {
    const res = await post("/v1beta/models/gemini-2.5-flash:streamGenerateContent", hello, { authorization: `Bearer ${googleKey.raw}` });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("application/json");
    const arr = JSON.parse(await res.text()) as any[];
    expect(Array.isArray(arr)).toBe(true);
    expect(arr.map((e) => e.candidates[0].content.parts[0].text).join("")).toBe("gemini answer to: hello there");
    expect(arr.at(-1).candidates[0].finishReason).toBe("STOP");
    expect(arr.at(-1).usageMetadata.totalTokenCount).toBeGreaterThan(0);
    expect((await recordsOf(googleKey.id)).at(-1)).toMatchObject({ outcome: "ok", provider: "google" });
  });

  test("CONTRACT §9: a stream cut before its finishReason event is broken, not ok", async () => {
    w.up.google.enqueue({ stream: "text.stream.jsonl", dropLast: 1 });
    const res = await post("/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse", hello, { "x-goog-api-key": googleKey.raw });
    const evs = events(await res.text());
    expect(evs.at(-1).error).toMatchObject({ status: "INTERNAL" });
    expect((await recordsOf(googleKey.id)).at(-1)).toMatchObject({ outcome: "broken", provider: "google" });
  });

  test("CONTRACT §9: countTokens on a google lane is Google's exact count, recorded nowhere", async () => {
    const before = (await usageRows(w.gw, eq(usageRecords.routingKeyId, googleKey.id))).length;
    const res = await post("/v1beta/models/gemini-2.5-flash:countTokens", { contents: hello.contents }, { "x-goog-api-key": googleKey.raw });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-token-count")).toBe("exact");
    const body = (await res.json()) as any;
    expect(body.totalTokens).toBeGreaterThan(0);
    expect(w.up.google.received.at(-1)).toMatchObject({ path: "/v1beta/models/gemini-2.5-flash:countTokens", rejected: null, body: { contents: hello.contents } });
    const wrapped = await post("/v1beta/models/gemini-2.5-flash:countTokens", { generateContentRequest: { model: "models/gemini-2.5-flash", ...hello } }, { "x-goog-api-key": googleKey.raw });
    expect(wrapped.status).toBe(200);
    expect(w.up.google.received.at(-1)!.rejected).toBeNull();
    expect((await usageRows(w.gw, eq(usageRecords.routingKeyId, googleKey.id))).length).toBe(before);
  });
});

const weatherTools = [{ functionDeclarations: [{
  name: "get_weather", description: "The weather in a place",
  parameters: { type: "OBJECT", properties: { location: { type: "STRING" }, unit: { type: "STRING", enum: ["celsius", "fahrenheit"] } }, required: ["location"] },
}] }];

describe(`CONTRACT §9: Gemini-native inbound on an openai lane: translated (${storesLabel})`, () => {
  test("CONTRACT §9: a function call goes out as a functionCall part with its id, and its functionResponse comes back as the tool message answering it", async () => {
    const openai = w.up.openai;
    openai.setDefault({ tool_calls: [{ id: "call_abc", name: "get_weather", arguments: '{"location":"Paris","unit":"celsius"}' }] });
    try {
      const ask = { contents: [{ role: "user", parts: [{ text: "weather in Paris?" }] }], tools: weatherTools, systemInstruction: { parts: [{ text: "Be brief." }] } };
      const res = await post("/v1beta/models/gpt-4o-mini:generateContent", ask, { "x-goog-api-key": openaiKey.raw });
      expect(res.status).toBe(200);
      const body = (await res.json()) as any;
      expect(body.candidates[0].content).toEqual({ role: "model", parts: [{ functionCall: { id: "call_abc", name: "get_weather", args: { location: "Paris", unit: "celsius" } } }] });
      expect(body.candidates[0].finishReason).toBe("STOP");
      expect(body.usageMetadata.promptTokenCount).toBeGreaterThan(0);
      const sent = openai.received.at(-1)!.body;
      expect(sent.model).toBe("gpt-4o-mini");
      expect(sent.messages[0]).toEqual({ role: "system", content: [{ type: "text", text: "Be brief." }] });
      expect(sent.tools[0].function).toMatchObject({ name: "get_weather", parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] } });

      // Streamed (alt=sse): the call arrives whole, the last event has finishReason and usage.
      const streamed = await post("/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", ask, { "x-goog-api-key": openaiKey.raw });
      const evs = events(await streamed.text());
      const last = evs.at(-1);
      expect(evs.flatMap((e) => e.candidates[0].content.parts).filter((p: any) => p.functionCall)).toEqual([{ functionCall: { id: "call_abc", name: "get_weather", args: { location: "Paris", unit: "celsius" } } }]);
      expect(last.candidates[0].finishReason).toBe("STOP");
      expect(last.usageMetadata.totalTokenCount).toBeGreaterThan(0);

      openai.setDefault({ content: "It is sunny." });
      const next = {
        ...ask,
        contents: [...ask.contents, body.candidates[0].content, { role: "user", parts: [{ functionResponse: { id: "call_abc", name: "get_weather", response: { output: "sunny, 21C" } } }] }],
      };
      const r2 = await post("/v1beta/models/gpt-4o-mini:generateContent", next, { "x-goog-api-key": openaiKey.raw });
      expect(r2.status).toBe(200);
      expect(((await r2.json()) as any).candidates[0].content.parts).toEqual([{ text: "It is sunny." }]);
      const msgs = openai.received.at(-1)!.body.messages;
      expect(msgs.slice(-2)).toEqual([
        { role: "assistant", content: null, tool_calls: [{ id: "call_abc", type: "function", function: { name: "get_weather", arguments: '{"location":"Paris","unit":"celsius"}' } }] },
        { role: "tool", tool_call_id: "call_abc", content: "sunny, 21C" },
      ]);
    } finally {
      openai.setDefault({});
    }
    const rows = await recordsOf(openaiKey.id);
    expect(rows.length).toBe(3);
    expect(rows.map((r) => [r.provider, r.outcome, r.model])).toEqual([["openai", "ok", "gpt-4o-mini"], ["openai", "ok", "gpt-4o-mini"], ["openai", "ok", "gpt-4o-mini"]]);
    expect(rows.every((r) => r.provider === "openai" && r.outcome === "ok" && r.model === "gpt-4o-mini")).toBe(true);
  });

  test("CONTRACT §9: the JSON array stream works translated too", async () => {
    const res = await post("/v1beta/models/gemini-2.5-pro:streamGenerateContent", hello, { "x-goog-api-key": openaiKey.raw });
    const arr = JSON.parse(await res.text()) as any[];
    expect(arr.map((e) => e.candidates[0].content.parts.map((p: any) => p.text).join("")).join("")).toBe("tok0 tok1 tok2 tok3 tok4 ");
    expect(arr.at(-1).candidates[0].finishReason).toBe("STOP");
  });

  test("CONTRACT §9: countTokens on a lane that cannot count is the estimate, marked so", async () => {
    const res = await post("/v1beta/models/gemini-2.5-pro:countTokens", { contents: hello.contents }, { "x-goog-api-key": openaiKey.raw });
    expect(res.status).toBe(200);
    expect(res.headers.get("x-token-count")).toBe("estimated");
    expect(((await res.json()) as any).totalTokens).toBeGreaterThan(0);
  });
});

describe(`CONTRACT §9: Gemini-native inbound on an anthropic lane: translated (${storesLabel})`, () => {
  test("CONTRACT §9: Anthropic's tool_use blocks become functionCall parts, and their functionResponses the tool_result blocks Anthropic checks", async () => {
    const anthropic = w.up.anthropic;
    anthropic.enqueue({ stream: "tool-use.stream.jsonl" });
    const ask = { contents: [{ role: "user", parts: [{ text: "weather in SF and Paris?" }] }], tools: weatherTools, generationConfig: { maxOutputTokens: 1024, thinkingConfig: { thinkingBudget: 2048 } } };
    const res = await post("/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse", ask, { "x-goog-api-key": anthropicKey.raw });
    expect(res.status).toBe(200);
    const evs = events(await res.text());
    const last = evs.at(-1);
    const calls = evs.flatMap((e) => e.candidates[0].content.parts).filter((p: any) => p.functionCall).map((p: any) => p.functionCall);
    expect(calls).toEqual([{ id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", name: "get_weather", args: { location: "San Francisco, CA", unit: "fahrenheit" } }]);
    expect(last.candidates[0].finishReason).toBe("STOP");
    const text = evs.flatMap((e) => e.candidates[0].content.parts).filter((p: any) => typeof p.text === "string").map((p: any) => p.text).join("");
    expect(text).toContain("weather");
    expect(anthropic.received.at(-1)!.rejected).toBeNull();

    const next = {
      ...ask,
      contents: [
        ...ask.contents,
        { role: "model", parts: [{ text }, ...calls.map((c: any) => ({ functionCall: c }))] },
        { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { output: "fog" } } }] },
      ],
    };
    const r2 = await post("/v1beta/models/gemini-2.5-pro:generateContent", next, { "x-goog-api-key": anthropicKey.raw });
    expect(r2.status).toBe(200);
    const sent = anthropic.received.at(-1)!;
    expect(sent.rejected).toBeNull();
    // A functionResponse without an id answers the open call of its name.
    expect(sent.body.messages.at(-1).content).toEqual([{ type: "tool_result", tool_use_id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", content: "fog" }]);
    expect(((await r2.json()) as any).candidates[0].content.parts[0].text.length).toBeGreaterThan(0);
    const rows = await recordsOf(anthropicKey.id);
    expect(rows.length).toBe(2);
    expect(rows.every((r) => r.provider === "anthropic" && r.outcome === "ok")).toBe(true);
  });
});

describe(`CONTRACT §9: Gemini-native inbound: fallback and rate limits (${storesLabel})`, () => {
  test("CONTRACT §9: a google lane answering 503 falls over to the openai lane, which answers in Gemini's shape; both attempts recorded", async () => {
    const k = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id), lane("openai", w.cred.openai.id)] });
    w.up.google.enqueue({ status: 503, error: "unavailable.error.json" });
    const res = await post("/v1beta/models/gpt-4o-mini:streamGenerateContent?alt=sse", hello, { "x-goog-api-key": k.raw });
    expect(res.status).toBe(200);
    const evs = events(await res.text());
    expect(evs.map((e) => e.candidates[0].content.parts.map((p: any) => p.text).join("")).join("")).toBe("tok0 tok1 tok2 tok3 tok4 ");
    expect(evs.at(-1).candidates[0].finishReason).toBe("STOP");
    const rows = await recordsOf(k.id);
    expect(rows.map((r) => [r.provider, r.outcome])).toEqual([["google", "error"], ["openai", "ok"]]);
  });

  test("CONTRACT §9: over the key's rate limit is 429 RESOURCE_EXHAUSTED with Retry-After, saying rate_limit_exceeded", async () => {
    const k = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id)], rpmLimit: 1 });
    expect((await post("/v1beta/models/gemini-2.5-flash:generateContent", hello, { "x-goog-api-key": k.raw })).status).toBe(200);
    const r = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { body: hello, headers: { "x-goog-api-key": k.raw } });
    expect(r.status).toBe(429);
    expect(r.body.error).toMatchObject({ code: 429, status: "RESOURCE_EXHAUSTED" });
    expect(r.body.error.message).toStartWith("rate_limit_exceeded: ");
    expect(Number(r.headers.get("retry-after"))).toBeGreaterThan(0);
  });
});

describe(`CONTRACT §9: Gemini-native inbound and the response cache (${storesLabel})`, () => {
  test("CONTRACT §9: a key with the response cache answers a repeated request from it, as a JSON answer, SSE or the JSON array, and the hit costs nothing", async () => {
    const k = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id)], cache: { ttl_seconds: 60, shared: false } });
    const ask = { contents: [{ role: "user", parts: [{ text: "cache me" }] }] };
    const go = (method: string) => post(`/v1beta/models/gemini-2.5-flash:${method}`, ask, { "x-goog-api-key": k.raw });
    const textOf = (v: any) => (Array.isArray(v) ? v : [v]).map((e: any) => e.candidates[0].content.parts.map((p: any) => p.text).join("")).join("");
    const first = await go("generateContent");
    expect(first.headers.get("x-cache")).toBe("MISS");
    const answer = textOf(await first.json());
    let hit = await go("generateContent");
    for (let i = 0; i < 20 && hit.headers.get("x-cache") !== "HIT"; i++) {
      await hit.text();
      await Bun.sleep(50);
      hit = await go("generateContent");
    }
    expect(hit.headers.get("x-cache")).toBe("HIT");
    expect(textOf(await hit.json())).toBe(answer);
    const sent = w.up.google.received.length;
    const sse = await go("streamGenerateContent?alt=sse");
    expect(sse.headers.get("x-cache")).toBe("HIT");
    const evs = events(await sse.text());
    expect(textOf(evs)).toBe(answer);
    expect(evs.at(-1).candidates[0].finishReason).toBe("STOP");
    const arr = await go("streamGenerateContent");
    expect(arr.headers.get("x-cache")).toBe("HIT");
    expect(textOf(JSON.parse(await arr.text()))).toBe(answer);
    expect(w.up.google.received.length).toBe(sent);
    const rows = await usageRows(w.gw, eq(usageRecords.routingKeyId, k.id));
    expect(rows.filter((r) => r.outcome === "cache_hit").length).toBeGreaterThanOrEqual(3);
    expect(rows.filter((r) => r.outcome === "cache_hit").every((r) => r.costUsd === 0)).toBe(true);
  });
});

describe(`CONTRACT §9: Gemini model list (${storesLabel})`, () => {
  test("CONTRACT §9: GET /v1beta/models lists the key's lane models in Google's shape; GET /v1beta/models/{model} one of them", async () => {
    const res = await w.gw.call(`/v1beta/models?key=${googleKey.raw}`);
    expect(res.status).toBe(200);
    expect(res.body.models).toEqual([expect.objectContaining({ name: "models/gemini-2.5-flash", displayName: "gemini-2.5-flash", supportedGenerationMethods: ["generateContent", "streamGenerateContent", "countTokens"] })]);
    expect(res.body.models[0].inputTokenLimit).toBeGreaterThan(100_000);
    expect(res.body.models[0].outputTokenLimit).toBeGreaterThan(1000);
    const one = await w.gw.call("/v1beta/models/gemini-2.5-flash", { headers: { "x-goog-api-key": googleKey.raw } });
    expect(one.status).toBe(200);
    expect(one.body.name).toBe("models/gemini-2.5-flash");
    const missing = await w.gw.call("/v1beta/models/gpt-4o", { headers: { "x-goog-api-key": googleKey.raw } });
    expect(missing.status).toBe(404);
    expect(missing.body.error).toMatchObject({ code: 404, status: "NOT_FOUND" });
  });
});

describe(`CONTRACT §9: errors in Google's shape (${storesLabel})`, () => {
  const shapeOf = (body: any) => ({ code: body.error?.code, status: body.error?.status, hasMessage: typeof body.error?.message === "string" });

  test("CONTRACT §9: a bad or missing key is 401 UNAUTHENTICATED and says so", async () => {
    const bad = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { body: hello, headers: { "x-goog-api-key": "gw_nope" }, token: null });
    expect(bad.status).toBe(401);
    expect(shapeOf(bad.body)).toEqual({ code: 401, status: "UNAUTHENTICATED", hasMessage: true });
    expect(bad.body.error.message).toStartWith("invalid_api_key: ");
    const none = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { body: hello, token: null });
    expect(none.status).toBe(401);
    expect(none.body.error.message).toStartWith("signup_required: ");
    const list = await w.gw.call("/v1beta/models");
    expect(list.status).toBe(401);
  });

  test("CONTRACT §9: unknown routes and methods are 404 NOT_FOUND; other HTTP methods 405", async () => {
    const route = await w.gw.call("/v1beta/tunedModels/x:generateContent", { body: hello, headers: { "x-goog-api-key": googleKey.raw } });
    expect(route.status).toBe(404);
    expect(shapeOf(route.body)).toEqual({ code: 404, status: "NOT_FOUND", hasMessage: true });
    const method = await w.gw.call("/v1beta/models/gemini-2.5-flash:predict", { body: hello, headers: { "x-goog-api-key": googleKey.raw } });
    expect(method.status).toBe(404);
    expect(method.body.error.status).toBe("NOT_FOUND");
    const del = await w.gw.call("/v1beta/models/gemini-2.5-flash", { method: "DELETE", headers: { "x-goog-api-key": googleKey.raw } });
    expect(del.status).toBe(405);
    expect(del.body.error).toMatchObject({ code: 405 });
  });

  test("CONTRACT §9: a bad body is 400 INVALID_ARGUMENT, never a 500, and nothing goes upstream", async () => {
    const before = w.up.google.received.length;
    for (const body of ["{not json", { contents: "hi" }, { contents: [{ role: "user" }] }, { contents: hello.contents, generationConfig: { maxOutputTokens: -1 } }, [1]]) {
      const r = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { body, headers: { "x-goog-api-key": googleKey.raw } });
      expect(r.status).toBe(400);
      expect(shapeOf(r.body)).toEqual({ code: 400, status: "INVALID_ARGUMENT", hasMessage: true });
    }
    const count = await w.gw.call("/v1beta/models/gemini-2.5-flash:countTokens", { body: { nothing: 1 }, headers: { "x-goog-api-key": googleKey.raw } });
    expect(count.status).toBe(400);
    expect(count.body.error.status).toBe("INVALID_ARGUMENT");
    // A request the translation cannot carry, on a key whose only lane needs it translated.
    const hosted = await w.gw.call("/v1beta/models/gemini-2.5-pro:generateContent", { body: { ...hello, tools: [{ googleSearch: {} }] }, headers: { "x-goog-api-key": openaiKey.raw } });
    expect(hosted.status).toBe(400);
    expect(hosted.body.error.status).toBe("INVALID_ARGUMENT");
    expect(w.up.google.received.length).toBe(before);
  });

  test("CONTRACT §9: a budget that cannot fit the request is 402 (RESOURCE_EXHAUSTED) and says budget_exceeded", async () => {
    const k = await addRoutingKey(w.gw, w.acct.id, { lanes: [lane("google", w.cred.google.id, { model: "gemini-2.5-flash" })], monthlyBudgetUsd: 0.000001 });
    const before = w.up.google.received.length;
    const r = await w.gw.call("/v1beta/models/gemini-2.5-flash:generateContent", { body: hello, headers: { "x-goog-api-key": k.raw } });
    expect(r.status).toBe(402);
    expect(shapeOf(r.body)).toEqual({ code: 402, status: "RESOURCE_EXHAUSTED", hasMessage: true });
    expect(r.body.error.message).toStartWith("budget_exceeded: ");
    expect(r.body.error.message).toContain("monthly budget");
    expect(w.up.google.received.length).toBe(before);
  });
});
