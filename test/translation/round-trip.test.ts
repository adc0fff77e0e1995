// Every lane protocol × both client shapes × streaming on and off, through the real gateway:
// a system prompt, user text and tools go in; the vendor mock (which refuses what the vendor
// refuses) records what the gateway sent; the model calls tools; the client sends the results
// back (the mock checks the pairing); the model answers. Each step checks what the vendor
// received, what the client got, and the usage record (tokens and cost) of the attempt.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Json, Usage } from "../../src/protocols/types.ts";
import { costUsd } from "../../src/money/pricing.ts";
import type { Received, VendorReply } from "../fixtures/replay.ts";
import { fold, parseSse } from "../protocols/helpers.ts";
import { startWorld, usageRowsOf, type World } from "./world.ts";

const SYSTEM = "You are a weather bot. Answer in one sentence.";
const USER = "What's the weather in San Francisco and Paris, and the time in Tokyo?";
const PARAMS = {
  get_weather: { type: "object", properties: { location: { type: "string", description: "City and region" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["location"] },
  get_time: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] },
};
const chatTools = Object.entries(PARAMS).map(([name, parameters]) => ({ type: "function", function: { name, description: `The ${name.slice(4)} now`, parameters } }));
const flatTools = Object.entries(PARAMS).map(([name, parameters]) => ({ type: "function", name, description: `The ${name.slice(4)} now`, parameters }));

interface Call { id: string; name: string; args: Json }
const u = (prompt: number, completion: number, cached = 0, write = 0): Usage => ({ prompt_tokens: prompt, completion_tokens: completion, cached_tokens: cached, cache_write_tokens: write });

interface LaneCase {
  key: "anthropic" | "google" | "mistral" | "openai" | "sub";
  protocol: "anthropic" | "gemini" | "chat" | "responses";
  model: string;
  pricingId: string;
  served(w: World): Received[];
  enqueue(w: World, r: VendorReply): void;
  toolReply: VendorReply;
  textReply: VendorReply;
  /** Expected tool calls (ids null where the gateway generates them). */
  calls(stream: boolean): { id: string | null; name: string; args: Json }[];
  text(stream: boolean): string;
  usage: { tool(stream: boolean): Usage; text(stream: boolean): Usage };
}

