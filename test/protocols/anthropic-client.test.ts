// The Anthropic client codec on its own (a /v1/messages client on a non-Anthropic lane): request
// → chat pivot, chat answer → Message, chat chunks → the Messages event stream. Pure.
import { describe, expect, test } from "bun:test";
import { anthropicClientCodec, anthropicCodec } from "../../src/protocols/anthropic/index.ts";
import { GatewayError } from "../../src/errors.ts";
import { parseSse } from "./helpers.ts";

const { toPivot, fromPivot, streamEncoder } = anthropicClientCodec;
const base = { model: "m", max_tokens: 100 };

describe("Messages request → chat pivot", () => {
  test("system blocks, images, documents, tool history and tool_result errors", () => {
    const p = toPivot({
      ...base,
      system: [{ type: "text", text: "A", cache_control: { type: "ephemeral" } }, { type: "text", text: "B" }],
      messages: [
        { role: "user", content: [{ type: "text", text: "look" }, { type: "image", source: { type: "base64", media_type: "image/png", data: "iVBOR" } }, { type: "image", source: { type: "url", url: "https://x/y.png" } }, { type: "document", source: { type: "base64", media_type: "application/pdf", data: "JVBER" } }] },
        { role: "assistant", content: [{ type: "thinking", thinking: "hmm", signature: "sig" }, { type: "text", text: "calling" }, { type: "tool_use", id: "toolu_1", name: "f", input: { a: 1 } }] },
        { role: "user", content: [{ type: "tool_result", tool_use_id: "toolu_1", content: "boom", is_error: true }, { type: "text", text: "and?" }] },
      ],
    });
    expect(p.messages).toEqual([
      { role: "system", content: [{ type: "text", text: "A" }, { type: "text", text: "B" }] },
      { role: "user", content: [{ type: "text", text: "look" }, { type: "image_url", image_url: { url: "data:image/png;base64,iVBOR" } }, { type: "image_url", image_url: { url: "https://x/y.png" } }, { type: "file", file: { file_data: "data:application/pdf;base64,JVBER" } }] },
      { role: "assistant", content: "calling", tool_calls: [{ id: "toolu_1", type: "function", function: { name: "f", arguments: '{"a":1}' } }] },
      { role: "tool", tool_call_id: "toolu_1", content: "Error: boom" },
      { role: "user", content: [{ type: "text", text: "and?" }] },
    ]);
  });

  test("tool_choice, stop_sequences, metadata, thinking budget and parallel tool use", () => {
    const tools = [{ name: "f", input_schema: { type: "object", properties: {} } }];
    const p = toPivot({ ...base, messages: [{ role: "user", content: "x" }], tools, tool_choice: { type: "any", disable_parallel_tool_use: true }, stop_sequences: ["END"], metadata: { user_id: "u1" }, thinking: { type: "enabled", budget_tokens: 4000 }, stream: true });
    expect(p).toMatchObject({ tool_choice: "required", parallel_tool_calls: false, stop: ["END"], user: "u1", reasoning_effort: "medium", max_tokens: 100, stream: true, stream_options: { include_usage: true } });
    expect(p.tools).toEqual([{ type: "function", function: { name: "f", parameters: { type: "object", properties: {} } } }]);
    expect(toPivot({ ...base, messages: [], tools, tool_choice: { type: "tool", name: "f" } }).tool_choice).toEqual({ type: "function", function: { name: "f" } });
    expect(toPivot({ ...base, messages: [], thinking: { type: "enabled", budget_tokens: 1024 } }).reasoning_effort).toBe("low");
    expect(toPivot({ ...base, messages: [], thinking: { type: "enabled", budget_tokens: 32000 } }).reasoning_effort).toBe("high");
  });

  test("CONTRACT §8: what chat cannot carry is unsupported_feature, never dropped", () => {
    for (const extra of [{ top_k: 5 }, { tools: [{ type: "bash_20250124", name: "bash" }] }, { mcp_servers: [{}] }, { container: "c" }]) {
      const e = (() => { try { toPivot({ ...base, messages: [], ...extra }); } catch (x) { return x; } })() as GatewayError;
      expect(e).toBeInstanceOf(GatewayError);
      expect(e.code).toBe("unsupported_feature");
    }
  });
});

