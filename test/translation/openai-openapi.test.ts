// What the gateway sends a client, checked against OpenAI's own published OpenAPI document
// (test/fixtures/openai-openapi/, source noted there): success bodies, stream chunks, Responses
// events and errors, on every lane kind (OpenAI pass-through, Anthropic, Gemini, an
// OpenAI-compatible vendor, the subscription, a bridge). Strict clients and generated SDKs
// validate against exactly these schemas, so "looks right" is not enough.
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { parseSse } from "../protocols/helpers.ts";
import { registerBridge } from "../lanes/helpers.ts";
import { expectValid, expectValidEvent } from "./openai-schema.ts";
import { startWorld, type World } from "./world.ts";


let w: World;
let bridge: MockBridge;
const keys: Record<string, string> = {};
const LANES = ["openai", "anthropic", "google", "mistral", "sub", "bridge"] as const;
type Lane = (typeof LANES)[number];

beforeAll(async () => {
  w = await startWorld();
  bridge = await startMockBridge();
  const bridgeId = await registerBridge(w.gw, w.accountToken, bridge.url, bridge.token);
  for (const lane of LANES) {
    keys[lane] = lane === "bridge"
      ? (await w.createKey([{ provider: "bridge", bridge_instance_id: bridgeId }])).rawKey
      : w.keys[lane]!.rawKey;
  }
}, 120_000);
afterAll(async () => {
  await w?.stop();
  await bridge?.stop();
}, 60_000);

const MODEL: Record<Lane, string> = {
  openai: "gpt-4.1", anthropic: "claude-sonnet-4-5-20250929", google: "gemini-2.5-flash",
  mistral: "mistral-large-latest", sub: "gpt-5", bridge: "coding-agent",
};

// Lanes whose upstream speaks OpenAI's protocol answer what OpenAI answers today (the recorded
// replies, brought to the current schema: `refusal`, `logprobs`, `cache_write_tokens`, no null
// `user` or `usage`), so what is checked is what the gateway does to them, not the mock's
// shortcuts. (OpenAI's wire still sends `"usage": null` and `"user": null` where its own document
// allows only an object or a string; pass-through forwards such bytes untouched.)
const USAGE = { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11, prompt_tokens_details: { cached_tokens: 0, audio_tokens: 0 }, completion_tokens_details: { reasoning_tokens: 0, audio_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } };
const CHUNK = { id: "chatcmpl-conf", object: "chat.completion.chunk", created: 1727000000, model: "gpt-4.1-2025-04-14", service_tier: "default" };
const CHAT_REPLY = {
  json: { ...CHUNK, object: "chat.completion", choices: [{ index: 0, message: { role: "assistant", content: "Hello.", refusal: null, annotations: [] }, logprobs: null, finish_reason: "stop" }], usage: USAGE },
  stream: [
    { ...CHUNK, choices: [{ index: 0, delta: { role: "assistant", content: "", refusal: null }, logprobs: null, finish_reason: null }] },
    { ...CHUNK, choices: [{ index: 0, delta: { content: "Hel" }, logprobs: null, finish_reason: null }] },
    { ...CHUNK, choices: [{ index: 0, delta: { content: "lo." }, logprobs: null, finish_reason: null }] },
    { ...CHUNK, choices: [{ index: 0, delta: {}, logprobs: null, finish_reason: "stop" }] },
    { ...CHUNK, choices: [], usage: USAGE },
  ],
};
function currentSchema(v: any): any {
  if (Array.isArray(v)) return v.map(currentSchema);
  if (!v || typeof v !== "object") return v;
  const out: any = Object.fromEntries(Object.entries(v).filter(([k, x]) => !((k === "user" || k === "usage") && x === null)).map(([k, x]) => [k, currentSchema(x)]));
  if (out.type === "output_text" && out.logprobs === undefined) out.logprobs = [];
  if (out.input_tokens_details && out.input_tokens_details.cache_write_tokens === undefined) out.input_tokens_details.cache_write_tokens = 0;
  return out;
}
const fixture = (name: string) => readFileSync(new URL(`../fixtures/responses/${name}`, import.meta.url), "utf8");
const RESPONSES_REPLY = {
  json: currentSchema(JSON.parse(fixture("text.response.json"))),
  stream: fixture("text.stream.jsonl").split("\n").filter(Boolean).map((l) => currentSchema(JSON.parse(l))),
};
const openaiReply = (lane: Lane, path: string) => (lane === "sub" || (lane === "openai" && path === "/v1/responses") ? RESPONSES_REPLY : CHAT_REPLY);
function recorded(lane: Lane, path: string) {
  if (lane === "openai" || lane === "mistral" || lane === "sub") w.openai.enqueue(openaiReply(lane, path));
}

const queued = new Set<Lane>();
async function post(lane: Lane, path: string, body: Record<string, unknown>) {
  if (!queued.delete(lane)) recorded(lane, path);
  const res = await w.gw.req(path, { token: keys[lane]!, body: { model: MODEL[lane], ...body } });
  return { status: res.status, type: res.headers.get("content-type") ?? "", text: await res.text() };
}

/** Makes the next upstream call of this lane fail (the upstream answers 500). */
function failNext(lane: Lane) {
  queued.add(lane);
  if (lane === "anthropic") w.anthropic.enqueue({ status: 500 });
  else if (lane === "google") w.gemini.enqueue({ status: 500 });
  else if (lane === "bridge") bridge.setFail(500);
  else w.openai.enqueue({ status: 500 });
}