const ANTHROPIC_SF = { name: "get_weather", args: { location: "San Francisco, CA", unit: "fahrenheit" } };
const lanes: LaneCase[] = [
  {
    key: "anthropic", protocol: "anthropic", model: "claude-sonnet-4-5-20250929", pricingId: "anthropic",
    served: (w) => w.anthropic.served, enqueue: (w, r) => w.anthropic.enqueue(r),
    toolReply: { json: "tool-use.response.json", stream: "tool-use.stream.jsonl" },
    textReply: { json: "text.response.json", stream: "text.stream.jsonl", byteByByte: true },
    calls: (s) => s
      ? [{ id: "toolu_01T1x1fJ34qAmk2tNTrN7Up6", ...ANTHROPIC_SF }]
      : [
        { id: "toolu_01A09q90qw90lq917835lq9", name: "get_weather", args: { location: "San Francisco, CA", unit: "celsius" } },
        { id: "toolu_01B18r81rx81mr826724mr8", name: "get_weather", args: { location: "Paris, France", unit: "celsius" } },
      ],
    text: (s) => (s ? "Hello — ça va? 晴れ ☀️🎉" : "Hi! My name is Claude. Ça va? 晴れ ☀️"),
    usage: { tool: () => u(472, 89), text: (s) => (s ? u(35, 15, 10) : u(4015, 503, 1800, 120)) },
  },
  {
    key: "google", protocol: "gemini", model: "gemini-2.5-flash", pricingId: "google",
    served: (w) => w.gemini.served, enqueue: (w, r) => w.gemini.enqueue(r),
    toolReply: { json: "function-call.response.json", stream: "function-call.stream.jsonl" },
    textReply: { json: "text.response.json", stream: "text.stream.jsonl", byteByByte: true },
    calls: (s) => s
      ? [{ id: null, name: "get_weather", args: { location: "San Francisco, CA" } }, { id: null, name: "get_time", args: { timezone: "Asia/Tokyo" } }]
      : [{ id: null, name: "get_weather", args: { location: "San Francisco, CA", unit: "celsius" } }, { id: null, name: "get_weather", args: { location: "Paris, France", unit: "celsius" } }],
    text: (s) => (s ? "Hello — ça va? 晴れ ☀️🎉" : "Hello! Ça va? 晴れ ☀️"),
    usage: { tool: () => u(96, 30), text: (s) => (s ? u(11, 21, 2) : u(11, 33, 4)) },
  },
  {
    key: "mistral", protocol: "chat", model: "mistral-large-latest", pricingId: "mistral",
    served: (w) => w.openai.served.filter((r) => r.path === "/v1/chat/completions"), enqueue: (w, r) => w.openai.enqueue(r),
    toolReply: { json: "tool-call.response.json", stream: "tool-call.stream.jsonl" },
    textReply: { json: "text.response.json", stream: "text.stream.jsonl", byteByByte: true },
    calls: () => [
      { id: "D681PevKs", name: "get_weather", args: { location: "San Francisco, CA" } },
      { id: "R3m9QxLtZ", name: "get_weather", args: { location: "Paris, France" } },
    ],
    text: () => "Paris is warmer — 晴れ ☀️ 18°C.",
    usage: { tool: () => u(91, 40), text: () => u(156, 14, 64) },
  },
  ...(["openai", "sub"] as const).map((key): LaneCase => ({
    key, protocol: "responses", model: key === "sub" ? "gpt-5" : "gpt-4.1", pricingId: "openai",
    served: (w) => w.openai.served.filter((r) => r.path === (key === "sub" ? "/responses" : "/v1/responses") || (key === "openai" && r.path === "/v1/chat/completions")),
    enqueue: (w, r) => w.openai.enqueue(r),
    toolReply: { json: "function-call.response.json", stream: "function-call.stream.jsonl" },
    textReply: { json: "text.response.json", stream: "text.stream.jsonl", byteByByte: true },
    calls: () => [
      { id: "call_12345xyz", name: "get_weather", args: { location: "Paris, France" } },
      { id: "call_67890abc", name: "get_time", args: { timezone: "Asia/Tokyo" } },
    ],
    text: () => "Hi there! Ça va? 晴れ ☀️",
    usage: { tool: () => u(291, 23), text: () => u(37, 11, 5) },
  })),
];

