import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { anthropicCodec, DEFAULT_MAX_TOKENS, JSON_TOOL_NAME } from "../../src/protocols/anthropic/index.ts";
import { UpstreamStreamError, type ChatRequest } from "../../src/protocols/types.ts";
import { fixtureEvents, fixtureJson } from "../fixtures/index.ts";
import { decodeAll, fold, OPTS } from "./helpers.ts";

const encode = (req: Partial<ChatRequest>, stream = false) =>
  anthropicCodec.encodeRequest({ model: "m", messages: [{ role: "user", content: "hi" }], ...req } as ChatRequest, { model: "claude-sonnet-4-5", stream });

function rejects(req: Partial<ChatRequest>, code: string, mention: RegExp) {
  try {
    encode(req);
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    const g = e as GatewayError;
    expect(g.status).toBe(400);
    expect(g.code).toBe(code);
    expect(g.message).toMatch(mention);
    return;
  }
  throw new Error("expected a 400");
}

const weatherTool = { type: "function", function: { name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] } } };

describe("Anthropic request encoding", () => {
  test("system and developer messages become the top-level system blocks", () => {
    const body = encode({ messages: [{ role: "system", content: "Be brief." }, { role: "developer", content: [{ type: "text", text: "Use metric." }] }, { role: "user", content: "hi" }] });
    expect(body.system).toEqual([{ type: "text", text: "Be brief." }, { type: "text", text: "Use metric." }]);
    expect(body.messages).toEqual([{ role: "user", content: [{ type: "text", text: "hi" }] }]);
    expect(body.model).toBe("claude-sonnet-4-5");
  });

  test("consecutive same-role turns merge so turns alternate", () => {
    const body = encode({ messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }, { role: "assistant", content: "c" }, { role: "assistant", content: "d" }, { role: "user", content: "e" }] });
    expect(body.messages.map((m: any) => m.role)).toEqual(["user", "assistant", "user"]);
    expect(body.messages[0].content).toEqual([{ type: "text", text: "a" }, { type: "text", text: "b" }]);
    expect(body.messages[1].content).toEqual([{ type: "text", text: "c" }, { type: "text", text: "d" }]);
  });

  test("max_tokens is always sent: 4096 by default, else max_completion_tokens, else max_tokens", () => {
    expect(encode({}).max_tokens).toBe(DEFAULT_MAX_TOKENS);
    expect(DEFAULT_MAX_TOKENS).toBe(4096);
    expect(encode({ max_tokens: 100 }).max_tokens).toBe(100);
    expect(encode({ max_completion_tokens: 200, max_tokens: 100 }).max_tokens).toBe(200);
  });

  test("stop becomes stop_sequences", () => {
    expect(encode({ stop: "END" }).stop_sequences).toEqual(["END"]);
    expect(encode({ stop: ["a", "b"] }).stop_sequences).toEqual(["a", "b"]);
  });

  test("images: data URLs become base64 sources, http URLs become url sources", () => {
    const body = encode({ messages: [{ role: "user", content: [
      { type: "text", text: "what is this" },
      { type: "image_url", image_url: { url: "data:image/png;base64,iVBORw0KGgo=" } },
      { type: "image_url", image_url: { url: "https://example.com/cat.jpg", detail: "high" } },
    ] }] });
    expect(body.messages[0].content).toEqual([
      { type: "text", text: "what is this" },
      { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw0KGgo=" } },
      { type: "image", source: { type: "url", url: "https://example.com/cat.jpg" } },
    ]);
  });

  test("tools become input_schema tools and tool_choice maps to auto / none / any / tool", () => {
    const body = encode({ tools: [weatherTool], tool_choice: "required" });
    expect(body.tools).toEqual([{ name: "get_weather", description: "Weather now", input_schema: weatherTool.function.parameters }]);
    expect(body.tool_choice).toEqual({ type: "any" });
    expect(encode({ tools: [weatherTool], tool_choice: "auto" }).tool_choice).toEqual({ type: "auto" });
    expect(encode({ tools: [weatherTool], tool_choice: "none" }).tool_choice).toEqual({ type: "none" });
    expect(encode({ tools: [weatherTool], tool_choice: { type: "function", function: { name: "get_weather" } } }).tool_choice).toEqual({ type: "tool", name: "get_weather" });
    expect(encode({ tools: [weatherTool], parallel_tool_calls: false }).tool_choice).toEqual({ type: "auto", disable_parallel_tool_use: true });
    expect(encode({ tools: [{ type: "function", function: { name: "noargs" } }] }).tools[0].input_schema).toEqual({ type: "object", properties: {} });
  });

  test("assistant tool calls become tool_use blocks and tool results become tool_result blocks leading the next user turn", () => {
    const body = encode({ messages: [
      { role: "user", content: "weather in Paris and Tokyo?" },
      { role: "assistant", content: "Checking.", tool_calls: [
        { id: "toolu_1", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Paris\"}" } },
        { id: "toolu_2", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Tokyo\"}" } },
      ] },
      { role: "tool", tool_call_id: "toolu_1", content: "18C" },
      { role: "tool", tool_call_id: "toolu_2", content: [{ type: "text", text: "25C" }] },
      { role: "user", content: "thanks" },
    ] });
    expect(body.messages).toEqual([
      { role: "user", content: [{ type: "text", text: "weather in Paris and Tokyo?" }] },
      { role: "assistant", content: [
        { type: "text", text: "Checking." },
        { type: "tool_use", id: "toolu_1", name: "get_weather", input: { location: "Paris" } },
        { type: "tool_use", id: "toolu_2", name: "get_weather", input: { location: "Tokyo" } },
      ] },
      { role: "user", content: [
        { type: "tool_result", tool_use_id: "toolu_1", content: "18C" },
        { type: "tool_result", tool_use_id: "toolu_2", content: "25C" },
        { type: "text", text: "thanks" },
      ] },
    ]);
  });

  test("response_format json_schema becomes one forced tool; with other tools it is 400 unsupported_feature", () => {
    const schema = { type: "object", properties: { city: { type: "string" } }, required: ["city"] };
    const body = encode({ response_format: { type: "json_schema", json_schema: { name: "city", schema } } });
    expect(body.tools).toEqual([{ name: JSON_TOOL_NAME, description: expect.stringContaining("city"), input_schema: schema }]);
    expect(body.tool_choice).toEqual({ type: "tool", name: JSON_TOOL_NAME });
    expect(encode({ response_format: { type: "json_object" } }).tools[0].input_schema).toEqual({ type: "object" });
    expect(encode({ response_format: { type: "text" } }).tools).toBeUndefined();
    rejects({ tools: [weatherTool], response_format: { type: "json_object" } }, "unsupported_feature", /response_format.*tools/);
    rejects({ tools: [{ type: "function", function: { name: JSON_TOOL_NAME } }] }, "unsupported_feature", new RegExp(JSON_TOOL_NAME));
  });

  test("parameters Messages cannot express are 400 unsupported_feature naming them, never clamped", () => {
    rejects({ n: 2 }, "unsupported_feature", /`n`/);
    rejects({ logprobs: true }, "unsupported_feature", /logprobs/);
    rejects({ temperature: 1.5 }, "unsupported_feature", /temperature.*1\.5/);
    rejects({ presence_penalty: 0.5 }, "unsupported_feature", /presence_penalty/);
    rejects({ frequency_penalty: 0.1 }, "unsupported_feature", /frequency_penalty/);
    rejects({ logit_bias: { "50256": -100 } }, "unsupported_feature", /logit_bias/);
    rejects({ reasoning_effort: "high" }, "unsupported_feature", /reasoning_effort/);
    rejects({ messages: [{ role: "user", content: [{ type: "input_audio", input_audio: { data: "AAAA", format: "wav" } }] }] }, "unsupported_feature", /Audio input/);
  });

  test("harmless no-op values pass: n=1, logprobs=false, zero penalties, temperature 1, seed dropped", () => {
    const body = encode({ n: 1, logprobs: false, presence_penalty: 0, frequency_penalty: 0, temperature: 1, seed: 7, stream_options: { include_usage: true } });
    expect(body.temperature).toBe(1);
    for (const k of ["n", "logprobs", "presence_penalty", "frequency_penalty", "seed", "stream_options"]) expect(body[k]).toBeUndefined();
  });

  test("a conversation must start with a user turn; malformed tool arguments are 400 bad_request", () => {
    rejects({ messages: [{ role: "assistant", content: "hello" }, { role: "user", content: "hi" }] }, "unsupported_feature", /starts with an assistant/);
    rejects({ messages: [{ role: "user", content: "x" }, { role: "assistant", tool_calls: [{ id: "t", type: "function", function: { name: "f", arguments: "{not json" } }] }] }, "bad_request", /not valid JSON/);
  });

  test("a client's cache_control on a content part is kept; inline PDF files become document blocks", () => {
    const body = encode({ messages: [
      { role: "system", content: [{ type: "text", text: "Long shared context", cache_control: { type: "ephemeral" } }] },
      { role: "user", content: [{ type: "file", file: { filename: "a.pdf", file_data: "data:application/pdf;base64,JVBERi0=" } }, { type: "text", text: "summarise" }] },
    ] });
    expect(body.system).toEqual([{ type: "text", text: "Long shared context", cache_control: { type: "ephemeral" } }]);
    expect(body.messages[0].content[0]).toEqual({ type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBERi0=" } });
  });

  test("service_tier auto and default map to Anthropic's auto and standard_only; others are 400", () => {
    expect(encode({ service_tier: "auto" }).service_tier).toBe("auto");
    expect(encode({ service_tier: "default" }).service_tier).toBe("standard_only");
    rejects({ service_tier: "flex" }, "unsupported_feature", /service_tier/);
  });

  test("stream and user are carried as stream and metadata.user_id", () => {
    const body = encode({ user: "agent-7" }, true);
    expect(body.stream).toBe(true);
    expect(body.metadata).toEqual({ user_id: "agent-7" });
  });
});

