// POST /v1/messages through the official Anthropic SDK, unmodified (baseURL = the gateway, the
// routing key as its API key), on every lane kind: an Anthropic lane (pass-through), an OpenAI
// lane (chat), a Gemini lane, a `sub` lane (Responses) and a bridge lane (chat), each behind a
// vendor mock that refuses what the vendor refuses. create, stream() + finalMessage(), a tool-use
// round trip sending the SDK's own assistant message back, countTokens, and typed errors.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { VendorReply } from "../fixtures/replay.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { registerBridge } from "../lanes/helpers.ts";
import { startMockBridge, type MockBridge } from "../mocks/bridge.ts";
import { startWorld, usageRowsOf, type World } from "../translation/world.ts";

let w: World;
let bridge: MockBridge;
const keys: Record<string, string> = {};

interface LaneCase {
  name: "anthropic" | "openai" | "google" | "sub" | "bridge";
  model: string;
  /** Scripted tool-call answers (the vendor's recorded shapes); the bridge mock calls tools itself. */
  toolReply?: VendorReply;
  enqueue?(r: VendorReply): void;
  /** The request bodies the lane's vendor served. */
  served(): any[];
}

const lanes: LaneCase[] = [
  { name: "anthropic", model: "claude-sonnet-4-5-20250929", toolReply: { json: "tool-use.response.json", stream: "tool-use.stream.jsonl" }, enqueue: (r) => w.anthropic.enqueue(r), served: () => w.anthropic.served.map((r) => r.body) },
  { name: "openai", model: "gpt-4.1", toolReply: { json: "tool-call.response.json", stream: "tool-call.stream.jsonl" }, enqueue: (r) => w.openai.enqueue(r), served: () => w.openai.served.filter((r) => r.path === "/v1/chat/completions").map((r) => r.body) },
  { name: "google", model: "gemini-2.5-flash", toolReply: { json: "function-call.response.json", stream: "function-call.stream.jsonl" }, enqueue: (r) => w.gemini.enqueue(r), served: () => w.gemini.served.map((r) => r.body) },
  { name: "sub", model: "gpt-5", toolReply: { json: "function-call.response.json", stream: "function-call.stream.jsonl" }, enqueue: (r) => w.openai.enqueue(r), served: () => w.openai.served.filter((r) => r.path === "/responses").map((r) => r.body) },
  { name: "bridge", model: "coding-agent", served: () => bridge.completions.map((r) => r.body) },
];

const tools: Anthropic.Tool[] = [
  { name: "get_weather", description: "The weather now", input_schema: { type: "object", properties: { location: { type: "string" }, unit: { type: "string", enum: ["celsius", "fahrenheit"] } }, required: ["location"] } },
  { name: "get_time", description: "The time now", input_schema: { type: "object", properties: { timezone: { type: "string" } }, required: ["timezone"] } },
];

const client = (name: string, extra: Partial<ConstructorParameters<typeof Anthropic>[0]> = {}) =>
  new Anthropic({ apiKey: keys[name]!, baseURL: w.gw.url, maxRetries: 0, ...extra });

beforeAll(async () => {
  w = await startWorld();
  bridge = await startMockBridge();
  const bridgeId = await registerBridge(w.gw, w.accountToken, bridge.url, bridge.token);
  for (const name of ["anthropic", "openai", "google", "sub"]) keys[name] = w.keys[name]!.rawKey;
  keys.bridge = (await w.createKey([{ provider: "bridge", bridge_instance_id: bridgeId }])).rawKey;
}, 60_000);
afterAll(async () => {
  await w.stop();
  await bridge.stop();
}, 60_000);

