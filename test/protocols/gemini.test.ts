import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { geminiCodec, SKIP_THOUGHT_SIGNATURE } from "../../src/protocols/gemini/index.ts";
import { UpstreamStreamError, type ChatRequest } from "../../src/protocols/types.ts";
import { fixtureEvents, fixtureJson } from "../fixtures/index.ts";
import { decodeAll, fold, OPTS } from "./helpers.ts";

const encode = (req: Partial<ChatRequest>, model = "gemini-2.5-flash") =>
  geminiCodec.encodeRequest({ model: "x", messages: [{ role: "user", content: "hi" }], ...req } as ChatRequest, { model, stream: false });

function rejects(req: Partial<ChatRequest>, code: string, mention: RegExp) {
  try {
    encode(req);
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    expect((e as GatewayError).status).toBe(400);
    expect((e as GatewayError).code).toBe(code);
    expect((e as GatewayError).message).toMatch(mention);
    return;
  }
  throw new Error("expected a 400");
}

const weatherTool = {
  type: "function",
  function: {
    name: "get_weather",
    description: "Weather now",
    parameters: { type: "object", additionalProperties: false, $schema: "http://json-schema.org/draft-07/schema#", properties: { location: { type: "string" }, unit: { type: ["string", "null"], enum: ["c", "f"] } }, required: ["location"] },
  },
};

describe("Gemini request encoding", () => {
  test("contents/parts with roles user and model; system messages become systemInstruction", () => {
    const body = encode({ messages: [
      { role: "system", content: "Be brief." },
      { role: "user", content: "hi" },
      { role: "assistant", content: "hello" },
      { role: "user", content: [{ type: "text", text: "again" }] },
    ] });
    expect(body.systemInstruction).toEqual({ parts: [{ text: "Be brief." }] });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "hi" }] },
      { role: "model", parts: [{ text: "hello" }] },
      { role: "user", parts: [{ text: "again" }] },
    ]);
    expect(body.model).toBeUndefined();
  });

  test("generationConfig carries temperature, topP, maxOutputTokens, stopSequences, candidateCount and seed", () => {
    const body = encode({ temperature: 1.4, top_p: 0.9, max_completion_tokens: 300, stop: ["END"], n: 2, seed: 42 });
    expect(body.generationConfig).toEqual({ temperature: 1.4, topP: 0.9, maxOutputTokens: 300, stopSequences: ["END"], candidateCount: 2, seed: 42 });
    expect(encode({}).generationConfig).toBeUndefined();
  });

  test("response_format json_schema → responseMimeType + responseSchema in Gemini's schema subset", () => {
    const body = encode({ response_format: { type: "json_schema", json_schema: { name: "w", strict: true, schema: { type: "object", additionalProperties: false, properties: { city: { type: "string" }, temp: { type: ["number", "null"] } }, required: ["city", "temp"] } } } });
    expect(body.generationConfig).toEqual({
      responseMimeType: "application/json",
      responseSchema: { type: "object", properties: { city: { type: "string" }, temp: { type: "number", nullable: true } }, required: ["city", "temp"] },
    });
    expect(encode({ response_format: { type: "json_object" } }).generationConfig).toEqual({ responseMimeType: "application/json" });
    rejects({ response_format: { type: "json_schema", json_schema: { name: "x", schema: { $ref: "#/$defs/a", $defs: { a: { type: "string" } } } } } }, "unsupported_feature", /\$ref|\$defs/);
  });

  test("tools become functionDeclarations and tool_choice becomes toolConfig.functionCallingConfig", () => {
    const body = encode({ tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_weather" } } });
    expect(body.tools).toEqual([{ functionDeclarations: [{ name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { location: { type: "string" }, unit: { type: "string", nullable: true, enum: ["c", "f"] } }, required: ["location"] } }] }]);
    expect(body.toolConfig).toEqual({ functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["get_weather"] } });
    expect(encode({ tools: [weatherTool], tool_choice: "required" }).toolConfig).toEqual({ functionCallingConfig: { mode: "ANY" } });
    expect(encode({ tools: [weatherTool], tool_choice: "none" }).toolConfig).toEqual({ functionCallingConfig: { mode: "NONE" } });
    expect(encode({ tools: [weatherTool], tool_choice: "auto" }).toolConfig).toEqual({ functionCallingConfig: { mode: "AUTO" } });
  });

  test("assistant tool calls become functionCall parts and tool results functionResponse parts named after the call", () => {
    const body = encode({ messages: [
      { role: "user", content: "weather?" },
      { role: "assistant", content: null, tool_calls: [
        { id: "call_a", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Paris\"}" } },
        { id: "call_b", type: "function", function: { name: "get_time", arguments: "{}" } },
      ] },
      { role: "tool", tool_call_id: "call_a", content: "{\"temp\":18}" },
      { role: "tool", tool_call_id: "call_b", content: "noon" },
    ] });
    expect(body.contents).toEqual([
      { role: "user", parts: [{ text: "weather?" }] },
      { role: "model", parts: [{ functionCall: { name: "get_weather", args: { location: "Paris" } } }, { functionCall: { name: "get_time", args: {} } }] },
      { role: "user", parts: [{ functionResponse: { name: "get_weather", response: { temp: 18 } } }, { functionResponse: { name: "get_time", response: { output: "noon" } } }] },
    ]);
    rejects({ messages: [{ role: "user", content: "x" }, { role: "tool", tool_call_id: "nope", content: "1" }] }, "bad_request", /nope/);
  });

  test("Gemini 3 function-call history carries the validator-skip thought signature on the first call of a turn", () => {
    const body = encode({ messages: [
      { role: "user", content: "x" },
      { role: "assistant", tool_calls: [{ id: "c1", type: "function", function: { name: "f", arguments: "{}" } }, { id: "c2", type: "function", function: { name: "g", arguments: "{}" } }] },
      { role: "tool", tool_call_id: "c1", content: "1" },
      { role: "tool", tool_call_id: "c2", content: "2" },
    ] }, "gemini-3-pro-preview");
    expect(body.contents[1].parts[0].thoughtSignature).toBe(SKIP_THOUGHT_SIGNATURE);
    expect(body.contents[1].parts[1].thoughtSignature).toBeUndefined();
  });

  test("images: data URLs become inlineData, http URLs fileData", () => {
    const body = encode({ messages: [{ role: "user", content: [
      { type: "image_url", image_url: { url: "data:image/webp;base64,UklGRg==" } },
      { type: "image_url", image_url: { url: "https://example.com/a/cat.png?x=1" } },
    ] }] });
    expect(body.contents[0].parts).toEqual([
      { inlineData: { mimeType: "image/webp", data: "UklGRg==" } },
      { fileData: { mimeType: "image/png", fileUri: "https://example.com/a/cat.png?x=1" } },
    ]);
  });

  test("reasoning_effort maps to a thinking budget; parameters Gemini cannot express are 400 unsupported_feature", () => {
    expect(encode({ reasoning_effort: "low" }).generationConfig.thinkingConfig).toEqual({ thinkingBudget: 1024 });
    rejects({ logprobs: true }, "unsupported_feature", /logprobs/);
    rejects({ logit_bias: { "1": 2 } }, "unsupported_feature", /logit_bias/);
    rejects({ tools: [weatherTool], parallel_tool_calls: false }, "unsupported_feature", /parallel_tool_calls/);
    rejects({ stop: ["a", "b", "c", "d", "e", "f"] }, "unsupported_feature", /stop sequences/);
  });
});

