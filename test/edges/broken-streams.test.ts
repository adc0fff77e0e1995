// CONTRACT §8 broken streams: an upstream stream that closes cleanly without its protocol's
// terminator (`[DONE]`, `response.completed`, `message_stop`, a final Gemini candidate with
// finishReason) reaches the client as an SSE error event, never a clean end, and its usage record
// says `broken`, on every lane protocol: chat pass-through (openai lanes and bridges speak it),
// Responses pass-through (openai), Messages pass-through (anthropic), and the translated
// anthropic, gemini and sub (Responses) lanes. The Responses error event added after pass-through
// events continues the upstream's sequence_number.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Json } from "../../src/protocols/types.ts";
import { parseSse } from "../protocols/helpers.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { startWorld, usageRowsOf, type World } from "../translation/world.ts";

let w: World;
beforeAll(async () => { w = await startWorld(); }, 120_000);
afterAll(async () => { await w?.stop(); }, 60_000);

let seq = 0;
async function send(rawKey: string, path: string, body: Json, headers: Record<string, string> = {}) {
  const requestId = `broken-${Date.now().toString(36)}-${++seq}`;
  const res = await w.gw.req(path, { token: rawKey, body, headers: { "x-request-id": requestId, ...headers } });
  return { status: res.status, text: await res.text(), requestId };
}
const chat = (model: string) => ({ model, stream: true, messages: [{ role: "user", content: "Hello there" }] });

async function expectBroken(requestId: string) {
  const rows = await usageRowsOf(w.gw, requestId);
  expect(rows).toHaveLength(1);
  expect(rows[0]!.outcome).toBe("broken");
}

describe(`CONTRACT §8: a stream that ends without its terminator is broken (${storesLabel})`, () => {
  test("chat pass-through (openai lane): no [DONE] → SSE error event with the full OpenAI error object, outcome broken", async () => {
    w.openai.enqueue({ dropLast: 1 });
    const r = await send(w.keys.openai!.rawKey, "/v1/chat/completions", chat("gpt-4o-mini"));
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    expect(events.filter((e) => e.data.includes("chat.completion.chunk")).length).toBeGreaterThan(0);
    const last = events.at(-1)!;
    expect(last.event).toBe("error");
    expect(JSON.parse(last.data).error).toEqual({ message: expect.any(String), type: "server_error", param: null, code: "upstream_error" });
    await expectBroken(r.requestId);
  });

  test("the same stream with its [DONE] is a clean end, outcome ok (the check does not fire on complete streams)", async () => {
    const r = await send(w.keys.openai!.rawKey, "/v1/chat/completions", chat("gpt-4o-mini"));
    expect(parseSse(r.text).at(-1)!.data).toBe("[DONE]");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows[0]!.outcome).toBe("ok");
  });

  test("Responses pass-through (openai lane): no response.completed → an error event continuing the upstream's sequence_number, outcome broken", async () => {
    w.openai.enqueue({ dropLast: 1 });
    const r = await send(w.keys.openai!.rawKey, "/v1/responses", { model: "gpt-4o-mini", input: "Hello there", stream: true });
    const events = parseSse(r.text).map((e) => JSON.parse(e.data));
    expect(events.some((e) => e.type === "response.completed")).toBe(false);
    const last = events.at(-1)!;
    expect(last.type).toBe("error");
    expect(last).toMatchObject({ code: "upstream_error", param: null, message: expect.any(String) });
    const before = events.at(-2)!;
    expect(typeof before.sequence_number).toBe("number");
    expect(last.sequence_number).toBe(before.sequence_number + 1);
    await expectBroken(r.requestId);
  });

  test("Messages pass-through (anthropic lane, /v1/messages client): no message_stop → Anthropic error event, outcome broken", async () => {
    w.anthropic.enqueue({ stream: "text.stream.jsonl", dropLast: 1 });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/messages", { model: "claude-sonnet-4-5-20250929", max_tokens: 100, stream: true, messages: [{ role: "user", content: "Hello there" }] }, { "anthropic-version": "2023-06-01" });
    const events = parseSse(r.text);
    expect(events.some((e) => e.event === "message_stop")).toBe(false);
    expect(events.at(-1)!.event).toBe("error");
    await expectBroken(r.requestId);
  });

  test("anthropic lane translated for a chat client: no message_stop → error event, outcome broken", async () => {
    w.anthropic.enqueue({ stream: "text.stream.jsonl", dropLast: 1 });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chat("claude-sonnet-4-5-20250929"));
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    expect(events.at(-1)!.event).toBe("error");
    await expectBroken(r.requestId);
  });

  test("gemini lane: no final candidate with finishReason → error event, outcome broken", async () => {
    w.gemini.enqueue({ stream: "text.stream.jsonl", dropLast: 1 });
    const r = await send(w.keys.google!.rawKey, "/v1/chat/completions", chat("gemini-2.5-flash"));
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    expect(events.at(-1)!.event).toBe("error");
    await expectBroken(r.requestId);
  });

  test("sub lane (Responses upstream) translated for a chat client: no response.completed → error event, outcome broken", async () => {
    w.openai.enqueue({ dropLast: 1 });
    const r = await send(w.keys.sub!.rawKey, "/v1/chat/completions", chat("gpt-5"));
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    expect(events.at(-1)!.event).toBe("error");
    await expectBroken(r.requestId);
  });
});