describe(`Anthropic Messages API through the official SDK (${storesLabel})`, () => {
  for (const lane of lanes) {
    describe(`${lane.name} lane`, () => {
      test("messages.create answers a Message with text, stop_reason and usage", async () => {
        const m = await client(lane.name).messages.create({
          model: lane.model, max_tokens: 200,
          system: [{ type: "text", text: "You are terse." }],
          messages: [{ role: "user", content: "Say hello" }],
        });
        expect(m.type).toBe("message");
        expect(m.role).toBe("assistant");
        expect(m.id).toMatch(/^msg_/);
        expect(m.content[0]!.type).toBe("text");
        expect((m.content[0] as Anthropic.TextBlock).text.length).toBeGreaterThan(0);
        expect(m.stop_reason).toBe("end_turn");
        expect(m.usage.input_tokens + (m.usage.cache_read_input_tokens ?? 0)).toBeGreaterThan(0);
        expect(m.usage.output_tokens).toBeGreaterThan(0);
      });

      test("messages.stream() emits the full event sequence and finalMessage() equals the streamed text", async () => {
        const s = client(lane.name).messages.stream({ model: lane.model, max_tokens: 200, messages: [{ role: "user", content: "Stream a hello" }] });
        const types: string[] = [];
        let text = "";
        s.on("streamEvent", (e) => types.push(e.type));
        s.on("text", (t) => { text += t; });
        const final = await s.finalMessage();
        expect(types[0]).toBe("message_start");
        expect(types.at(-1)).toBe("message_stop");
        expect(types).toContain("content_block_start");
        expect(types).toContain("content_block_delta");
        expect(types).toContain("content_block_stop");
        expect(types).toContain("message_delta");
        expect(final.content[0]!.type).toBe("text");
        expect((final.content[0] as Anthropic.TextBlock).text).toBe(text);
        expect(final.stop_reason).toBe("end_turn");
        expect(final.usage.output_tokens).toBeGreaterThan(0);
      });

      for (const stream of [false, true]) {
        test(`tool-use round trip${stream ? " (streamed, input_json_delta)" : ""}: the SDK's own assistant message goes back with tool_result blocks`, async () => {
          const c = client(lane.name);
          if (lane.toolReply) lane.enqueue!(lane.toolReply);
          const user: Anthropic.MessageParam = { role: "user", content: "What's the weather in San Francisco and Paris, and the time in Tokyo?" };
          const params = { model: lane.model, max_tokens: 500, tools, tool_choice: { type: "auto" as const }, messages: [user] };
          const first = stream ? await c.messages.stream(params).finalMessage() : await c.messages.create(params);
          expect(first.stop_reason).toBe("tool_use");
          const uses = first.content.filter((b): b is Anthropic.ToolUseBlock => b.type === "tool_use");
          expect(uses.length).toBeGreaterThan(0);
          for (const u of uses) {
            expect(typeof u.id).toBe("string");
            expect(u.input && typeof u.input === "object").toBe(true);
            expect(Object.keys(u.input as object).length).toBeGreaterThan(0);
          }
          const before = lane.served().length;
          const second = await c.messages.create({
            ...params,
            messages: [user, { role: "assistant", content: first.content }, { role: "user", content: uses.map((u) => ({ type: "tool_result" as const, tool_use_id: u.id, content: `result of ${u.name}` })) }],
          });
          expect(second.stop_reason).toBe("end_turn");
          expect(second.content.some((b) => b.type === "text")).toBe(true);
          // The vendor got the history (its mock checks every call is answered).
          expect(lane.served().length).toBe(before + 1);
          expect(JSON.stringify(lane.served().at(-1))).toContain(`result of ${uses[0]!.name}`);
        });
      }

      test("countTokens answers input_tokens", async () => {
        const r = await client(lane.name).messages.countTokens({ model: lane.model, system: "You are terse.", tools, messages: [{ role: "user", content: "How many tokens is this?" }] });
        expect(r.input_tokens).toBeGreaterThan(0);
      });
    });
  }

  test("an unknown key surfaces as the SDK's AuthenticationError (401 authentication_error)", async () => {
    const c = new Anthropic({ apiKey: "gw_unknown_key_0000000000000000", baseURL: w.gw.url, maxRetries: 0 });
    const e = await c.messages.create({ model: "claude-sonnet-4-5-20250929", max_tokens: 10, messages: [{ role: "user", content: "hi" }] }).catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.AuthenticationError);
    expect(e.status).toBe(401);
    expect(e.error).toEqual({ type: "error", error: { type: "authentication_error", message: expect.any(String) } });
  });

  test("the key works in Authorization: Bearer too (authToken)", async () => {
    const c = new Anthropic({ apiKey: null, authToken: keys.openai!, baseURL: w.gw.url, maxRetries: 0 });
    const m = await c.messages.create({ model: "gpt-4.1", max_tokens: 10, messages: [{ role: "user", content: "hi" }] });
    expect(m.type).toBe("message");
  });

  test("a request without max_tokens is the SDK's BadRequestError (400 invalid_request_error)", async () => {
    const e = await client("openai").messages.create({ model: "gpt-4.1", messages: [{ role: "user", content: "hi" }] } as any).catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e.error.error.type).toBe("invalid_request_error");
  });

  test("usage records of /v1/messages carry endpoint messages, tokens and cost", async () => {
    const requestId = `msg-usage-${Date.now()}`;
    await client("openai").messages.create({ model: "gpt-4.1", max_tokens: 20, messages: [{ role: "user", content: "count me" }] }, { headers: { "x-request-id": requestId } });
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows.length).toBe(1);
    expect(rows[0]!.endpoint).toBe("messages");
    expect(rows[0]!.provider).toBe("openai");
    expect(rows[0]!.promptTokens).toBeGreaterThan(0);
  });
});