describe("Anthropic response decoding", () => {
  test("text answer: content, stop, and usage summing input with cache reads and writes", () => {
    const { completion, usage } = anthropicCodec.decodeResponse(fixtureJson("anthropic", "text.response.json"), { model: "m" });
    expect(completion.object).toBe("chat.completion");
    expect(completion.choices[0].message).toMatchObject({ role: "assistant", content: "Hi! My name is Claude. Ça va? 晴れ ☀️" });
    expect(completion.choices[0].finish_reason).toBe("stop");
    expect(usage).toEqual({ prompt_tokens: 2095 + 1800 + 120, completion_tokens: 503, cached_tokens: 1800, cache_write_tokens: 120 });
    expect(completion.usage).toMatchObject({ prompt_tokens: 4015, completion_tokens: 503, total_tokens: 4518, prompt_tokens_details: { cached_tokens: 1800 } });
  });

  test("tool_use blocks become tool_calls with finish_reason tool_calls", () => {
    const { completion } = anthropicCodec.decodeResponse(fixtureJson("anthropic", "tool-use.response.json"), { model: "m" });
    const msg = completion.choices[0].message;
    expect(msg.content).toBe("I'll check the weather in both cities.");
    expect(msg.tool_calls).toEqual([
      { id: "toolu_01A09q90qw90lq917835lq9", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ location: "San Francisco, CA", unit: "celsius" }) } },
      { id: "toolu_01B18r81rx81mr826724mr8", type: "function", function: { name: "get_weather", arguments: JSON.stringify({ location: "Paris, France", unit: "celsius" }) } },
    ]);
    expect(completion.choices[0].finish_reason).toBe("tool_calls");
  });

  test("finish reasons: max_tokens → length; the forced response_format tool → JSON text with stop", () => {
    expect(anthropicCodec.decodeResponse(fixtureJson("anthropic", "max-tokens.response.json"), { model: "m" }).completion.choices[0].finish_reason).toBe("length");
    const { completion } = anthropicCodec.decodeResponse(fixtureJson("anthropic", "json-response.response.json"), { model: "m" });
    expect(JSON.parse(completion.choices[0].message.content)).toEqual({ city: "Paris", temperature: 18 });
    expect(completion.choices[0].message.tool_calls).toBeUndefined();
    expect(completion.choices[0].finish_reason).toBe("stop");
  });
});

