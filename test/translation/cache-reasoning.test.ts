// A cached answer's reasoning replays as the live answer carried it, in the client's protocol, as
// JSON and as a stream, whichever of the two stored it (CONTRACT §8 "Response cache",
// docs/caching.md): Anthropic thinking blocks with their signatures and redacted blocks, OpenAI
// Responses reasoning items with every summary part and their encrypted content, Gemini thought
// summaries as a chat client's reasoning_content. The upstreams are the vendor mocks, answering
// in each vendor's own wire format; streamed Responses hits are checked against OpenAI's
// published schemas, Messages hits read by the official Anthropic SDK.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import Anthropic from "@anthropic-ai/sdk";
import { parseSse } from "../protocols/helpers.ts";
import { expectValid, expectValidEvent, liveErrors } from "./openai-schema.ts";
import { startWorld, type World } from "./world.ts";

const events = (text: string) => parseSse(text).filter((e) => e.data && e.data !== "[DONE]").map((e) => JSON.parse(e.data));

// ---- the vendors' answers, in their own wire formats ----
const SIGNATURE = "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDYTFWHsig+/Example==";
const REDACTED = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpPkNRj2YfWXGmKDxH4mPnZ5sQ7vB5URj";
const THINKING = "The user asks for 2 + 2. That is 4.";
const anthropicMessage = {
  id: "msg_01XFDUDYJgAACzvnptvVoYEL", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929",
  content: [{ type: "thinking", thinking: THINKING, signature: SIGNATURE }, { type: "redacted_thinking", data: REDACTED }, { type: "text", text: "2 + 2 = 4." }],
  stop_reason: "end_turn", stop_sequence: null,
  usage: { input_tokens: 40, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 30 },
};
const anthropicStream = [
  { type: "message_start", message: { ...anthropicMessage, content: [], stop_reason: null, usage: { ...anthropicMessage.usage, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "thinking", thinking: "", signature: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "The user asks for 2 + 2. " } },
  { type: "content_block_delta", index: 0, delta: { type: "thinking_delta", thinking: "That is 4." } },
  { type: "content_block_delta", index: 0, delta: { type: "signature_delta", signature: SIGNATURE } },
  { type: "content_block_stop", index: 0 },
  { type: "content_block_start", index: 1, content_block: { type: "redacted_thinking", data: REDACTED } },
  { type: "content_block_stop", index: 1 },
  { type: "content_block_start", index: 2, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 2, delta: { type: "text_delta", text: "2 + 2 = 4." } },
  { type: "content_block_stop", index: 2 },
  { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 30 } },
  { type: "message_stop" },
];

const SUMMARY = ["**Adding two numbers**\n\nThe sum of 2 and 2.", "**Answering**\n\nSay 4."];
const ENCRYPTED = "gAAAAABoISQ7g2x_PxpGr8Tp0ZBLkmB9W3bkGdVbQxXw2_example_encrypted_reasoning==";
const rsId = "rs_68212a3c1f0c8191b4d0a1e5f0c3b2a10a8c7d6e5f4a3b2c";
const msgId = "msg_68212a3e2b748191a1e2c3d4e5f60718293a4b5c6d7e8f90";
const reasoningItem = { id: rsId, type: "reasoning", summary: SUMMARY.map((text) => ({ type: "summary_text", text })), encrypted_content: ENCRYPTED };
const messageItem = { id: msgId, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text: "4", annotations: [], logprobs: [] }] };
const responseBase = {
  id: "resp_68212a3b9c7c8191a3f4e5d6c7b8a9f00123456789abcdef", object: "response", created_at: 1747000000, status: "completed", background: false, error: null,
  incomplete_details: null, instructions: null, max_output_tokens: null, model: "gpt-5-mini-2025-08-07", output: [reasoningItem, messageItem],
  parallel_tool_calls: true, previous_response_id: null, reasoning: { effort: "medium", summary: "detailed" }, store: false, temperature: 1,
  text: { format: { type: "text" } }, tool_choice: "auto", tools: [], top_p: 1, truncation: "disabled", metadata: {},
  usage: { input_tokens: 20, input_tokens_details: { cached_tokens: 0 }, output_tokens: 90, output_tokens_details: { reasoning_tokens: 64 }, total_tokens: 110 },
};
function responsesStream() {
  let sequence_number = 0;
  const ev = (type: string, f: Record<string, unknown>) => ({ type, sequence_number: sequence_number++, ...f });
  const inProgress = { ...responseBase, status: "in_progress", output: [], usage: null };
  const out = [ev("response.created", { response: inProgress }), ev("response.in_progress", { response: inProgress }),
    ev("response.output_item.added", { output_index: 0, item: { id: rsId, type: "reasoning", summary: [] } })];
  SUMMARY.forEach((text, summary_index) => {
    const at = { item_id: rsId, output_index: 0, summary_index };
    out.push(ev("response.reasoning_summary_part.added", { ...at, part: { type: "summary_text", text: "" } }));
    const half = Math.floor(text.length / 2);
    out.push(ev("response.reasoning_summary_text.delta", { ...at, delta: text.slice(0, half) }), ev("response.reasoning_summary_text.delta", { ...at, delta: text.slice(half) }));
    out.push(ev("response.reasoning_summary_text.done", { ...at, text }), ev("response.reasoning_summary_part.done", { ...at, part: { type: "summary_text", text } }));
  });
  const m = { item_id: msgId, output_index: 1, content_index: 0 };
  out.push(
    ev("response.output_item.done", { output_index: 0, item: reasoningItem }),
    ev("response.output_item.added", { output_index: 1, item: { id: msgId, type: "message", status: "in_progress", role: "assistant", content: [] } }),
    ev("response.content_part.added", { ...m, part: { type: "output_text", text: "", annotations: [], logprobs: [] } }),
    ev("response.output_text.delta", { ...m, delta: "4", logprobs: [] }),
    ev("response.output_text.done", { ...m, text: "4", logprobs: [] }),
    ev("response.content_part.done", { ...m, part: messageItem.content[0] }),
    ev("response.output_item.done", { output_index: 1, item: messageItem }),
    ev("response.completed", { response: responseBase }),
  );
  return out;
}

