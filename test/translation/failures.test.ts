// Translation-path failures through the real gateway: what cannot be expressed is refused before
// the vendor is called, vendor errors fail over or come back by their meaning, stream errors
// before content fail over inside the same response, stream errors after content end the stream
// with an error event in the client's shape, and every attempt is recorded.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import type { Json } from "../../src/protocols/types.ts";
import { parseSse } from "../protocols/helpers.ts";
import { startWorld, usageRowsOf, type World } from "./world.ts";

let w: World;
beforeAll(async () => {
  w = await startWorld();
}, 120_000);
afterAll(async () => {
  await w?.stop();
}, 60_000);

let seq = 0;
async function send(rawKey: string, path: string, body: Json) {
  const requestId = `fail-${Date.now().toString(36)}-${++seq}`;
  const res = await w.gw.req(path, { token: rawKey, body, headers: { "x-request-id": requestId } });
  return { status: res.status, text: await res.text(), requestId, headers: res.headers };
}
const chatBody = (extra: Json = {}) => ({ model: "claude-sonnet-4-5-20250929", messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Hello there" }], ...extra });

describe("what a lane's protocol cannot express", () => {
  test("n > 1, logprobs and temperature > 1 on an Anthropic lane are 400 unsupported_feature naming the parameter; Anthropic is never called", async () => {
    const before = w.anthropic.received.length;
    for (const [extra, name] of [[{ n: 2 }, "`n`"], [{ logprobs: true }, "logprobs"], [{ temperature: 1.7 }, "temperature"]] as const) {
      const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chatBody(extra));
      expect(r.status).toBe(400);
      const body = JSON.parse(r.text);
      expect(body.error.code).toBe("unsupported_feature");
      expect(body.error.type).toBe("invalid_request_error");
      expect(body.error.message).toContain(name);
    }
    expect(w.anthropic.received.length).toBe(before);
  });

  test("CONTRACT §8: a lane that cannot express a parameter fails over like any lane failure (recorded as unsupported_feature); the next lane serves", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.openai!]);
    const before = w.anthropic.received.length;
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody({ model: "gpt-4o-mini", n: 2 }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).object).toBe("chat.completion");
    expect(w.anthropic.received.length).toBe(before);
    const rows = await usageRowsOf(w.gw, r.requestId);
    const byLane = rows.sort((a, b) => (a.laneIndex ?? 0) - (b.laneIndex ?? 0)).map((x) => [x.provider, x.outcome, x.errorCode]);
    expect(byLane).toEqual([["anthropic", "error", "unsupported_feature"], ["openai", "ok", null]]);
  });

  test("CONTRACT §8: 400 unsupported_feature naming the parameter (in `param` too) only when no lane of the chain can serve", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.google!]);
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody({ logprobs: true }));
    expect(r.status).toBe(400);
    const err = JSON.parse(r.text).error;
    expect(err).toMatchObject({ code: "unsupported_feature", type: "invalid_request_error", param: "logprobs" });
    expect(err.message).toContain("logprobs");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows.map((x) => x.errorCode).sort()).toEqual(["unsupported_feature", "unsupported_feature"]);
  });

  test("CONTRACT §8: when the lane that could express it is down, the answer is the lanes' failure (502), not unsupported_feature", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.openai!]);
    w.openai.enqueue({ status: 503 });
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody({ model: "gpt-4o-mini", n: 2 }));
    expect(r.status).toBe(502);
    expect(JSON.parse(r.text).error.code).toBe("upstream_error");
  });

  test("a Responses request needing stored state (previous_response_id) on a Gemini lane is 400 unsupported_feature", async () => {
    const r = await send(w.keys.google!.rawKey, "/v1/responses", { model: "gemini-2.5-flash", input: "hi", previous_response_id: "resp_123" });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ code: "unsupported_feature", message: expect.stringContaining("previous_response_id") });
  });

  test("stop sequences on a chat client served by the Responses-only sub lane are 400 unsupported_feature", async () => {
    const r = await send(w.keys.sub!.rawKey, "/v1/chat/completions", { model: "gpt-5", messages: [{ role: "user", content: "hi" }], stop: ["END"] });
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error).toMatchObject({ code: "unsupported_feature", message: expect.stringContaining("stop") });
  });
});