let w: World;
beforeAll(async () => {
  w = await startWorld();
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

let reqSeq = 0;
async function send(lane: LaneCase, path: string, body: Json, stream: boolean) {
  const requestId = `rt-${lane.key}-${Date.now().toString(36)}-${++reqSeq}`;
  const res = await w.gw.req(path, { token: w.keys[lane.key]!.rawKey, body: { ...body, stream }, headers: { "x-request-id": requestId } });
  const text = await res.text();
  if (res.status !== 200) throw new Error(`${path} on ${lane.key}: ${res.status} ${text}`);
  if (stream) expect(res.headers.get("content-type")).toContain("text/event-stream");
  return { text, requestId };
}

/** The client's view of an answer: tool calls, text, finish. */
interface Answer { calls: Call[]; text: string; finish: string; raw: Json }

function readChat(text: string, stream: boolean): Answer {
  if (!stream) {
    const c = JSON.parse(text);
    expect(c.object).toBe("chat.completion");
    const m = c.choices[0].message;
    return { calls: (m.tool_calls ?? []).map((t: Json) => ({ id: t.id, name: t.function.name, args: JSON.parse(t.function.arguments) })), text: m.content ?? "", finish: c.choices[0].finish_reason, raw: c };
  }
  const events = parseSse(text);
  expect(events.at(-1)!.data).toBe("[DONE]");
  const chunks = events.slice(0, -1).map((e) => JSON.parse(e.data)).filter((c) => c.choices?.length);
  const f = fold(chunks);
  return { calls: f.toolCalls.map((t) => ({ id: t.id, name: t.name, args: JSON.parse(t.arguments) })), text: f.content, finish: f.finishReason ?? "", raw: { chunks } };
}

function readResponses(text: string, stream: boolean): Answer {
  let r: Json;
  if (!stream) r = JSON.parse(text);
  else {
    const events = parseSse(text);
    events.forEach((e, i) => {
      const d = JSON.parse(e.data);
      expect(d.type).toBe(e.event!);
      expect(typeof d.sequence_number).toBe("number");
      if (i > 0) expect(d.sequence_number).toBeGreaterThan(JSON.parse(events[i - 1]!.data).sequence_number);
    });
    expect(events[0]!.event).toBe("response.created");
    const last = JSON.parse(events.at(-1)!.data);
    expect(last.type).toBe("response.completed");
    r = last.response;
    // The streamed deltas add up to what the final response holds.
    const deltas = events.filter((e) => e.event === "response.output_text.delta").map((e) => JSON.parse(e.data).delta).join("");
    const finalText = r.output.filter((o: Json) => o.type === "message").flatMap((o: Json) => o.content).map((c: Json) => c.text ?? "").join("");
    expect(deltas).toBe(finalText);
  }
  expect(r.object).toBe("response");
  const calls = r.output.filter((o: Json) => o.type === "function_call").map((o: Json) => ({ id: o.call_id, name: o.name, args: JSON.parse(o.arguments) }));
  const txt = r.output.filter((o: Json) => o.type === "message").flatMap((o: Json) => o.content).map((c: Json) => c.text ?? "").join("");
  return { calls, text: txt, finish: r.status, raw: r };
}

function toolResult(c: Call) {
  return JSON.stringify({ for: c.args.location ?? c.args.timezone, value: c.name === "get_time" ? "09:00" : "18C" });
}

/** What the vendor received on the first turn: system prompt, user text, both tools, stream flag, auth. */
function expectFirstTurn(lane: LaneCase, shape: "chat" | "responses", got: Received, stream: boolean) {
  const b = got.body;
  switch (lane.protocol) {
    case "anthropic":
      expect(got.headers["anthropic-version"]).toBe("2023-06-01");
      expect(got.headers["x-api-key"]).toBe(w.anthropic.apiKey);
      expect(b.model).toBe(lane.model);
      expect(b.system).toEqual([{ type: "text", text: SYSTEM }]);
      expect(b.messages).toEqual([{ role: "user", content: [{ type: "text", text: USER }] }]);
      expect(b.tools.map((t: Json) => [t.name, t.input_schema])).toEqual(Object.entries(PARAMS));
      expect(b.max_tokens).toBe(4096);
      expect(b.stream ?? false).toBe(stream);
      break;
    case "gemini":
      expect(got.path).toBe(`/v1beta/models/${lane.model}:${stream ? "streamGenerateContent" : "generateContent"}`);
      expect(got.query.alt).toBe(stream ? "sse" : undefined);
      expect(got.headers["x-goog-api-key"]).toBe(w.gemini.apiKey);
      expect(b.systemInstruction).toEqual({ parts: [{ text: SYSTEM }] });
      expect(b.contents).toEqual([{ role: "user", parts: [{ text: USER }] }]);
      expect(b.tools[0].functionDeclarations.map((f: Json) => [f.name, f.parameters])).toEqual(Object.entries(PARAMS));
      break;
    case "chat":
      expect(got.headers.authorization).toBe(`Bearer ${w.openai.apiKey}`);
      expect(b.model).toBe(lane.model);
      expect(b.messages[0]).toEqual({ role: "system", content: SYSTEM });
      expect(b.messages[1]).toMatchObject({ role: "user" });
      expect(JSON.stringify(b.messages[1].content)).toContain("San Francisco");
      expect(b.tools.map((t: Json) => [t.function.name, t.function.parameters])).toEqual(Object.entries(PARAMS));
      expect(b.stream ?? false).toBe(stream);
      break;
    case "responses":
      expect(b.model).toBe(lane.model);
      if (lane.key === "openai" && shape === "chat") {
        // A chat client on the openai lane passes through as chat.
        expect(got.path).toBe("/v1/chat/completions");
        expect(b.messages[0]).toEqual({ role: "system", content: SYSTEM });
        break;
      }
      expect(b.instructions).toBe(SYSTEM);
      expect(JSON.stringify(b.input)).toContain("San Francisco");
      expect(b.tools.map((t: Json) => [t.name, t.parameters])).toEqual(Object.entries(PARAMS));
      expect(b.stream ?? false).toBe(stream);
      if (lane.key === "sub") expect(got.headers["chatgpt-account-id"]).toBe(w.openai.sub.accountId);
      break;
  }
}

/** What the vendor received on the second turn: the calls and their results, paired in its own terms. */
function expectSecondTurn(lane: LaneCase, shape: "chat" | "responses", got: Received, calls: Call[]) {
  const b = got.body;
  const ids = calls.map((c) => c.id);
  switch (lane.protocol) {
    case "anthropic": {
      expect(b.messages.map((m: Json) => m.role)).toEqual(["user", "assistant", "user"]);
      expect(b.messages[1].content.filter((x: Json) => x.type === "tool_use").map((x: Json) => [x.id, x.name, x.input])).toEqual(calls.map((c) => [c.id, c.name, c.args]));
      expect(b.messages[2].content.map((x: Json) => [x.type, x.tool_use_id])).toEqual(ids.map((id) => ["tool_result", id]));
      expect(b.messages[2].content[0].content).toBe(toolResult(calls[0]!));
      break;
    }
    case "gemini":
      expect(b.contents.map((c: Json) => c.role)).toEqual(["user", "model", "user"]);
      expect(b.contents[1].parts.filter((p: Json) => p.functionCall).map((p: Json) => [p.functionCall.name, p.functionCall.args])).toEqual(calls.map((c) => [c.name, c.args]));
      expect(b.contents[2].parts.map((p: Json) => [p.functionResponse.name, p.functionResponse.response])).toEqual(calls.map((c) => [c.name, JSON.parse(toolResult(c))]));
      break;
    case "responses":
      if (!(lane.key === "openai" && shape === "chat")) {
        const items = b.input as Json[];
        expect(items.filter((i) => i.type === "function_call").map((i) => [i.call_id, i.name, JSON.parse(i.arguments)])).toEqual(calls.map((c) => [c.id, c.name, c.args]));
        expect(items.filter((i) => i.type === "function_call_output").map((i) => [i.call_id, i.output])).toEqual(calls.map((c) => [c.id, toolResult(c)]));
        break;
      }
    // falls through: a chat client on the openai lane speaks chat
    case "chat": {
      const assistant = b.messages.find((m: Json) => m.role === "assistant");
      expect(assistant.tool_calls.map((t: Json) => [t.id, t.function.name, JSON.parse(t.function.arguments)])).toEqual(calls.map((c) => [c.id, c.name, c.args]));
      expect(b.messages.filter((m: Json) => m.role === "tool").map((m: Json) => [m.tool_call_id, m.content])).toEqual(calls.map((c) => [c.id, toolResult(c)]));
      break;
    }
  }
}

async function expectUsage(lane: LaneCase, requestId: string, usage: Usage) {
  const rows = await usageRowsOf(w.gw, requestId);
  expect(rows).toHaveLength(1);
  const row = rows[0]!;
  expect(row).toMatchObject({
    provider: lane.key, model: lane.model, outcome: "ok", status: 200,
    promptTokens: usage.prompt_tokens, completionTokens: usage.completion_tokens, cachedTokens: usage.cached_tokens, cacheWriteTokens: usage.cache_write_tokens,
  });
  const cost = costUsd(lane.pricingId, lane.model, usage);
  expect(cost).toBeGreaterThan(0);
  expect(row.costUsd).toBeCloseTo(cost, 12);
}

for (const lane of lanes) {
  describe(`${lane.key} lane (${lane.protocol})`, () => {
    for (const shape of ["chat", "responses"] as const) {
      for (const stream of [false, true]) {
        test(`${shape} client, ${stream ? "streaming" : "not streaming"}: system prompt, text and tools translated; tool-call round trip; usage and cost recorded`, async () => {
          const before = lane.served(w).length;
          const path = shape === "chat" ? "/v1/chat/completions" : "/v1/responses";
          const read = shape === "chat" ? readChat : readResponses;
          // Turn 1: the model calls tools.
          const turn1Body = shape === "chat"
            ? { model: lane.model, messages: [{ role: "system", content: SYSTEM }, { role: "user", content: USER }], tools: chatTools }
            : { model: lane.model, instructions: SYSTEM, input: [{ role: "user", content: USER }], tools: flatTools };
          // The openai lane serves a chat client through chat, so it replays the chat fixtures then.
          const chatOnOpenai = lane.key === "openai" && shape === "chat";
          lane.enqueue(w, chatOnOpenai ? { json: "tool-call.response.json", stream: "tool-call.stream.jsonl" } : lane.toolReply);
          const t1 = await send(lane, path, turn1Body, stream);
          const served1 = lane.served(w);
          expect(served1.length).toBe(before + 1);
          expectFirstTurn(lane, shape, served1.at(-1)!, stream);
          const a1 = read(t1.text, stream);
          const expected = chatOnOpenai ? lanes.find((l) => l.key === "mistral")!.calls(stream) : lane.calls(stream);
          expect(a1.calls.map((c) => [c.name, c.args])).toEqual(expected.map((c) => [c.name, c.args]));
          for (const [i, c] of a1.calls.entries()) {
            if (expected[i]!.id) expect(c.id).toBe(expected[i]!.id!);
            else expect(c.id).toMatch(/^call_/);
          }
          expect(a1.finish).toBe(shape === "chat" ? "tool_calls" : "completed");
          const chatLane = lanes.find((l) => l.key === "mistral")!;
          await expectUsage(chatOnOpenai ? { ...lane, pricingId: "openai" } : lane, t1.requestId, chatOnOpenai ? chatLane.usage.tool(stream) : lane.usage.tool(stream));

          // Turn 2: the client sends the results back; the model answers in text.
          const turn2Body = shape === "chat"
            ? {
              model: lane.model,
              messages: [
                ...turn1Body.messages!,
                { role: "assistant", content: a1.text || null, tool_calls: a1.calls.map((c) => ({ id: c.id, type: "function", function: { name: c.name, arguments: JSON.stringify(c.args) } })) },
                ...a1.calls.map((c) => ({ role: "tool", tool_call_id: c.id, content: toolResult(c) })),
              ],
              tools: chatTools,
            }
            : {
              model: lane.model,
              instructions: SYSTEM,
              input: [
                ...turn1Body.input!,
                ...a1.raw.output.filter((o: Json) => o.type === "function_call"),
                ...a1.calls.map((c) => ({ type: "function_call_output", call_id: c.id, output: toolResult(c) })),
              ],
              tools: flatTools,
            };
          lane.enqueue(w, chatOnOpenai ? { json: "text.response.json", stream: "text.stream.jsonl" } : lane.textReply);
          const t2 = await send(lane, path, turn2Body, stream);
          const served2 = lane.served(w);
          expect(served2.length).toBe(before + 2);
          expectSecondTurn(lane, shape, served2.at(-1)!, a1.calls);
          const a2 = read(t2.text, stream);
          expect(a2.calls).toEqual([]);
          expect(a2.text).toBe(chatOnOpenai ? chatLane.text(stream) : lane.text(stream));
          expect(a2.finish).toBe(shape === "chat" ? "stop" : "completed");
          await expectUsage(chatOnOpenai ? { ...lane, pricingId: "openai" } : lane, t2.requestId, chatOnOpenai ? chatLane.usage.text(stream) : lane.usage.text(stream));
        }, 60_000);
      }
    }
  });
}

test("provider keys never appear in the gateway's logs", () => {
  const logs = w.gw.logs.join("");
  expect(logs.length).toBeGreaterThan(0);
  for (const secret of [w.anthropic.apiKey, w.gemini.apiKey, w.openai.apiKey, w.openai.sub.accessToken]) expect(logs).not.toContain(secret);
});