/** Makes the next upstream stream of this lane break after its first event. */
function cutNext(lane: Lane, path: string): boolean {
  const cut = { breakAfter: 3, eventDelayMs: 20 };
  if (lane === "anthropic") w.anthropic.enqueue({ stream: "text.stream.jsonl", ...cut, breakAfter: 4 });
  else if (lane === "google") w.gemini.enqueue({ stream: "text.stream.jsonl", ...cut, breakAfter: 2 });
  else if (lane === "bridge") return false; // the mock bridge cannot cut a stream
  else w.openai.enqueue({ ...openaiReply(lane, path), ...cut });
  return true;
}

const dataOf = (text: string) => parseSse(text).filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data));

describe("CONTRACT §8 / SPEC: what the gateway sends validates against OpenAI's OpenAPI", () => {
  for (const lane of LANES) {
    test(`CONTRACT §8 / SPEC: ${lane} lane: chat completion body and stream chunks validate against OpenAI's OpenAPI`, async () => {
      const r = await post(lane, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
      expect(r.status).toBe(200);
      expectValid("CreateChatCompletionResponse", JSON.parse(r.text), `${lane} chat body`);
      const s = await post(lane, "/v1/chat/completions", { stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hi" }] });
      expect(s.status).toBe(200);
      const chunks = dataOf(s.text);
      expect(chunks.length).toBeGreaterThan(1);
      chunks.forEach((c, i) => expectValid("CreateChatCompletionStreamResponse", c, `${lane} chat chunk ${i}`));
    });

    test(`CONTRACT §8 / SPEC: ${lane} lane: Responses body and every stream event validate against OpenAI's OpenAPI`, async () => {
      const r = await post(lane, "/v1/responses", { input: "hi" });
      expect(r.status).toBe(200);
      expectValid("Response", JSON.parse(r.text), `${lane} response body`);
      const s = await post(lane, "/v1/responses", { input: "hi", stream: true });
      expect(s.status).toBe(200);
      const events = dataOf(s.text);
      expect(events.at(-1)!.type).toBe("response.completed");
      events.forEach((e, i) => expectValidEvent(e, `${lane} responses event ${i} (${e.type})`));
    });

    test(`CONTRACT §8 / SPEC: ${lane} lane: upstream failure errors validate against OpenAI's OpenAPI`, async () => {
      failNext(lane);
      try {
        const r = await post(lane, "/v1/chat/completions", { messages: [{ role: "user", content: "hi" }] });
        expect(r.status).toBeGreaterThanOrEqual(400);
        expectValid("ErrorResponse", JSON.parse(r.text), `${lane} chat error`);
      } finally {
        if (lane === "bridge") bridge.setFail(null);
      }
    });

    test(`CONTRACT §8 / SPEC: ${lane} lane: a stream cut mid-way ends in an error chunk / error event that validates against OpenAI's OpenAPI`, async () => {
      if (!cutNext(lane, "/v1/chat/completions")) return;
      queued.add(lane);
      const s = await post(lane, "/v1/chat/completions", { stream: true, messages: [{ role: "user", content: "hi" }] });
      expect(s.status).toBe(200);
      const chunks = dataOf(s.text);
      const last = chunks.at(-1)!;
      expect(last.error).toBeDefined();
      chunks.slice(0, -1).forEach((c, i) => expectValid("CreateChatCompletionStreamResponse", c, `${lane} cut chunk ${i}`));
      expectValid("ErrorResponse", last, `${lane} chat stream error chunk`);
      cutNext(lane, "/v1/responses");
      queued.add(lane);
      const e = await post(lane, "/v1/responses", { input: "hi", stream: true });
      expect(e.status).toBe(200);
      const events = dataOf(e.text);
      expect(["error", "response.failed"]).toContain(events.at(-1)!.type);
      events.forEach((ev, i) => expectValidEvent(ev, `${lane} cut responses event ${i} (${ev.type})`));
    });
  }

  test("CONTRACT §8 / SPEC: gateway errors (bad key, unknown model) and the models list validate against OpenAI's OpenAPI", async () => {
    const bad = await w.gw.call("/v1/chat/completions", { token: "sk-not-a-key", body: { model: "x", messages: [] } });
    expect(bad.status).toBe(401);
    expectValid("ErrorResponse", bad.body, "invalid key error");
    const list = await w.gw.call("/v1/models", { token: keys.openai });
    expect(list.status).toBe(200);
    expectValid("ListModelsResponse", list.body, "models list");
    const one = await w.gw.call(`/v1/models/${encodeURIComponent(list.body.data[0].id)}`, { token: keys.openai });
    expect(one.status).toBe(200);
    expectValid("Model", one.body, "model object");
    const missing = await w.gw.call("/v1/models/no-such-model", { token: keys.openai });
    expect(missing.status).toBe(404);
    expectValid("ErrorResponse", missing.body, "model_not_found error");
  });

  test("CONTRACT §8 / SPEC: the validator refuses what OpenAI's OpenAPI refuses (an error without param/code)", () => {
    expect(() => expectValid("ErrorResponse", { error: { message: "m", type: "t" } }, "flat")).toThrow(/param|code/);
    expect(() => expectValid("CreateChatCompletionResponse", { id: "x", object: "chat.completion" }, "bare")).toThrow();
  });
});
