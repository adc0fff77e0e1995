// The Gemini client codec on its own (a /v1beta client on a lane of another protocol, CONTRACT §9):
// generateContent request → chat pivot, chat answer → GenerateContentResponse, chat chunks → the
// streamGenerateContent events, the JSON-array framing, and the pass-through pieces. Pure.
import { describe, expect, test } from "bun:test";
import { geminiClientCodec, geminiCodec, geminiCountBody, geminiPassThroughBody, sseToJsonArray } from "../../src/protocols/gemini/index.ts";
import { fromGeminiSchema } from "../../src/protocols/gemini/json-schema.ts";
import { errorBody, GatewayError } from "../../src/errors.ts";
import { parseSse } from "./helpers.ts";

const { toPivot, fromPivot, streamEncoder } = geminiClientCodec;
const base = { model: "gemini-2.5-pro", stream: false };

function unsupportedOf(fn: () => unknown): GatewayError {
  try {
    fn();
  } catch (e) {
    if (e instanceof GatewayError) return e;
    throw e;
  }
  throw new Error("expected a GatewayError");
}

describe("CONTRACT §9: Gemini request → chat pivot", () => {
  test("CONTRACT §9: systemInstruction, roles, inline data, function calls and their responses (by id, else by name)", () => {
    const p = toPivot({
      ...base,
      systemInstruction: { role: "user", parts: [{ text: "You are terse." }, { text: "Answer in English." }] },
      contents: [
        { role: "user", parts: [{ text: "look" }, { inlineData: { mimeType: "image/png", data: "iVBOR" } }, { inlineData: { mimeType: "application/pdf", data: "JVBER" } }] },
        { role: "model", parts: [{ text: "thinking hard", thought: true }, { text: "calling" }, { functionCall: { id: "c1", name: "read_file", args: { path: "a.ts" } }, thoughtSignature: "sig" }, { functionCall: { name: "ls", args: {} } }] },
        { role: "user", parts: [{ functionResponse: { name: "ls", response: { output: "a.ts b.ts" } } }, { functionResponse: { id: "c1", name: "read_file", response: { content: "x", lines: 1 } } }, { text: "and?" }] },
      ],
    });
    expect(p.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "You are terse." }, { type: "text", text: "Answer in English." }] },
      { role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:image/png;base64,iVBOR" } }, { type: "file", file: { file_data: "data:application/pdf;base64,JVBER" } }] },
      {
        role: "assistant", content: "calling",
        tool_calls: [
          { id: "c1", type: "function", function: { name: "read_file", arguments: '{"path":"a.ts"}' } },
          { id: expect.stringMatching(/^call_/), type: "function", function: { name: "ls", arguments: "{}" } },
        ],
      },
      { role: "tool", tool_call_id: expect.stringMatching(/^call_/), content: "a.ts b.ts" },
      { role: "tool", tool_call_id: "c1", content: '{"content":"x","lines":1}' },
      { role: "user", content: [{ type: "text", text: "and?" }] },
    ]);
    // The made-up id of the call without one is the one its response answers.
    expect(p.messages[3]!.tool_call_id).toBe(p.messages[2]!.tool_calls[1].id);
  });

  test("CONTRACT §9: generationConfig maps to chat fields; topK, thinkingConfig and safetySettings stay with Google", () => {
    const p = toPivot({
      ...base,
      stream: true,
      contents: [{ role: "user", parts: [{ text: "hi" }] }],
      safetySettings: [{ category: "HARM_CATEGORY_HARASSMENT", threshold: "BLOCK_NONE" }],
      generationConfig: {
        maxOutputTokens: 512, temperature: 0.2, topP: 0.9, topK: 64, stopSequences: ["END"], seed: 7,
        responseMimeType: "application/json", responseSchema: { type: "OBJECT", properties: { n: { type: "INTEGER", nullable: true } }, required: ["n"], propertyOrdering: ["n"] },
        thinkingConfig: { includeThoughts: true, thinkingBudget: 8192 },
      },
    });
    expect(p).toMatchObject({ model: "gemini-2.5-pro", stream: true, stream_options: { include_usage: true }, max_tokens: 512, temperature: 0.2, top_p: 0.9, stop: ["END"], seed: 7 });
    expect(p.response_format).toEqual({ type: "json_schema", json_schema: { name: "response", schema: { type: "object", properties: { n: { type: ["integer", "null"] } }, required: ["n"] } } });
    expect(p.top_k).toBeUndefined();
    expect(p.reasoning_effort).toBeUndefined();
    expect(p.safetySettings).toBeUndefined();
  });

  test("CONTRACT §9: functionDeclarations (parameters or parametersJsonSchema) and functionCallingConfig → chat tools and tool_choice", () => {
    const p = toPivot({
      ...base,
      contents: [{ role: "user", parts: [{ text: "go" }] }],
      tools: [{ functionDeclarations: [
        { name: "read_file", description: "Reads a file", parametersJsonSchema: { type: "object", properties: { path: { type: "string" } }, required: ["path"], additionalProperties: false } },
        { name: "glob", parameters: { type: "OBJECT", properties: { pattern: { type: "STRING", description: "glob" } } } },
        { name: "now" },
      ] }],
      toolConfig: { functionCallingConfig: { mode: "ANY", allowedFunctionNames: ["glob"] } },
    });
    expect(p.tools).toEqual([
      { type: "function", function: { name: "read_file", description: "Reads a file", parameters: { type: "object", properties: { path: { type: "string" } }, required: ["path"], additionalProperties: false } } },
      { type: "function", function: { name: "glob", parameters: { type: "object", properties: { pattern: { type: "string", description: "glob" } } } } },
      { type: "function", function: { name: "now", parameters: { type: "object", properties: {} } } },
    ]);
    expect(p.tool_choice).toEqual({ type: "function", function: { name: "glob" } });
    expect(toPivot({ ...base, contents: [{ parts: [{ text: "x" }] }], tools: [{ functionDeclarations: [{ name: "f" }] }], toolConfig: { functionCallingConfig: { mode: "NONE" } } }).tool_choice).toBe("none");
  });

  test("CONTRACT §9: what only Google can serve is unsupported_feature (the lane fails over); malformed input is a 400", () => {
    const contents = [{ role: "user", parts: [{ text: "x" }] }];
    expect(unsupportedOf(() => toPivot({ ...base, contents, tools: [{ googleSearch: {} }] })).code).toBe("unsupported_feature");
    expect(unsupportedOf(() => toPivot({ ...base, contents, cachedContent: "cachedContents/abc" })).code).toBe("unsupported_feature");
    expect(unsupportedOf(() => toPivot({ ...base, contents: [{ role: "user", parts: [{ executableCode: { code: "1" } }] }] })).code).toBe("unsupported_feature");
    expect(unsupportedOf(() => toPivot({ ...base, contents, generationConfig: { responseModalities: ["IMAGE"] } })).code).toBe("unsupported_feature");
    const orphan = unsupportedOf(() => toPivot({ ...base, contents: [{ role: "user", parts: [{ functionResponse: { name: "f", response: {} } }] }] }));
    expect([orphan.status, orphan.code]).toEqual([400, "bad_request"]);
    expect(unsupportedOf(() => toPivot({ ...base, contents: [{ role: "system", parts: [{ text: "x" }] }] })).status).toBe(400);
  });

  test("Gemini Schema → JSON Schema: upper-case types, nullable, anyOf, items", () => {
    expect(fromGeminiSchema({ type: "ARRAY", items: { anyOf: [{ type: "STRING" }, { type: "NUMBER" }], nullable: true }, minItems: 1 })).toEqual({
      type: "array", items: { anyOf: [{ type: "string" }, { type: "number" }, { type: "null" }] }, minItems: 1,
    });
  });
});