describe("Gemini response decoding", () => {
  test("text answer with usage: prompt includes cached, completion includes thoughts", () => {
    const { completion, usage } = geminiCodec.decodeResponse(fixtureJson("gemini", "text.response.json"), { model: "m" });
    expect(completion.choices[0]).toMatchObject({ index: 0, message: { role: "assistant", content: "Hello! Ça va? 晴れ ☀️" }, finish_reason: "stop" });
    expect(completion.model).toBe("gemini-2.5-flash");
    expect(usage).toEqual({ prompt_tokens: 11, completion_tokens: 9 + 24, cached_tokens: 4, cache_write_tokens: 0, reasoning_tokens: 24 });
  });

  test("functionCall parts become tool_calls with finish_reason tool_calls", () => {
    const { completion } = geminiCodec.decodeResponse(fixtureJson("gemini", "function-call.response.json"), { model: "m" });
    const msg = completion.choices[0].message;
    expect(msg.content).toBeNull();
    expect(msg.tool_calls.map((t: any) => [t.function.name, JSON.parse(t.function.arguments)])).toEqual([
      ["get_weather", { location: "San Francisco, CA", unit: "celsius" }],
      ["get_weather", { location: "Paris, France", unit: "celsius" }],
    ]);
    expect(new Set(msg.tool_calls.map((t: any) => t.id)).size).toBe(2);
    expect(completion.choices[0].finish_reason).toBe("tool_calls");
  });

  test("finish reasons: MAX_TOKENS → length, SAFETY → content_filter, a blocked prompt → content_filter", () => {
    expect(geminiCodec.decodeResponse(fixtureJson("gemini", "max-tokens.response.json"), { model: "m" }).completion.choices[0].finish_reason).toBe("length");
    expect(geminiCodec.decodeResponse(fixtureJson("gemini", "safety.response.json"), { model: "m" }).completion.choices[0].finish_reason).toBe("content_filter");
    const blocked = geminiCodec.decodeResponse(fixtureJson("gemini", "prompt-blocked.response.json"), { model: "m" });
    expect(blocked.completion.choices[0]).toMatchObject({ message: { content: null }, finish_reason: "content_filter" });
    expect(blocked.usage?.prompt_tokens).toBe(9);
  });
});