describe("chat answer → Message", () => {
  test("text, tool calls, stop reasons and usage split into Anthropic's input / cache fields", () => {
    const m = fromPivot({ model: "gpt", choices: [{ message: { content: "hi", tool_calls: [{ id: "c1", function: { name: "f", arguments: '{"x":2}' } }] }, finish_reason: "tool_calls" }] }, { prompt_tokens: 100, completion_tokens: 7, cached_tokens: 30, cache_write_tokens: 10 }, base);
    expect(m).toMatchObject({ type: "message", role: "assistant", model: "gpt", stop_reason: "tool_use", stop_sequence: null, content: [{ type: "text", text: "hi" }, { type: "tool_use", id: "c1", name: "f", input: { x: 2 } }], usage: { input_tokens: 60, cache_read_input_tokens: 30, cache_creation_input_tokens: 10, output_tokens: 7 } });
    for (const [f, s] of [["stop", "end_turn"], ["length", "max_tokens"], ["content_filter", "refusal"]]) {
      expect(fromPivot({ choices: [{ message: { content: "x" }, finish_reason: f }] }, null, base).stop_reason).toBe(s);
    }
  });
});

describe("chat chunks → Messages events", () => {
  const chunk = (delta: object, finish: string | null = null) => ({ id: "c", model: "gpt", created: 1, choices: [{ index: 0, delta, finish_reason: finish }] });

  test("text then two tool calls: one block at a time, input_json_delta per argument fragment, usage in message_delta", () => {
    const enc = streamEncoder(base);
    let out = "";
    out += enc.push(chunk({ role: "assistant", content: "" }));
    out += enc.push(chunk({ content: "Let me " }));
    out += enc.push(chunk({ content: "check." }));
    out += enc.push(chunk({ tool_calls: [{ index: 0, id: "c1", function: { name: "a", arguments: "" } }] }));
    out += enc.push(chunk({ tool_calls: [{ index: 0, function: { arguments: '{"p":' } }] }));
    out += enc.push(chunk({ tool_calls: [{ index: 0, function: { arguments: "1}" } }] }));
    out += enc.push(chunk({ tool_calls: [{ index: 1, id: "c2", function: { name: "b", arguments: "{}" } }] }));
    out += enc.push(chunk({}, "tool_calls"));
    out += enc.end({ prompt_tokens: 50, completion_tokens: 9, cached_tokens: 0, cache_write_tokens: 0 });
    const events = parseSse(out);
    expect(events.every((e) => e.event === JSON.parse(e.data).type)).toBe(true);
    const seq = events.map((e) => { const d = JSON.parse(e.data); return d.type + (d.delta?.type ? `:${d.delta.type}` : d.content_block ? `:${d.content_block.type}` : "") + (d.index !== undefined ? `@${d.index}` : ""); });
    expect(seq).toEqual([
      "message_start", "ping",
      "content_block_start:text@0", "content_block_delta:text_delta@0", "content_block_delta:text_delta@0", "content_block_stop@0",
      "content_block_start:tool_use@1", "content_block_delta:input_json_delta@1", "content_block_delta:input_json_delta@1", "content_block_stop@1",
      "content_block_start:tool_use@2", "content_block_delta:input_json_delta@2", "content_block_stop@2",
      "message_delta", "message_stop",
    ]);
    const delta = JSON.parse(events.at(-2)!.data);
    expect(delta).toEqual({ type: "message_delta", delta: { stop_reason: "tool_use", stop_sequence: null }, usage: { input_tokens: 50, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 9 } });
    expect(JSON.parse(events[6]!.data).content_block).toEqual({ type: "tool_use", id: "c1", name: "a", input: {} });
  });

  test("an error after content is one `error` event; nothing follows", () => {
    const enc = streamEncoder(base);
    enc.push(chunk({ content: "part" }));
    const e = parseSse(enc.error("upstream broke"));
    expect(e).toEqual([{ event: "error", data: JSON.stringify({ type: "error", error: { type: "api_error", message: "upstream broke" } }) }]);
    expect(enc.end(null)).toBe("");
  });
});

describe("Anthropic pass-through usage tap", () => {
  test("message_start gives the input side, message_delta the output (and input totals when present)", () => {
    const start = anthropicCodec.streamUsage!(null, { type: "message_start", message: { usage: { input_tokens: 10, cache_read_input_tokens: 5, cache_creation_input_tokens: 2, output_tokens: 1 } } });
    expect(start).toEqual({ prompt_tokens: 17, completion_tokens: 1, cached_tokens: 5, cache_write_tokens: 2 });
    expect(anthropicCodec.streamUsage!(start, { type: "message_delta", usage: { output_tokens: 40 } })).toEqual({ prompt_tokens: 17, completion_tokens: 40, cached_tokens: 5, cache_write_tokens: 2 });
    expect(anthropicCodec.streamUsage!(start, { type: "message_delta", usage: { input_tokens: 12, output_tokens: 40 } })).toEqual({ prompt_tokens: 19, completion_tokens: 40, cached_tokens: 5, cache_write_tokens: 2 });
  });
});