const completion = (message: Record<string, unknown>, finish = "stop") => ({
  id: "chatcmpl-1", object: "chat.completion", created: 1, model: "gpt-4o",
  choices: [{ index: 0, message: { role: "assistant", ...message }, finish_reason: finish }],
});

describe("CONTRACT §9: chat answer → GenerateContentResponse", () => {
  test("CONTRACT §9: text, function calls with their ids, usage → usageMetadata (thoughts and cached tokens apart)", () => {
    const out = fromPivot(
      completion({ content: "calling", reasoning_content: "plan", tool_calls: [{ id: "call_9", type: "function", function: { name: "ls", arguments: '{"dir":"."}' } }] }, "tool_calls"),
      { prompt_tokens: 100, completion_tokens: 30, cached_tokens: 40, cache_write_tokens: 0, reasoning_tokens: 10 },
      { model: "gemini-2.5-pro", generationConfig: { thinkingConfig: { includeThoughts: true } } },
    );
    expect(out.candidates).toEqual([{
      content: { role: "model", parts: [{ text: "plan", thought: true }, { text: "calling" }, { functionCall: { id: "call_9", name: "ls", args: { dir: "." } } }] },
      finishReason: "STOP", index: 0,
    }]);
    expect(out.usageMetadata).toEqual({ promptTokenCount: 100, candidatesTokenCount: 20, totalTokenCount: 130, cachedContentTokenCount: 40, thoughtsTokenCount: 10 });
    expect(out.modelVersion).toBe("gpt-4o");
    expect(typeof out.responseId).toBe("string");
  });

  test("CONTRACT §9: thoughts only when includeThoughts; length → MAX_TOKENS, content_filter → SAFETY", () => {
    const u = { prompt_tokens: 1, completion_tokens: 1, cached_tokens: 0, cache_write_tokens: 0 };
    const out = fromPivot(completion({ content: "cut", reasoning_content: "plan" }, "length"), u, { model: "m" });
    expect(out.candidates[0]).toEqual({ content: { role: "model", parts: [{ text: "cut" }] }, finishReason: "MAX_TOKENS", index: 0 });
    expect(fromPivot(completion({ content: "" }, "content_filter"), u, { model: "m" }).candidates[0].finishReason).toBe("SAFETY");
  });
});