describe("vendor errors by their meaning", () => {
  test("Anthropic overloaded_error (529) fails over to the next lane; both attempts are recorded", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.google!]);
    w.anthropic.enqueue({ status: 529, error: "overloaded.error.json" });
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody({ model: "gemini-2.5-flash" }));
    expect(r.status).toBe(200);
    expect(JSON.parse(r.text).choices[0].message.content).toBe("gemini answer to: Hello there");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows.map((x) => [x.provider, x.status, x.outcome, x.errorCode]).sort()).toEqual([["anthropic", 529, "error", "overloaded_error"], ["google", 200, "ok", null]]);
  });

  test("Anthropic invalid_request_error (400) goes back to the client without trying the next lane", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.google!]);
    const geminiBefore = w.gemini.received.length;
    w.anthropic.enqueue({ status: 400, error: "invalid-request.error.json" });
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody());
    expect(r.status).toBe(400);
    expect(JSON.parse(r.text).error.message).toContain("messages.0.content");
    expect(w.gemini.received.length).toBe(geminiBefore);
  });

  test("Gemini RESOURCE_EXHAUSTED (429) fails over to the next lane", async () => {
    const key = await w.createKey([w.lanes.google!, w.lanes.anthropic!]);
    w.gemini.enqueue({ status: 429, error: "resource-exhausted.error.json" });
    const r = await send(key.rawKey, "/v1/responses", { model: "gemini-2.5-flash", input: "Hello there" });
    expect(r.status).toBe(200);
    const body = JSON.parse(r.text);
    expect(body.object).toBe("response");
    expect(body.output[0].content[0].text).toBe("anthropic answer to: Hello there");
  });
});

