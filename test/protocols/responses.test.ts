import { describe, expect, test } from "bun:test";
import { GatewayError } from "../../src/errors.ts";
import { anthropicCodec } from "../../src/protocols/anthropic/index.ts";
import { responsesClientCodec, responsesUpstreamCodec } from "../../src/protocols/responses/index.ts";
import { UpstreamStreamError, type ChatRequest, type Json } from "../../src/protocols/types.ts";
import { fixtureEvents, fixtureJson } from "../fixtures/index.ts";
import { decodeAll, fold, OPTS, parseSse } from "./helpers.ts";

function rejects(fn: () => unknown, code: string | undefined, mention: RegExp) {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(GatewayError);
    expect((e as GatewayError).status).toBe(400);
    expect((e as GatewayError).code).toBe(code);
    expect((e as GatewayError).message).toMatch(mention);
    return;
  }
  throw new Error("expected a 400");
}

const weather = { type: "function", name: "get_weather", description: "Weather now", parameters: { type: "object", properties: { location: { type: "string" } }, required: ["location"] } };

describe("Responses request → chat pivot", () => {
  test("input string and instructions become a system and a user message", () => {
    expect(responsesClientCodec.toPivot({ model: "m", instructions: "Be brief.", input: "hi" })).toEqual({
      model: "m",
      messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "hi" }],
    });
  });

  test("input items: messages, function_call (joining the assistant message) and function_call_output", () => {
    const req = responsesClientCodec.toPivot({
      model: "m",
      input: [
        { role: "developer", content: "Use metric." },
        { type: "message", role: "user", content: [{ type: "input_text", text: "weather?" }, { type: "input_image", image_url: "https://x.test/a.png", detail: "low" }] },
        { type: "message", role: "assistant", content: [{ type: "output_text", text: "Checking." }] },
        { type: "reasoning", id: "rs_1", summary: [] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"location\":\"Paris\"}" },
        { type: "function_call", call_id: "call_2", name: "get_weather", arguments: "{\"location\":\"Tokyo\"}" },
        { type: "function_call_output", call_id: "call_1", output: "18C" },
        { type: "function_call_output", call_id: "call_2", output: "25C" },
      ],
    });
    expect(req.messages).toEqual([
      { role: "system", content: "Use metric." },
      { role: "user", content: [{ type: "text", text: "weather?" }, { type: "image_url", image_url: { url: "https://x.test/a.png", detail: "low" } }] },
      { role: "assistant", content: "Checking.", tool_calls: [
        { id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Paris\"}" } },
        { id: "call_2", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Tokyo\"}" } },
      ] },
      { role: "tool", tool_call_id: "call_1", content: "18C" },
      { role: "tool", tool_call_id: "call_2", content: "25C" },
    ]);
  });

  test("flattened function tools, tool_choice, max_output_tokens, text.format and reasoning map to chat fields", () => {
    const req = responsesClientCodec.toPivot({
      model: "m", input: "x", stream: true, tools: [weather], tool_choice: { type: "function", name: "get_weather" }, max_output_tokens: 500,
      temperature: 0.3, text: { format: { type: "json_schema", name: "w", schema: { type: "object" }, strict: true } }, reasoning: { effort: "low" },
    });
    expect(req).toMatchObject({
      stream: true, stream_options: { include_usage: true }, max_tokens: 500, temperature: 0.3, reasoning_effort: "low",
      tools: [{ type: "function", function: { name: "get_weather", description: "Weather now", parameters: weather.parameters } }],
      tool_choice: { type: "function", function: { name: "get_weather" } },
      response_format: { type: "json_schema", json_schema: { name: "w", schema: { type: "object" }, strict: true } },
    });
  });

  test("missing input is 400 invalid_request_error with no code; stored state and hosted tools are 400 unsupported_feature", () => {
    rejects(() => responsesClientCodec.toPivot({ model: "m" }), undefined, /input/);
    rejects(() => responsesClientCodec.toPivot({ model: "m", input: "x", previous_response_id: "resp_1" }), "unsupported_feature", /previous_response_id/);
    rejects(() => responsesClientCodec.toPivot({ model: "m", input: "x", tools: [{ type: "web_search" }] }), "unsupported_feature", /web_search/);
    rejects(() => responsesClientCodec.toPivot({ model: "m", input: [{ type: "item_reference", id: "msg_1" }] }), "unsupported_feature", /item_reference/);
  });
});