describe("Anthropic stream decoding", () => {
  test("text stream: role, text deltas, ping ignored, end_turn → stop, usage with cache reads", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const f = fold(decodeAll(dec, fixtureEvents("anthropic", "text.stream.jsonl")));
    expect(f).toMatchObject({ role: "assistant", content: "Hello — ça va? 晴れ ☀️🎉", finishReason: "stop", toolCalls: [] });
    expect(dec.usage()).toEqual({ prompt_tokens: 35, completion_tokens: 15, cached_tokens: 10, cache_write_tokens: 0 });
  });

  test("tool_use stream: text then a tool call whose input_json_delta pieces form its arguments", () => {
    const chunks = decodeAll(anthropicCodec.streamDecoder(OPTS), fixtureEvents("anthropic", "tool-use.stream.jsonl"));
    const f = fold(chunks);
    expect(f.content).toBe("Okay, let me check the weather.");
    expect(f.toolCalls).toEqual([{ id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", name: "get_weather", arguments: '{"location": "San Francisco, CA", "unit": "fahrenheit"}' }]);
    expect(f.finishReason).toBe("tool_calls");
    expect(chunks.every((c) => c.id === OPTS.id && c.model === "claude-opus-4-1-20250805")).toBe(true);
  });

  test("two tool calls interleaved: each delta lands on its own call", () => {
    const f = fold(decodeAll(anthropicCodec.streamDecoder(OPTS), fixtureEvents("anthropic", "parallel-tools-interleaved.stream.jsonl")));
    expect(f.toolCalls).toEqual([
      { id: "toolu_01Paris000000000000000001", name: "get_weather", arguments: '{"location": "Paris"}' },
      { id: "toolu_01Tokyo000000000000000002", name: "get_time", arguments: '{"timezone": "Asia/Tokyo"}' },
    ]);
    expect(f.finishReason).toBe("tool_calls");
  });

  test("an error event mid-stream throws a retryable UpstreamStreamError after the text already decoded", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const got: any[] = [];
    let err: unknown;
    try {
      for (const ev of fixtureEvents("anthropic", "error-mid-stream.stream.jsonl")) got.push(...dec.push(ev));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(UpstreamStreamError);
    expect((err as UpstreamStreamError).retryable).toBe(true);
    expect((err as Error).message).toContain("overloaded_error");
    expect(fold(got).content).toBe("Partial ans");
    expect(dec.usage()).toMatchObject({ prompt_tokens: 30 });
  });

  test("an error event before any content yields no chunk at all (so the relay can still fail over)", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const events = fixtureEvents("anthropic", "error-mid-stream.stream.jsonl");
    expect(dec.push(events[0]!)).toEqual([]); // message_start
    expect(dec.push(events[1]!)).toEqual([]); // empty text block start
    expect(() => dec.push(events[3]!)).toThrow(UpstreamStreamError);
  });

  test("usage missing: the stream still decodes and usage() is null", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const f = fold(decodeAll(dec, fixtureEvents("anthropic", "no-usage.stream.jsonl")));
    expect(f.content).toBe("No usage here.");
    expect(f.finishReason).toBe("stop");
    expect(dec.usage()).toBeNull();
  });

  test("the forced response_format tool streams as content", () => {
    const f = fold(decodeAll(anthropicCodec.streamDecoder(OPTS), fixtureEvents("anthropic", "json-response.stream.jsonl")));
    expect(JSON.parse(f.content)).toEqual({ city: "Paris", temperature: 18 });
    expect(f.toolCalls).toEqual([]);
    expect(f.finishReason).toBe("stop");
  });

  test("a stream cut off before message_delta / message_stop throws at end", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    for (const ev of fixtureEvents("anthropic", "truncated.stream.jsonl")) dec.push(ev);
    expect(() => dec.end()).toThrow(UpstreamStreamError);
  });
});