describe("streams", () => {
  test("an Anthropic error event before any content fails over to the next lane inside the same stream", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.google!]);
    w.anthropic.enqueue({ stream: [
      { type: "message_start", message: { id: "msg_x", type: "message", role: "assistant", model: "claude-sonnet-4-5-20250929", content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 12, output_tokens: 1 } } },
      { type: "ping" },
      { type: "error", error: { type: "overloaded_error", message: "Overloaded" } },
    ] });
    const r = await send(key.rawKey, "/v1/chat/completions", chatBody({ stream: true }));
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    expect(events.at(-1)!.data).toBe("[DONE]");
    const text = events.slice(0, -1).map((e) => JSON.parse(e.data)).map((c) => c.choices?.[0]?.delta?.content ?? "").join("");
    expect(text).toBe("gemini answer to: Hello there");
    expect(r.text).not.toContain("overloaded");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows.map((x) => [x.provider, x.outcome]).sort()).toEqual([["anthropic", "broken"], ["google", "ok"]]);
  });

  test("an Anthropic error event after content ends a chat stream with an SSE error event and no [DONE]; the usage seen so far is recorded", async () => {
    w.anthropic.enqueue({ stream: "error-mid-stream.stream.jsonl", eventDelayMs: 40 });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chatBody({ stream: true }));
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    const content = events.filter((e) => e.event === undefined).map((e) => JSON.parse(e.data).choices?.[0]?.delta?.content ?? "").join("");
    expect(content).toBe("Partial ans");
    const last = events.at(-1)!;
    expect(last.event).toBe("error");
    expect(JSON.parse(last.data).error.message).toContain("overloaded_error");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({ provider: "anthropic", outcome: "broken", promptTokens: 30 });
    // CONTRACT §7: the output received counts, not message_start's placeholder of 1 ("Partial ans": two deltas).
    expect(rows[0]!.completionTokens).toBeGreaterThanOrEqual(2);
  });

  test("a Gemini error event after content ends a Responses stream with an error event; no response.completed", async () => {
    w.gemini.enqueue({ stream: "error-mid-stream.stream.jsonl", eventDelayMs: 40 });
    const r = await send(w.keys.google!.rawKey, "/v1/responses", { model: "gemini-2.5-flash", input: "Hello there", stream: true });
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    const types = events.map((e) => e.event);
    expect(types[0]).toBe("response.created");
    expect(types).toContain("response.output_text.delta");
    expect(types).not.toContain("response.completed");
    expect(types).toContain("error");
    const err = JSON.parse(events.find((e) => e.event === "error")!.data);
    expect(err).toMatchObject({ type: "error", message: expect.stringContaining("UNAVAILABLE") });
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows[0]).toMatchObject({ provider: "google", outcome: "broken", promptTokens: 9 });
  });

  test("an error after content on a Responses stream translated from an Anthropic lane continues sequence_number and ends with response.failed carrying the error", async () => {
    w.anthropic.enqueue({ stream: "error-mid-stream.stream.jsonl", eventDelayMs: 40 });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/responses", { model: "claude-sonnet-4-5-20250929", input: "Hello there", stream: true });
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    const data = events.map((e) => JSON.parse(e.data));
    expect(data.map((d) => d.sequence_number)).toEqual(data.map((_, i) => i));
    expect(events.map((e) => e.event).slice(-2)).toEqual(["error", "response.failed"]);
    expect(data.at(-2)).toMatchObject({ type: "error", message: expect.stringContaining("overloaded_error") });
    const failed = data.at(-1)!.response;
    expect(failed).toMatchObject({ id: data[0].response.id, status: "failed", error: { message: expect.stringContaining("overloaded_error") } });
    expect(failed.output[0].content[0].text).toBe("Partial ans");
    expect(events.map((e) => e.event)).not.toContain("response.completed");
  });

  test("content and an error event in one upstream read: the content decoded before the error reaches a chat client before the error event", async () => {
    w.anthropic.enqueue({ stream: "error-mid-stream.stream.jsonl", oneWrite: true });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chatBody({ stream: true }));
    expect(r.status).toBe(200);
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    const content = events.filter((e) => e.event === undefined).map((e) => JSON.parse(e.data).choices?.[0]?.delta?.content ?? "").join("");
    expect(content).toBe("Partial ans");
    expect(events.at(-1)!.event).toBe("error");
    expect(JSON.parse(events.at(-1)!.data).error.message).toContain("overloaded_error");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows.map((x) => [x.provider, x.outcome])).toEqual([["anthropic", "broken"]]);
  });

  test("content and an error event in one upstream read: a Responses client gets the text, then error and response.failed in sequence", async () => {
    w.anthropic.enqueue({ stream: "error-mid-stream.stream.jsonl", oneWrite: true });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/responses", { model: "claude-sonnet-4-5-20250929", input: "Hello there", stream: true });
    const data = parseSse(r.text).map((e) => JSON.parse(e.data));
    expect(data.filter((d) => d.type === "response.output_text.delta").map((d) => d.delta).join("")).toBe("Partial ans");
    expect(data.map((d) => d.type).slice(-2)).toEqual(["error", "response.failed"]);
    expect(data.map((d) => d.sequence_number)).toEqual(data.map((_, i) => i));
  });

  test("a stream cut off by the vendor before its end is an error at the client, not a clean finish", async () => {
    w.anthropic.enqueue({ stream: "truncated.stream.jsonl" });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chatBody({ stream: true }));
    const events = parseSse(r.text);
    expect(events.some((e) => e.data === "[DONE]")).toBe(false);
    expect(events.at(-1)!.event).toBe("error");
  });

  test("usage missing from a translated stream: the attempt is still recorded, with the gateway's estimate", async () => {
    w.anthropic.enqueue({ stream: "no-usage.stream.jsonl" });
    const r = await send(w.keys.anthropic!.rawKey, "/v1/chat/completions", chatBody({ stream: true, stream_options: { include_usage: true } }));
    const events = parseSse(r.text);
    expect(events.at(-1)!.data).toBe("[DONE]");
    const rows = await usageRowsOf(w.gw, r.requestId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.outcome).toBe("ok");
    expect(rows[0]!.promptTokens).toBeGreaterThan(0);
    expect(rows[0]!.costUsd).toBeGreaterThan(0);
  });

  test("a chat stream delivered one byte at a time (split inside UTF-8 characters and CRLF blank lines) arrives intact through the Gemini lane", async () => {
    w.gemini.enqueue({ stream: "text.stream.jsonl", byteByByte: true });
    const r = await send(w.keys.google!.rawKey, "/v1/chat/completions", { model: "gemini-2.5-flash", messages: [{ role: "user", content: "hi" }], stream: true, stream_options: { include_usage: true } });
    const chunks = parseSse(r.text).filter((e) => e.data !== "[DONE]").map((e) => JSON.parse(e.data));
    expect(chunks.map((c) => c.choices[0]?.delta?.content ?? "").join("")).toBe("Hello — ça va? 晴れ ☀️🎉");
    expect(chunks.at(-1)!.usage).toMatchObject({ prompt_tokens: 11, completion_tokens: 21, prompt_tokens_details: { cached_tokens: 2 } });
  });
});