describe("chat completion → Response object", () => {
  test("text and tool calls become message and function_call output items; usage in input/output tokens", () => {
    const { completion, usage } = anthropicCodec.decodeResponse(fixtureJson("anthropic", "tool-use.response.json"), { model: "m" });
    const r = responsesClientCodec.fromPivot(completion, usage, { model: "claude", input: "x", instructions: "Be brief.", tools: [weather] });
    expect(r).toMatchObject({ object: "response", status: "completed", instructions: "Be brief.", tools: [weather], model: "claude-sonnet-4-5-20250929" });
    expect(r.id).toMatch(/^resp_/);
    expect(r.output.map((o: Json) => o.type)).toEqual(["message", "function_call", "function_call"]);
    expect(r.output[0].content).toEqual([{ type: "output_text", text: "I'll check the weather in both cities.", annotations: [], logprobs: [] }]);
    expect(r.output[1]).toMatchObject({ call_id: "toolu_01A09q90qw90lq917835lq9", name: "get_weather", arguments: JSON.stringify({ location: "San Francisco, CA", unit: "celsius" }), status: "completed" });
    expect(r.usage).toEqual({ input_tokens: 472, input_tokens_details: { cached_tokens: 0, cache_write_tokens: 0 }, output_tokens: 89, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 561 });
  });

  test("finish_reason length becomes status incomplete with reason max_output_tokens", () => {
    const { completion, usage } = anthropicCodec.decodeResponse(fixtureJson("anthropic", "max-tokens.response.json"), { model: "m" });
    expect(responsesClientCodec.fromPivot(completion, usage, { model: "m", input: "x" })).toMatchObject({ status: "incomplete", incomplete_details: { reason: "max_output_tokens" } });
  });
});

/** Runs chat chunks through the Responses stream encoder and parses what it wrote. */
function encodeStream(chunks: Json[], usage: any, request: Json = { model: "m", input: "x" }) {
  const enc = responsesClientCodec.streamEncoder(request);
  let text = "";
  for (const c of chunks) text += enc.push(c);
  text += enc.end(usage);
  return { text, events: parseSse(text) };
}