const THOUGHT = "**Summing**\n\nTwo plus two makes four.";
const geminiUsage = { promptTokenCount: 8, candidatesTokenCount: 6, thoughtsTokenCount: 12, totalTokenCount: 26 };
const geminiJson = {
  candidates: [{ content: { parts: [{ text: THOUGHT, thought: true }, { text: "2 + 2 = 4." }], role: "model" }, finishReason: "STOP", index: 0 }],
  usageMetadata: geminiUsage, modelVersion: "gemini-2.5-flash", responseId: "tTCwacuEBMvnitYP06qsgQY",
};
const geminiStream = [
  { candidates: [{ content: { parts: [{ text: THOUGHT, thought: true }], role: "model" }, index: 0 }], usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 }, modelVersion: "gemini-2.5-flash", responseId: "tTCwacuEBMvnitYP06qsgQY" },
  { candidates: [{ content: { parts: [{ text: "2 + 2 = 4." }], role: "model" }, finishReason: "STOP", index: 0 }], usageMetadata: geminiUsage, modelVersion: "gemini-2.5-flash", responseId: "tTCwacuEBMvnitYP06qsgQY" },
];

// ---- the world ----
let w: World;
const raw: Record<string, string> = {};
beforeAll(async () => {
  w = await startWorld();
  for (const lane of ["anthropic", "openai", "google"]) {
    const k = w.keys[lane]!;
    const r = await w.gw.call(`/v1/organizations/routing-keys?id=${k.keyId}`, { method: "PATCH", token: w.accountToken, body: { cache: { ttl_seconds: 600 } } });
    expect(r.status).toBe(200);
    raw[lane] = k.rawKey;
  }
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

let seq = 0;
const question = () => `What is 2 + 2? (${Date.now()}-${++seq})`;
async function post(lane: string, path: string, body: Record<string, unknown>) {
  const r = await w.gw.req(path, { token: raw[lane]!, body });
  return { status: r.status, xcache: r.headers.get("x-cache"), text: await r.text() };
}

describe("CONTRACT §8: a cached answer's reasoning replays as the live answer carried it", () => {
  for (const first of ["stream", "json"] as const) {
    test(`Anthropic thinking (signature, redacted block) on /v1/messages: a ${first} answer stored, JSON and stream hits carry it`, async () => {
      const body = { model: "claude-sonnet-4-5-20250929", max_tokens: 2048, thinking: { type: "enabled", budget_tokens: 1024 }, messages: [{ role: "user", content: question() }] };
      w.anthropic.enqueue({ json: anthropicMessage, stream: anthropicStream });
      const live = await post("anthropic", "/v1/messages", { ...body, ...(first === "stream" ? { stream: true } : {}) });
      expect([live.status, live.xcache]).toEqual([200, "MISS"]);
      const expected = [
        { type: "thinking", thinking: THINKING, signature: SIGNATURE },
        { type: "redacted_thinking", data: REDACTED },
        { type: "text", text: "2 + 2 = 4." },
      ];
      const client = new Anthropic({ apiKey: raw.anthropic!, baseURL: w.gw.url, maxRetries: 0 });
      const { data, response } = await client.messages.create(body as any).withResponse();
      expect(response.headers.get("x-cache")).toBe("HIT");
      expect(data.content.map((b: any) => ({ ...b, citations: undefined }))).toEqual(expected.map((b) => ({ ...b, citations: undefined })) as any);
      const streamed = await client.messages.stream(body as any).finalMessage();
      expect(streamed.content.map((b: any) => ({ ...b, citations: undefined }))).toEqual(expected.map((b) => ({ ...b, citations: undefined })) as any);
      // The raw events, as Anthropic sends them: the signature in a signature_delta before the block's stop.
      const sse = await post("anthropic", "/v1/messages", { ...body, stream: true });
      expect(sse.xcache).toBe("HIT");
      const evs = events(sse.text);
      const sig = evs.findIndex((e) => e.delta?.type === "signature_delta");
      expect(evs[sig].delta.signature).toBe(SIGNATURE);
      expect(evs[sig + 1]).toEqual({ type: "content_block_stop", index: evs[sig].index });
      expect(w.anthropic.received.filter((r: any) => r.body?.messages?.[0]?.content === body.messages[0]!.content).length).toBe(1);
    });

    test(`OpenAI Responses reasoning (two summary parts, encrypted content) on /v1/responses: a ${first} answer stored, JSON and stream hits carry it`, async () => {
      const body = { model: "gpt-5-mini", input: question(), reasoning: { effort: "medium", summary: "detailed" }, include: ["reasoning.encrypted_content"], store: false };
      w.openai.enqueue({ json: responseBase, stream: responsesStream() });
      const live = await post("openai", "/v1/responses", { ...body, ...(first === "stream" ? { stream: true } : {}) });
      expect([live.status, live.xcache]).toEqual([200, "MISS"]);
      // A hit replays the live answer with every field it had: held to the schema as far as the live answer was.
      const tolerated = liveErrors("responses", first === "stream" ? { events: events(live.text) } : { json: JSON.parse(live.text) });
      const hit = await post("openai", "/v1/responses", body);
      expect(hit.xcache).toBe("HIT");
      const j = JSON.parse(hit.text);
      expectValid("Response", j, "JSON hit", tolerated);
      const rs = j.output[0];
      expect([rs.type, rs.summary, rs.encrypted_content]).toEqual(["reasoning", SUMMARY.map((text) => ({ type: "summary_text", text })), ENCRYPTED]);
      expect(rs.id).not.toBe(rsId);
      expect(j.output[1].content[0].text).toBe("4");

      const sse = await post("openai", "/v1/responses", { ...body, stream: true });
      expect(sse.xcache).toBe("HIT");
      const evs = events(sse.text);
      evs.forEach((e, i) => {
        expectValidEvent(e, `stream hit event ${i}`, tolerated);
      });
      expect(evs.map((e) => e.sequence_number)).toEqual(evs.map((_, i) => i));
      const deltas = (k: number) => evs.filter((e) => e.type === "response.reasoning_summary_text.delta" && e.summary_index === k).map((e) => e.delta).join("");
      expect([deltas(0), deltas(1)]).toEqual(SUMMARY);
      const done = evs.find((e) => e.type === "response.output_item.done" && e.item.type === "reasoning");
      expect([done.item.summary.map((p: any) => p.text), done.item.encrypted_content]).toEqual([SUMMARY, ENCRYPTED]);
      // The reasoning item ends before the answer's message begins, as OpenAI streams it.
      expect(evs.indexOf(done)).toBeLessThan(evs.findIndex((e) => e.type === "response.output_item.added" && e.item.type === "message"));
      const completed = evs.at(-1);
      expect(completed.type).toBe("response.completed");
      expect(completed.response.output[0]).toMatchObject({ type: "reasoning", encrypted_content: ENCRYPTED });
    });

    test(`Gemini thought summaries reach a chat client as reasoning_content: a ${first} answer stored, JSON and stream hits carry it`, async () => {
      const body = { model: "gemini-2.5-flash", messages: [{ role: "user", content: question() }], reasoning_effort: "low" };
      w.gemini.enqueue({ json: geminiJson, stream: geminiStream });
      const live = await post("google", "/v1/chat/completions", { ...body, ...(first === "stream" ? { stream: true } : {}) });
      expect([live.status, live.xcache]).toEqual([200, "MISS"]);
      const liveReasoning = first === "stream"
        ? events(live.text).map((c) => c.choices?.[0]?.delta?.reasoning_content ?? "").join("")
        : JSON.parse(live.text).choices[0].message.reasoning_content;
      expect(liveReasoning).toBe(THOUGHT);
      const hit = await post("google", "/v1/chat/completions", body);
      expect(hit.xcache).toBe("HIT");
      const m = JSON.parse(hit.text).choices[0].message;
      expect([m.reasoning_content, m.content, m.reasoning_blocks]).toEqual([THOUGHT, "2 + 2 = 4.", undefined]);
      const sse = await post("google", "/v1/chat/completions", { ...body, stream: true });
      expect(sse.xcache).toBe("HIT");
      const chunks = events(sse.text);
      expect(chunks.map((c) => c.choices?.[0]?.delta?.reasoning_content ?? "").join("")).toBe(THOUGHT);
      expect(chunks.map((c) => c.choices?.[0]?.delta?.content ?? "").join("")).toBe("2 + 2 = 4.");
      for (const c of chunks) expect(c.choices?.[0]?.delta?.reasoning_end).toBeUndefined();
      for (const [i, c] of chunks.entries()) expectValid("CreateChatCompletionStreamResponse", c, `chunk ${i}`);
    });
  }
});