describe("Anthropic errors", () => {
  const of = (status: number, name: string) => anthropicCodec.errorOf(status, JSON.stringify(fixtureJson("anthropic", name)));
  test("overloaded_error (529) and rate_limit_error (429) move to the next lane", () => {
    expect(of(529, "overloaded.error.json")).toMatchObject({ retryable: true, modelNotFound: false, code: "overloaded_error" });
    expect(of(429, "rate-limit.error.json").retryable).toBe(true);
    expect(anthropicCodec.errorOf(500, "<html>oops</html>").retryable).toBe(true);
  });
  test("invalid_request_error (400) goes back to the client", () => {
    const e = of(400, "invalid-request.error.json");
    expect(e.retryable).toBe(false);
    expect(e.message).toContain("messages.0.content");
  });
  test("an unknown model is modelNotFound", () => {
    expect(of(404, "model-not-found.error.json").modelNotFound).toBe(true);
  });
  test("usageOf reads a message, message_start and message_delta", () => {
    expect(anthropicCodec.usageOf(fixtureJson("anthropic", "text.response.json"))?.prompt_tokens).toBe(4015);
    expect(anthropicCodec.usageOf({ type: "message_start", message: { usage: { input_tokens: 5, output_tokens: 1 } } })?.prompt_tokens).toBe(5);
    expect(anthropicCodec.usageOf({ type: "message_delta", usage: { output_tokens: 9 } })?.completion_tokens).toBe(9);
    expect(anthropicCodec.usageOf({ type: "ping" })).toBeNull();
  });
});