describe("Responses stream encoder", () => {
  test("text: the documented event sequence, each with type, sequence_number and a matching event: line", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const { events } = encodeStream(decodeAll(dec, fixtureEvents("anthropic", "text.stream.jsonl")), dec.usage());
    expect(events.map((e) => e.event)).toEqual([
      "response.created", "response.in_progress", "response.output_item.added", "response.content_part.added",
      "response.output_text.delta", "response.output_text.delta", "response.output_text.delta",
      "response.output_text.done", "response.content_part.done", "response.output_item.done", "response.completed",
    ]);
    const data = events.map((e) => JSON.parse(e.data));
    data.forEach((d, i) => {
      expect(d.type).toBe(events[i]!.event);
      expect(d.sequence_number).toBe(i);
    });
    const done = data.find((d) => d.type === "response.output_text.done");
    expect(done.text).toBe("Hello — ça va? 晴れ ☀️🎉");
    const completed = data.at(-1);
    expect(completed.response).toMatchObject({ status: "completed", usage: { input_tokens: 35, input_tokens_details: { cached_tokens: 10 }, output_tokens: 15, total_tokens: 50 } });
    expect(completed.response.output[0].content[0].text).toBe("Hello — ça va? 晴れ ☀️🎉");
    const itemIds = new Set(data.filter((d) => d.item_id).map((d) => d.item_id));
    expect(itemIds.size).toBe(1);
  });

  test("tool calls: output_item.added per call, function_call_arguments.delta/.done, interleaved calls kept apart", () => {
    const dec = anthropicCodec.streamDecoder(OPTS);
    const { events } = encodeStream(decodeAll(dec, fixtureEvents("anthropic", "parallel-tools-interleaved.stream.jsonl")), dec.usage());
    const data = events.map((e) => JSON.parse(e.data));
    const added = data.filter((d) => d.type === "response.output_item.added").map((d) => d.item);
    expect(added.map((i) => i.type)).toEqual(["message", "function_call", "function_call"]);
    const argsDone = data.filter((d) => d.type === "response.function_call_arguments.done");
    expect(argsDone.map((d) => [d.name, d.arguments])).toEqual([["get_weather", '{"location": "Paris"}'], ["get_time", '{"timezone": "Asia/Tokyo"}']]);
    const deltas = data.filter((d) => d.type === "response.function_call_arguments.delta");
    for (const d of deltas) expect(added.find((i) => i.id === d.item_id)).toBeDefined();
    const final = data.at(-1).response;
    expect(final.output.filter((o: Json) => o.type === "function_call").map((o: Json) => o.call_id)).toEqual(["toolu_01Paris000000000000000001", "toolu_01Tokyo000000000000000002"]);
  });

  test("a broken stream ends with an error event and response.failed, never response.completed", () => {
    const enc = responsesClientCodec.streamEncoder({ model: "m", input: "x" });
    const text = enc.push({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta: { content: "Part" }, finish_reason: null }] }) + enc.error("upstream broke");
    const types = parseSse(text).map((e) => e.event);
    expect(types.slice(-2)).toEqual(["error", "response.failed"]);
    expect(types).not.toContain("response.completed");
    expect(enc.end(null)).toBe("");
  });

  test("refusals stream as response.refusal.delta in a refusal content part", () => {
    const chunk = (delta: Json, finish: string | null = null) => ({ id: "c", object: "chat.completion.chunk", created: 1, model: "m", choices: [{ index: 0, delta, finish_reason: finish }] });
    const { events } = encodeStream([chunk({ role: "assistant", content: "" }), chunk({ refusal: "I can't " }), chunk({ refusal: "help with that." }), chunk({}, "stop")], null);
    const data = events.map((e) => JSON.parse(e.data));
    expect(data.filter((d) => d.type === "response.refusal.delta").map((d) => d.delta)).toEqual(["I can't ", "help with that."]);
    expect(data.at(-1).response.output[0].content).toEqual([{ type: "refusal", refusal: "I can't help with that." }]);
    expect(data.at(-1).response.usage).toBeUndefined();
  });

  test("a length finish ends with response.incomplete", () => {
    const dec = responsesUpstreamCodec.streamDecoder(OPTS);
    const { events } = encodeStream(decodeAll(dec, fixtureEvents("responses", "incomplete.stream.jsonl")), dec.usage());
    const last = JSON.parse(events.at(-1)!.data);
    expect(last).toMatchObject({ type: "response.incomplete", response: { status: "incomplete", incomplete_details: { reason: "max_output_tokens" } } });
  });
});

