// The vendor mocks must refuse what the vendors refuse, or the end-to-end tests prove nothing.
// Each rule is sent straight to the mock; then requests the codecs encode are sent straight to
// it too and must be accepted.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { anthropicCodec } from "../../src/protocols/anthropic/index.ts";
import { geminiCodec } from "../../src/protocols/gemini/index.ts";
import type { ChatRequest } from "../../src/protocols/types.ts";
import { ANTHROPIC_VERSION } from "../../src/providers/anthropic/adapter.ts";
import { startMockAnthropic, type MockAnthropic } from "../mocks/anthropic-upstream.ts";
import { startMockGemini, type MockGemini } from "../mocks/gemini-upstream.ts";
import { parseSse } from "../protocols/helpers.ts";

let anthropic: MockAnthropic;
let gemini: MockGemini;
beforeAll(async () => {
  anthropic = await startMockAnthropic();
  gemini = await startMockGemini();
}, 60_000);
afterAll(async () => {
  await anthropic.stop();
  await gemini.stop();
}, 60_000);

const okMessages = { model: "claude-sonnet-4-5", max_tokens: 64, messages: [{ role: "user", content: "hi" }] };
async function toAnthropic(body: unknown, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  const r = await fetch(`${anthropic.url}/v1/messages`, {
    method: "POST",
    headers: { "content-type": "application/json", "x-api-key": anthropic.apiKey, "anthropic-version": ANTHROPIC_VERSION, ...headers },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: (r.headers.get("content-type") ?? "").includes("json") ? await r.json() : await r.text() };
}

const weatherTool = { type: "function", function: { name: "get_weather", parameters: { type: "object", additionalProperties: false, properties: { location: { type: "string" } }, required: ["location"] } } };
const toolRound: ChatRequest = {
  model: "x",
  messages: [
    { role: "system", content: "You are a weather bot." },
    { role: "user", content: "Weather in Paris and Tokyo?" },
    { role: "assistant", content: "Checking.", tool_calls: [
      { id: "toolu_a1", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Paris\"}" } },
      { id: "toolu_b2", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Tokyo\"}" } },
    ] },
    { role: "tool", tool_call_id: "toolu_a1", content: "18C" },
    { role: "tool", tool_call_id: "toolu_b2", content: "{\"temp\": 25}" },
    { role: "user", content: [{ type: "text", text: "Which is warmer?" }, { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } }] },
  ],
  tools: [weatherTool],
  tool_choice: "auto",
  temperature: 0.2,
  stop: ["END"],
  max_tokens: 300,
};

describe("Anthropic mock refuses what Anthropic refuses (vendor error shape)", () => {
  test("missing or wrong x-api-key → 401 authentication_error; missing anthropic-version → 400", async () => {
    const wrong = await toAnthropic(okMessages, { "x-api-key": "sk-ant-wrong" });
    expect(wrong.status).toBe(401);
    expect(wrong.body).toMatchObject({ type: "error", error: { type: "authentication_error" } });
    const r = await fetch(`${anthropic.url}/v1/messages`, { method: "POST", headers: { "content-type": "application/json", "x-api-key": anthropic.apiKey }, body: JSON.stringify(okMessages) });
    expect(r.status).toBe(400);
    expect(((await r.json()) as any).error.message).toContain("anthropic-version");
  });

  test("max_tokens is required", async () => {
    const r = await toAnthropic({ ...okMessages, max_tokens: undefined });
    expect(r.status).toBe(400);
    expect(r.body.error).toMatchObject({ type: "invalid_request_error", message: expect.stringContaining("max_tokens") });
  });

  test("unknown fields, temperature above 1 and a system role in messages are refused", async () => {
    expect((await toAnthropic({ ...okMessages, n: 1 })).body.error.message).toContain("n: Extra inputs are not permitted");
    expect((await toAnthropic({ ...okMessages, temperature: 1.2 })).status).toBe(400);
    expect((await toAnthropic({ ...okMessages, messages: [{ role: "system", content: "x" }, { role: "user", content: "hi" }] })).status).toBe(400);
  });

  test("the first turn must be user and turns must alternate", async () => {
    expect((await toAnthropic({ ...okMessages, messages: [{ role: "assistant", content: "hi" }] })).body.error.message).toContain("first message");
    expect((await toAnthropic({ ...okMessages, messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }] })).body.error.message).toContain("alternate");
  });

  test("tool_use must be answered by tool_result blocks first in the next user turn", async () => {
    const use = { role: "assistant", content: [{ type: "tool_use", id: "toolu_1", name: "f", input: {} }] };
    const missing = await toAnthropic({ ...okMessages, messages: [{ role: "user", content: "x" }, use, { role: "user", content: "no result" }] });
    expect(missing.body.error.message).toContain("without `tool_result`");
    const late = await toAnthropic({ ...okMessages, messages: [{ role: "user", content: "x" }, use, { role: "user", content: [{ type: "text", text: "t" }, { type: "tool_result", tool_use_id: "toolu_1", content: "r" }] }] });
    expect(late.body.error.message).toContain("must come first");
    const stray = await toAnthropic({ ...okMessages, messages: [{ role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_9", content: "r" }] }] });
    expect(stray.body.error.message).toContain("unexpected `tool_use_id`");
  });

  test("empty text blocks are refused", async () => {
    expect((await toAnthropic({ ...okMessages, messages: [{ role: "user", content: [{ type: "text", text: "" }] }] })).body.error.message).toContain("non-empty");
  });

  test("what the anthropic codec encodes (system, tools, tool round trip, image, stop, stream) is accepted", async () => {
    const body = anthropicCodec.encodeRequest(toolRound, { model: "claude-sonnet-4-5", stream: false });
    const r = await toAnthropic(body);
    expect(r.status).toBe(200);
    expect(r.body.type).toBe("message");
    const s = await fetch(`${anthropic.url}/v1/messages`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-api-key": anthropic.apiKey, "anthropic-version": ANTHROPIC_VERSION },
      body: JSON.stringify(anthropicCodec.encodeRequest(toolRound, { model: "claude-sonnet-4-5", stream: true })),
    });
    expect(s.status).toBe(200);
    const events = parseSse(await s.text());
    expect(events[0]!.event).toBe("message_start");
    expect(events.at(-1)!.event).toBe("message_stop");
  });
});

async function toGemini(body: unknown, opts: { key?: string | null; method?: string; model?: string } = {}): Promise<{ status: number; body: any }> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  const key = opts.key === undefined ? gemini.apiKey : opts.key;
  if (key !== null) headers["x-goog-api-key"] = key;
  const r = await fetch(`${gemini.url}/models/${opts.model ?? "gemini-2.5-flash"}:${opts.method ?? "generateContent"}`, { method: "POST", headers, body: JSON.stringify(body) });
  return { status: r.status, body: (r.headers.get("content-type") ?? "").includes("json") ? await r.json() : await r.text() };
}
const okContents = { contents: [{ role: "user", parts: [{ text: "hi" }] }] };

