// POST /v1/messages on the wire: a recorded coding-agent request (long system prompt with
// cache_control blocks, 20 tools, metadata, beta headers, a multi-turn tool history) passes through
// an Anthropic lane byte for byte and translates on an OpenAI lane with every tool call intact;
// the client's anthropic-version/beta reach Anthropic lanes; count_tokens is exact or a marked
// estimate; errors come in Anthropic's shape and statuses, a failure after the first event is an
// `error` event, and the key's fallback chain applies.
import Anthropic from "@anthropic-ai/sdk";
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { estimateInputTokens } from "../../src/relay/count-tokens.ts";
import { frameEvents } from "../fixtures/index.ts";
import { resolveEvents } from "../fixtures/replay.ts";
import { storesLabel } from "../helpers/gateway.ts";
import { startWorld, usageRowsOf, type World } from "../translation/world.ts";
import { expectPassThroughStream } from "../relay/fixtures.ts";

const agentRequest = JSON.parse(readFileSync(join(import.meta.dir, "../fixtures/anthropic/coding-agent.request.json"), "utf8"));
const BETA = "interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14";
let w: World;

const post = (path: string, key: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${w.gw.url}${path}`, { method: "POST", headers: { "x-api-key": key, "content-type": "application/json", "anthropic-version": "2023-06-01", ...headers }, body: typeof body === "string" ? body : JSON.stringify(body) });

beforeAll(async () => {
  w = await startWorld();
}, 60_000);
afterAll(async () => {
  await w.stop();
}, 60_000);

describe(`/v1/messages on the wire (${storesLabel})`, () => {
  test("a recorded coding-agent request passes through an Anthropic lane byte for byte, beta headers included, and its stream comes back unchanged but for message_delta's cost (CONTRACT §9)", async () => {
    w.anthropic.enqueue({ stream: "tool-use.stream.jsonl" });
    const sent = JSON.stringify(agentRequest);
    const requestId = `agent-pass-${Date.now()}`;
    const res = await post("/v1/messages", w.keys.anthropic!.rawKey, sent, { "anthropic-beta": BETA, "x-request-id": requestId });
    expect(res.status).toBe(200);
    expect(res.headers.get("content-type")).toContain("text/event-stream");
    const got = await res.text();
    const cost = expectPassThroughStream(got, frameEvents("anthropic", resolveEvents("anthropic", "tool-use.stream.jsonl")).join(""));
    const at = w.anthropic.served.at(-1)!;
    expect(at.raw).toBe(sent);
    expect(at.headers["anthropic-beta"]).toBe(BETA);
    expect(at.headers["anthropic-version"]).toBe("2023-06-01");
    expect(at.headers["x-api-key"]).toBe(w.anthropic.apiKey);
    expect(JSON.stringify(at.headers)).not.toContain(w.keys.anthropic!.rawKey);
    // The usage tap read message_start (input) and message_delta (output) without re-encoding.
    const rows = await usageRowsOf(w.gw, requestId);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.endpoint).toBe("messages");
    expect([rows[0]!.promptTokens, rows[0]!.completionTokens]).toEqual([472, 89]);
    expect(cost).toBe(rows[0]!.costUsd);
  });

  test("the same request translates on an OpenAI lane with every tool call, tool result and tool definition intact", async () => {
    const res = await post("/v1/messages", w.keys.openai!.rawKey, { ...agentRequest, model: "gpt-4.1", stream: false }, { "anthropic-beta": BETA });
    expect(res.status).toBe(200);
    const msg = (await res.json()) as any;
    expect(msg.type).toBe("message");
    const chat = w.openai.served.filter((r) => r.path === "/v1/chat/completions").at(-1)!.body;
    expect(chat.model).toBe("gpt-4.1");
    expect(chat.max_completion_tokens).toBe(32000); // OpenAI's field for every chat model
    expect(chat.user).toBe(agentRequest.metadata.user_id);
    expect(chat.tool_choice).toBe("auto");
    expect(chat.messages[0]).toEqual({ role: "system", content: agentRequest.system.map((b: any) => ({ type: "text", text: b.text })) });
    // Every tool definition, schema untouched.
    expect(chat.tools).toHaveLength(20);
    chat.tools.forEach((t: any, i: number) => {
      const a = agentRequest.tools[i];
      expect(t).toEqual({ type: "function", function: { name: a.name, description: a.description, parameters: a.input_schema } });
    });
    // Every tool_use → a tool call with the same id, name and arguments; every tool_result → a tool message.
    const uses = agentRequest.messages.flatMap((m: any) => (m.role === "assistant" ? m.content.filter((b: any) => b.type === "tool_use") : []));
    const calls = chat.messages.flatMap((m: any) => m.tool_calls ?? []);
    expect(uses.length).toBe(6);
    expect(calls.map((c: any) => ({ id: c.id, name: c.function.name, input: JSON.parse(c.function.arguments) }))).toEqual(uses.map((u: any) => ({ id: u.id, name: u.name, input: u.input })));
    const results = agentRequest.messages.flatMap((m: any) => (m.role === "user" && Array.isArray(m.content) ? m.content.filter((b: any) => b.type === "tool_result") : []));
    const toolMsgs = chat.messages.filter((m: any) => m.role === "tool");
    expect(toolMsgs.map((m: any) => m.tool_call_id)).toEqual(results.map((r: any) => r.tool_use_id));
    expect(toolMsgs.find((m: any) => m.tool_call_id === "toolu_01Zx1cV3bN5mQ7wE9rT1yU3i").content).toStartWith("Error: <tool_use_error>");
    // Each tool message follows the assistant turn that called it; the user's own text comes after the results.
    const last = chat.messages.at(-1);
    expect(last).toEqual({ role: "user", content: [{ type: "text", text: "Go on, and add the regression test too." }] });
    expect(JSON.stringify(chat)).not.toContain("cache_control");
  });

  test("without anthropic-version the Anthropic lane still gets the version the gateway speaks", async () => {
    const res = await fetch(`${w.gw.url}/v1/messages`, { method: "POST", headers: { authorization: `Bearer ${w.keys.anthropic!.rawKey}`, "content-type": "application/json" }, body: JSON.stringify({ model: "claude-sonnet-4-5-20250929", max_tokens: 20, messages: [{ role: "user", content: "hi" }] }) });
    expect(res.status).toBe(200);
    const at = w.anthropic.served.at(-1)!;
    expect(at.headers["anthropic-version"]).toBe("2023-06-01");
    expect(at.headers["anthropic-beta"]).toBeUndefined();
  });

  test("count_tokens is forwarded to an Anthropic lane (exact) and estimated elsewhere (marked)", async () => {
    const body = { model: "claude-sonnet-4-5-20250929", system: agentRequest.system, tools: agentRequest.tools, messages: agentRequest.messages };
    const exact = await post("/v1/messages/count_tokens", w.keys.anthropic!.rawKey, body, { "anthropic-beta": BETA });
    expect(exact.status).toBe(200);
    expect(exact.headers.get("x-token-count")).toBe("exact");
    const at = w.anthropic.served.at(-1)!;
    expect(at.path).toBe("/v1/messages/count_tokens");
    expect(at.headers["anthropic-beta"]).toBe(BETA);
    expect(at.body).toEqual(body);
    const mockCount = Math.ceil(JSON.stringify([body.system, body.messages, body.tools]).length / 3);
    expect(await exact.json()).toEqual({ input_tokens: mockCount });

    const est = await post("/v1/messages/count_tokens", w.keys.google!.rawKey, body);
    expect(est.status).toBe(200);
    expect(est.headers.get("x-token-count")).toBe("estimated");
    expect(await est.json()).toEqual({ input_tokens: estimateInputTokens(body) });
  });

  test("count_tokens moves past an Anthropic lane that fails to the next lane (here: an estimate)", async () => {
    const broken = await w.gw.call("/v1/organizations/credentials", { method: "POST", token: w.accountToken, body: { provider: "anthropic", api_key: "sk-ant-wrong-key-000000" } });
    const k2 = await w.createKey([{ provider: "anthropic", credential_id: broken.body.credential.id }, w.lanes.openai!]);
    const r = await post("/v1/messages/count_tokens", k2.rawKey, { model: "claude-sonnet-4-5-20250929", messages: [{ role: "user", content: "hi" }] });
    expect(r.status).toBe(200);
    expect(r.headers.get("x-token-count")).toBe("estimated");
  });

  test("an Anthropic lane that is overloaded (529) falls over to the next lane of the chain", async () => {
    const key = await w.createKey([w.lanes.anthropic!, w.lanes.openai!]);
    w.anthropic.enqueue({ status: 529, error: "overloaded.error.json" });
    const m = await new Anthropic({ apiKey: key.rawKey, baseURL: w.gw.url, maxRetries: 0 }).messages.create({ model: "claude-sonnet-4-5-20250929", max_tokens: 50, messages: [{ role: "user", content: "fall over" }] });
    expect(m.type).toBe("message");
    expect(w.openai.served.at(-1)!.body.messages.at(-1)).toEqual({ role: "user", content: "fall over" });
  });

  test("an upstream invalid_request_error comes back as the SDK's BadRequestError", async () => {
    w.anthropic.enqueue({ status: 400, error: "invalid-request.error.json" });
    const e = await new Anthropic({ apiKey: w.keys.anthropic!.rawKey, baseURL: w.gw.url, maxRetries: 0 }).messages.create({ model: "claude-sonnet-4-5-20250929", max_tokens: 50, messages: [{ role: "user", content: "x" }] }).catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e.error.type).toBe("error");
    expect(e.error.error.type).toBe("invalid_request_error");
  });

  test("a budget refusal is 402 billing_error in Anthropic's shape", async () => {
    const created = await w.gw.call("/v1/organizations/routing-keys", { method: "POST", token: w.accountToken, body: { label: "tiny", providers: [w.lanes.openai], monthly_budget_usd: 0.0000001 } });
    const res = await post("/v1/messages", created.body.raw_key, { model: "gpt-4.1", max_tokens: 4000, messages: [{ role: "user", content: "hi" }] });
    expect(res.status).toBe(402);
    const body = await res.json();
    expect(body).toEqual({ type: "error", error: { type: "billing_error", message: expect.stringContaining("budget") } });
  });

  test("a stream that fails after its first event ends with an Anthropic `error` event, no message_stop", async () => {
    w.gemini.enqueue({ stream: "error-mid-stream.stream.jsonl", eventDelayMs: 20 });
    const res = await post("/v1/messages", w.keys.google!.rawKey, { model: "gemini-2.5-flash", max_tokens: 50, stream: true, messages: [{ role: "user", content: "x" }] });
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toStartWith("event: message_start\n");
    expect(text).toContain('"text_delta","text":"Partial ans"');
    expect(text).not.toContain("message_stop");
    const tail = text.trim().split("\n\n").at(-1)!;
    expect(tail.split("\n")[0]).toBe("event: error");
    const data = JSON.parse(tail.split("\n")[1]!.slice(6));
    expect(data.type).toBe("error");
    expect(data.error.type).toBe("api_error");
    expect(typeof data.error.message).toBe("string");
  });

  test("CONTRACT §8: a lane that cannot express a parameter (a server tool on an OpenAI lane) fails over to one that can", async () => {
    const key = await w.createKey([w.lanes.openai!, w.lanes.anthropic!]);
    const before = w.openai.served.length;
    const m = await new Anthropic({ apiKey: key.rawKey, baseURL: w.gw.url, maxRetries: 0 }).messages.create({
      model: "claude-sonnet-4-5-20250929", max_tokens: 50, messages: [{ role: "user", content: "search it" }],
      tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 2 } as any],
    });
    expect(m.type).toBe("message");
    expect(w.openai.served.length).toBe(before);
    expect(w.anthropic.served.at(-1)!.body.tools).toEqual([{ type: "web_search_20250305", name: "web_search", max_uses: 2 }]);
  });

  test("CONTRACT §8: a parameter no lane of the key can express is 400 invalid_request_error naming it", async () => {
    const e = await new Anthropic({ apiKey: w.keys.openai!.rawKey, baseURL: w.gw.url, maxRetries: 0 }).messages.create({
      model: "gpt-4.1", max_tokens: 50, messages: [{ role: "user", content: "x" }],
      tools: [{ type: "web_search_20250305", name: "web_search", max_uses: 2 } as any],
    }).catch((x) => x);
    expect(e).toBeInstanceOf(Anthropic.BadRequestError);
    expect(e.error.error.message).toContain("web_search_20250305");
  });

  test("other methods answer 405 in Anthropic's shape", async () => {
    const r = await fetch(`${w.gw.url}/v1/messages`, { headers: { "x-api-key": w.keys.openai!.rawKey } });
    expect(r.status).toBe(405);
    expect(((await r.json()) as any).type).toBe("error");
  });
});