describe("CONTRACT §9: chat chunks → streamGenerateContent events", () => {
  const chunk = (delta: Record<string, unknown>, finish: string | null = null) => ({ id: "c", object: "chat.completion.chunk", created: 1, model: "claude-x", choices: [{ index: 0, delta, finish_reason: finish }] });

  test("CONTRACT §9: text as it comes; a tool call gathered whole at the choice's finish; the last event has finishReason and usageMetadata", () => {
    const enc = streamEncoder({ model: "gemini-2.5-pro", generationConfig: { thinkingConfig: { includeThoughts: true } } });
    let s = enc.push(chunk({ role: "assistant", content: "" }));
    s += enc.push(chunk({ reasoning_content: "hmm" }));
    s += enc.push(chunk({ content: "Hel" }));
    s += enc.push(chunk({ content: "lo" }));
    s += enc.push(chunk({ tool_calls: [{ index: 0, id: "toolu_1", type: "function", function: { name: "ls", arguments: "" } }] }));
    s += enc.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"dir"' } }] }));
    s += enc.push(chunk({ tool_calls: [{ index: 0, function: { arguments: ':"."}' } }] }));
    s += enc.push(chunk({}, "tool_calls"));
    s += enc.end({ prompt_tokens: 10, completion_tokens: 5, cached_tokens: 0, cache_write_tokens: 0 });
    expect(s).toContain("\r\n\r\n");
    const events = parseSse(s).map((e) => JSON.parse(e.data));
    expect(events.map((e) => e.candidates[0].content.parts)).toEqual([
      [{ text: "hmm", thought: true }], [{ text: "Hel" }], [{ text: "lo" }],
      [{ functionCall: { id: "toolu_1", name: "ls", args: { dir: "." } } }],
      [{ text: "" }],
    ]);
    const last = events.at(-1);
    expect(last.candidates[0].finishReason).toBe("STOP");
    expect(last.usageMetadata).toEqual({ promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 });
    expect(last.modelVersion).toBe("claude-x");
    expect(events.every((e) => e.responseId === last.responseId)).toBe(true);
    // Only the last event ends the stream: it is what the pass-through reader takes as terminal too.
    expect(events.map((e) => geminiCodec.isTerminal!(JSON.stringify(e), null))).toEqual([false, false, false, false, true]);
    // A stream that ends without the choice's finish still sends its calls, in the last event.
    const cut = streamEncoder({ model: "m" });
    cut.push(chunk({ tool_calls: [{ index: 0, id: "t", type: "function", function: { name: "f", arguments: "{}" } }] }));
    expect(JSON.parse(parseSse(cut.end(null))[0]!.data).candidates[0]).toEqual({ content: { role: "model", parts: [{ functionCall: { id: "t", name: "f", args: {} } }] }, index: 0, finishReason: "STOP" });
  });

  test("CONTRACT §9: a failure after the first event is Google's error object", () => {
    const enc = streamEncoder({ model: "m" });
    enc.push(chunk({ content: "a" }));
    const ev = parseSse(enc.error("upstream broke", new GatewayError(429, "slow down", { code: "rate_limit_exceeded" })));
    expect(JSON.parse(ev[0]!.data)).toEqual({ error: { code: 429, message: "rate_limit_exceeded: upstream broke", status: "RESOURCE_EXHAUSTED", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "rate_limit_exceeded", domain: "gateway" }] } });
    expect(enc.end(null)).toBe("");
  });
});