describe("Gemini stream decoding", () => {
  test("streamed candidates become chunks; the last usageMetadata wins", () => {
    const dec = geminiCodec.streamDecoder(OPTS);
    const f = fold(decodeAll(dec, fixtureEvents("gemini", "text.stream.jsonl")));
    expect(f).toMatchObject({ role: "assistant", content: "Hello — ça va? 晴れ ☀️🎉", finishReason: "stop" });
    expect(dec.usage()).toEqual({ prompt_tokens: 11, completion_tokens: 21, cached_tokens: 2, cache_write_tokens: 0, reasoning_tokens: 12 });
  });

  test("two function calls in one event become two tool calls with their full arguments", () => {
    const f = fold(decodeAll(geminiCodec.streamDecoder(OPTS), fixtureEvents("gemini", "function-call.stream.jsonl")));
    expect(f.content).toBe("Checking both cities.");
    expect(f.toolCalls.map((t) => [t.name, JSON.parse(t.arguments)])).toEqual([["get_weather", { location: "San Francisco, CA" }], ["get_time", { timezone: "Asia/Tokyo" }]]);
    expect(f.toolCalls.every((t) => t.id.startsWith("call_"))).toBe(true);
    expect(f.finishReason).toBe("tool_calls");
  });

  test("an error event mid-stream throws a retryable UpstreamStreamError", () => {
    const dec = geminiCodec.streamDecoder(OPTS);
    const events = fixtureEvents("gemini", "error-mid-stream.stream.jsonl");
    expect(fold(dec.push(events[0]!)).content).toBe("Partial ans");
    expect(() => dec.push(events[1]!)).toThrow(UpstreamStreamError);
    try { dec.push(events[1]!); } catch (e) { expect((e as UpstreamStreamError).retryable).toBe(true); }
  });

  test("usage missing: usage() is null", () => {
    const dec = geminiCodec.streamDecoder(OPTS);
    expect(fold(decodeAll(dec, fixtureEvents("gemini", "no-usage.stream.jsonl"))).content).toBe("No usage here.");
    expect(dec.usage()).toBeNull();
  });

  test("a stream that ends with no finishReason was cut off and throws", () => {
    const dec = geminiCodec.streamDecoder(OPTS);
    for (const ev of fixtureEvents("gemini", "truncated.stream.jsonl")) dec.push(ev);
    expect(() => dec.end()).toThrow(UpstreamStreamError);
  });

  test("several candidates (n > 1) stream as separate choices", () => {
    const dec = geminiCodec.streamDecoder(OPTS);
    const chunks = decodeAll(dec, [
      { data: JSON.stringify({ candidates: [{ index: 0, content: { role: "model", parts: [{ text: "A" }] } }, { index: 1, content: { role: "model", parts: [{ text: "B" }] } }] }) },
      { data: JSON.stringify({ candidates: [{ index: 0, content: { role: "model", parts: [{ text: "a" }] }, finishReason: "STOP" }, { index: 1, content: { role: "model", parts: [{ text: "b" }] }, finishReason: "MAX_TOKENS" }] }) },
    ]);
    expect(fold(chunks, 0)).toMatchObject({ content: "Aa", finishReason: "stop" });
    expect(fold(chunks, 1)).toMatchObject({ content: "Bb", finishReason: "length" });
  });
});

describe("Gemini errors", () => {
  const of = (status: number, name: string) => geminiCodec.errorOf(status, JSON.stringify(fixtureJson("gemini", name)));
  test("RESOURCE_EXHAUSTED 429 and UNAVAILABLE 503 move to the next lane", () => {
    expect(of(429, "resource-exhausted.error.json")).toMatchObject({ retryable: true, code: "RESOURCE_EXHAUSTED" });
    expect(of(503, "unavailable.error.json").retryable).toBe(true);
  });
  test("INVALID_ARGUMENT 400 goes back to the client, except an invalid API key (this lane's problem)", () => {
    expect(of(400, "invalid-argument.error.json").retryable).toBe(false);
    expect(of(400, "api-key-invalid.error.json").retryable).toBe(true);
  });
  test("an unknown model is modelNotFound", () => {
    expect(of(404, "model-not-found.error.json").modelNotFound).toBe(true);
  });
});