describe("Gemini mock refuses what Google refuses (vendor error shape)", () => {
  test("no key → 403 PERMISSION_DENIED; a wrong key → 400 API_KEY_INVALID", async () => {
    expect(await toGemini(okContents, { key: null })).toMatchObject({ status: 403, body: { error: { status: "PERMISSION_DENIED" } } });
    const wrong = await toGemini(okContents, { key: "AIza-wrong" });
    expect(wrong).toMatchObject({ status: 400, body: { error: { status: "INVALID_ARGUMENT" } } });
    expect(wrong.body.error.details[0].reason).toBe("API_KEY_INVALID");
  });

  test("contents are required; unknown fields are refused by name", async () => {
    expect((await toGemini({})).body.error.message).toContain("contents is not specified");
    expect((await toGemini({ ...okContents, model: "gemini" })).body.error.message).toContain('Unknown name "model"');
    expect((await toGemini({ ...okContents, generationConfig: { max_tokens: 5 } })).body.error.message).toContain('Unknown name "max_tokens"');
  });

  test("JSON Schema keywords outside Gemini's subset are refused (additionalProperties)", async () => {
    const r = await toGemini({ ...okContents, tools: [{ functionDeclarations: [{ name: "f", parameters: { type: "object", additionalProperties: false, properties: { a: { type: "string" } } } }] }] });
    expect(r.status).toBe(400);
    expect(r.body.error.message).toContain('Unknown name "additionalProperties"');
  });

  test("function responses must match the calls of the turn before", async () => {
    const r = await toGemini({ contents: [
      { role: "user", parts: [{ text: "x" }] },
      { role: "model", parts: [{ functionCall: { name: "f", args: {} } }, { functionCall: { name: "g", args: {} } }] },
      { role: "user", parts: [{ functionResponse: { name: "f", response: { ok: 1 } } }] },
    ] });
    expect(r.body.error.message).toContain("number of function response parts");
  });

  test("what the gemini codec encodes (system, tools, tool round trip, image, stop, stream) is accepted", async () => {
    const r = await toGemini(geminiCodec.encodeRequest(toolRound, { model: "gemini-2.5-flash", stream: false }));
    expect(r.status).toBe(200);
    expect(r.body.candidates[0].content.role).toBe("model");
    const s = await toGemini(geminiCodec.encodeRequest(toolRound, { model: "gemini-3-pro-preview", stream: true }), { method: "streamGenerateContent?alt=sse", model: "gemini-3-pro-preview" });
    expect(s.status).toBe(200);
    expect(s.body).toContain("\r\n\r\n");
    expect(parseSse(s.body).at(-1)!.data).toContain("STOP");
  });
});