describe("CONTRACT §9: pass-through pieces", () => {
  test("CONTRACT §9: the lane's body leaves out the URL's model and stream, and copies generationConfig", () => {
    const gc = { maxOutputTokens: 10 };
    const body = { model: "gemini-2.5-flash", stream: true, contents: [], generationConfig: gc };
    const out = geminiPassThroughBody(body);
    expect(out).toEqual({ contents: [], generationConfig: { maxOutputTokens: 10 } });
    expect(out.generationConfig).not.toBe(gc);
    expect(geminiCountBody({ model: "x", generateContentRequest: { model: "models/other", contents: [] } }, "gemini-2.5-flash")).toEqual({ generateContentRequest: { model: "models/gemini-2.5-flash", contents: [] } });
  });

  test("CONTRACT §9: usage is read off usageMetadata; an event with a finishReason or an error ends the stream", () => {
    expect(geminiCodec.usageKey).toBe("usageMetadata");
    expect(geminiCodec.usageOf({ usageMetadata: { promptTokenCount: 3, candidatesTokenCount: 2, thoughtsTokenCount: 1, totalTokenCount: 6 } })).toEqual({ prompt_tokens: 3, completion_tokens: 3, cached_tokens: 0, cache_write_tokens: 0, reasoning_tokens: 1 });
    expect(geminiCodec.isTerminal!('{"candidates":[{"content":{"parts":[{"text":"a"}]},"index":0}]}', null)).toBe(false);
    expect(geminiCodec.isTerminal!('{"candidates":[{"finishReason":"FINISH_REASON_UNSPECIFIED"}]}', null)).toBe(false);
    expect(geminiCodec.isTerminal!('{"candidates":[{"finishReason": "MAX_TOKENS"}]}', null)).toBe(true);
    expect(geminiCodec.isTerminal!('{"error":{"code":500}}', null)).toBe(true);
  });

  test("CONTRACT §9: without alt=sse the events become one JSON array, element by element, across split chunks", async () => {
    const enc = new TextEncoder();
    const sse = ': keep-alive\n\ndata: {"a":1}\r\n\r\ndata: {"b":"x\\u00e9"}\r\n\r\ndata: {"c":3}\r\n\r\n';
    const bytes = enc.encode(sse);
    const parts = [bytes.subarray(0, 5), bytes.subarray(5, 27), bytes.subarray(27, 28), bytes.subarray(28)];
    const out = await new Response(new ReadableStream({ start(c) { for (const p of parts) c.enqueue(p); c.close(); } }).pipeThrough(sseToJsonArray())).text();
    expect(JSON.parse(out)).toEqual([{ a: 1 }, { b: "xé" }, { c: 3 }]);
    expect(out.startsWith("[")).toBe(true);
    const empty = await new Response(new ReadableStream({ start(c) { c.close(); } }).pipeThrough(sseToJsonArray())).text();
    expect(JSON.parse(empty)).toEqual([]);
  });
});

describe("CONTRACT §9: Google's error shape", () => {
  test("CONTRACT §9: {error: {code, message, status}}; key, budget and rate-limit errors keep their status and say so", () => {
    expect(errorBody(new GatewayError(400, "bad", { code: "bad_request" }), "google")).toEqual({ error: { code: 400, message: "bad", status: "INVALID_ARGUMENT", details: [{ "@type": "type.googleapis.com/google.rpc.ErrorInfo", reason: "bad_request", domain: "gateway" }] } });
    expect(errorBody(new GatewayError(402, "The monthly budget is spent.", { code: "budget_exceeded" }), "google")).toMatchObject({ error: { code: 402, status: "RESOURCE_EXHAUSTED", message: "budget_exceeded: The monthly budget is spent." } });
    expect(errorBody(new GatewayError(401, "unknown key", { code: "invalid_api_key" }), "google")).toMatchObject({ error: { code: 401, status: "UNAUTHENTICATED", message: "invalid_api_key: unknown key" } });
    expect(errorBody(new GatewayError(403, "no"), "google")).toEqual({ error: { code: 403, message: "no", status: "PERMISSION_DENIED" } });
    expect(errorBody(new GatewayError(404, "none"), "google").error).toMatchObject({ status: "NOT_FOUND" });
    expect(errorBody(new GatewayError(503, "down"), "google").error).toMatchObject({ status: "UNAVAILABLE" });
    expect(errorBody(new GatewayError(500, "oops"), "google").error).toMatchObject({ status: "INTERNAL" });
  });
});