describe("chat pivot → Responses request (Responses-only lanes)", () => {
  test("instructions, input items, flattened tools, max_output_tokens, text.format; stateless", () => {
    const body = responsesUpstreamCodec.encodeRequest({
      model: "x",
      messages: [
        { role: "system", content: "Be brief." },
        { role: "user", content: [{ type: "text", text: "weather?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AAAA" } }] },
        { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"location\":\"Paris\"}" } }] },
        { role: "tool", tool_call_id: "call_1", content: "18C" },
      ],
      tools: [{ type: "function", function: weather }],
      tool_choice: "required",
      max_tokens: 256,
      response_format: { type: "json_schema", json_schema: { name: "w", schema: { type: "object" } } },
    } as ChatRequest, { model: "gpt-5", stream: true });
    expect(body).toEqual({
      model: "gpt-5", store: false, stream: true, instructions: "Be brief.", max_output_tokens: 256,
      input: [
        { type: "message", role: "user", content: [{ type: "input_text", text: "weather?" }, { type: "input_image", image_url: "data:image/png;base64,AAAA", detail: "auto" }] },
        { type: "function_call", call_id: "call_1", name: "get_weather", arguments: "{\"location\":\"Paris\"}" },
        { type: "function_call_output", call_id: "call_1", output: "18C" },
      ],
      tools: [{ type: "function", name: "get_weather", description: "Weather now", parameters: weather.parameters, strict: false }],
      tool_choice: "required",
      text: { format: { type: "json_schema", name: "w", schema: { type: "object" } } },
    });
  });

  test("stop, n > 1 and logprobs cannot be expressed: 400 unsupported_feature", () => {
    const enc = (extra: Json) => () => responsesUpstreamCodec.encodeRequest({ model: "x", messages: [{ role: "user", content: "hi" }], ...extra } as ChatRequest, { model: "gpt-5", stream: false });
    rejects(enc({ stop: ["x"] }), "unsupported_feature", /stop/);
    rejects(enc({ n: 3 }), "unsupported_feature", /`n`/);
    rejects(enc({ logprobs: true }), "unsupported_feature", /logprobs/);
  });

  test("Response object → chat completion: text, tool calls, usage", () => {
    const t = responsesUpstreamCodec.decodeResponse(fixtureJson("responses", "text.response.json"), { model: "m" });
    expect(t.completion.choices[0]).toMatchObject({ message: { content: "Hi there! Ça va? 晴れ ☀️" }, finish_reason: "stop" });
    expect(t.usage).toEqual({ prompt_tokens: 37, completion_tokens: 11, cached_tokens: 5, cache_write_tokens: 0, reasoning_tokens: 2 });
    const f = responsesUpstreamCodec.decodeResponse(fixtureJson("responses", "function-call.response.json"), { model: "m" });
    expect(f.completion.choices[0].finish_reason).toBe("tool_calls");
    expect(f.completion.choices[0].message.tool_calls.map((t: Json) => [t.id, t.function.name, t.function.arguments])).toEqual([
      ["call_12345xyz", "get_weather", "{\"location\":\"Paris, France\"}"],
      ["call_67890abc", "get_time", "{\"timezone\":\"Asia/Tokyo\"}"],
    ]);
  });

  test("Responses stream → chat chunks: text, usage from response.completed", () => {
    const dec = responsesUpstreamCodec.streamDecoder(OPTS);
    const f = fold(decodeAll(dec, fixtureEvents("responses", "text.stream.jsonl")));
    expect(f).toMatchObject({ role: "assistant", content: "Hi there! Ça va? 晴れ ☀️", finishReason: "stop" });
    expect(dec.usage()?.prompt_tokens).toBe(37);
  });

  test("Responses stream → chat chunks: two function calls with call ids and arguments (not doubled by .done events)", () => {
    const f = fold(decodeAll(responsesUpstreamCodec.streamDecoder(OPTS), fixtureEvents("responses", "function-call.stream.jsonl")));
    expect(f.toolCalls).toEqual([
      { id: "call_12345xyz", name: "get_weather", arguments: "{\"location\":\"Paris, France\"}" },
      { id: "call_67890abc", name: "get_time", arguments: "{\"timezone\":\"Asia/Tokyo\"}" },
    ]);
    expect(f.finishReason).toBe("tool_calls");
  });

  test("an error event mid-stream throws; usage missing gives null; no response.completed throws at end", () => {
    const dec = responsesUpstreamCodec.streamDecoder(OPTS);
    expect(() => decodeAll(dec, fixtureEvents("responses", "error-mid-stream.stream.jsonl"))).toThrow(UpstreamStreamError);
    const nu = responsesUpstreamCodec.streamDecoder(OPTS);
    expect(fold(decodeAll(nu, fixtureEvents("responses", "no-usage.stream.jsonl"))).content).toBe("No usage here.");
    expect(nu.usage()).toBeNull();
    const cut = responsesUpstreamCodec.streamDecoder(OPTS);
    cut.push(fixtureEvents("responses", "text.stream.jsonl")[0]!);
    expect(() => cut.end()).toThrow(UpstreamStreamError);
  });

  test("errors: an unsupported model is modelNotFound; rate limits move on; usageOf reads response.completed", () => {
    expect(responsesUpstreamCodec.errorOf(400, JSON.stringify(fixtureJson("responses", "model-not-supported.error.json"))).modelNotFound).toBe(true);
    expect(responsesUpstreamCodec.errorOf(429, JSON.stringify(fixtureJson("responses", "rate-limit.error.json")))).toMatchObject({ retryable: true, code: "rate_limit_exceeded" });
    const completed = JSON.parse(fixtureEvents("responses", "text.stream.jsonl").at(-1)!.data);
    expect(responsesUpstreamCodec.usageOf(completed)?.completion_tokens).toBe(11);
    expect(responsesUpstreamCodec.usageOf({ type: "response.output_text.delta" })).toBeNull();
  });
});
