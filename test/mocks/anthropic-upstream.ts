// A mock Anthropic Messages API: a real Bun HTTP server on loopback that tests point the gateway
// at (PROVIDER_ANTHROPIC_BASE_URL = mock.url). POST /v1/messages and POST /v1/messages/count_tokens
// (same checks, without max_tokens and stream, answering {"input_tokens": n}).
//
// It checks what the gateway sends as strictly as Anthropic does and answers the vendor's error
// shape ({"type":"error","error":{"type","message"}}) otherwise: the x-api-key and
// anthropic-version headers, required fields (model, max_tokens, messages), no unknown fields,
// temperature within 0..1, roles alternating and starting with user, block types per role,
// non-empty text, every tool_use answered by tool_result blocks leading the next user turn and
// every tool_result answering a tool_use of the turn before, tool names and schemas, tool_choice,
// and extended thinking's rules (a budget of at least 1024 below max_tokens; no temperature but 1,
// no top_k, top_p of at least 0.95, no forced tool; an assistant turn whose tool_use the request
// answers must start with a thinking block).
// Valid requests get the next queued reply (fixtures under test/fixtures/anthropic/, framed as
// Anthropic frames them: `event: <type>\ndata: <json>\n\n`), or a generated answer.
import { frameEvents } from "../fixtures/index.ts";
import { headersOf, isObject, lastUserText, resolveEvents, resolveJson, sseBody, type Received, type VendorReply } from "../fixtures/replay.ts";
import { serveLoopback } from "./scaffold.ts";
import { anthropicBatchMock, type AnthropicBatchMock } from "./anthropic-batch.ts";

/** What Anthropic bills one accepted request for: input, and every output token generated before any disconnect. */
export interface AnthropicBill {
  input: number;
  output: number;
}

export interface MockAnthropic {
  /** One bill per generated answer (replies from fixtures are not billed here), in order. */
  bills: AnthropicBill[];
  /** Base URL (what PROVIDER_ANTHROPIC_BASE_URL takes), e.g. http://127.0.0.1:40123 */
  url: string;
  apiKey: string;
  /** Message Batches (POST /v1/messages/batches and its GET, cancel, results). */
  batch: AnthropicBatchMock;
  received: Received[];
  /** Valid requests only, in order (the ones that were served). */
  readonly served: Received[];
  enqueue(...replies: VendorReply[]): void;
  stop(): Promise<void>;
}

const COUNT_TOP_LEVEL = new Set(["model", "messages", "system", "tools", "tool_choice", "thinking", "mcp_servers", "context_management"]);
const TOP_LEVEL = new Set(["model", "messages", "max_tokens", "system", "metadata", "stop_sequences", "stream", "temperature", "top_p", "top_k", "tools", "tool_choice", "service_tier", "thinking", "container", "mcp_servers", "context_management"]);
const SERVER_TOOL = /^(web_search|web_fetch|bash|text_editor|code_execution|computer|memory)_\d{8}$/;
const USER_BLOCKS = new Set(["text", "image", "document", "tool_result", "search_result"]);
const ASSISTANT_BLOCKS = new Set(["text", "tool_use", "thinking", "redacted_thinking"]);
const IMAGE_TYPES = new Set(["image/jpeg", "image/png", "image/gif", "image/webp"]);

class Invalid extends Error {
  constructor(message: string, readonly status = 400, readonly type = "invalid_request_error") {
    super(message);
  }
}

function check(cond: unknown, message: string): asserts cond {
  if (!cond) throw new Invalid(message);
}

function validateBlock(b: any, where: string, role: string): void {
  check(isObject(b) && typeof b.type === "string", `${where}: Input should be a valid dictionary or object to extract fields from`);
  check((role === "user" ? USER_BLOCKS : ASSISTANT_BLOCKS).has(b.type), `${where}.type: '${b.type}' blocks are not allowed in ${role} messages`);
  switch (b.type) {
    case "text":
      check(typeof b.text === "string", `${where}.text: Field required`);
      check(b.text.length > 0, `${where}: text content blocks must be non-empty`);
      break;
    case "image": {
      const s = b.source;
      check(isObject(s), `${where}.source: Field required`);
      if (s.type === "base64") {
        check(IMAGE_TYPES.has(s.media_type), `${where}.source.media_type: Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'`);
        check(typeof s.data === "string" && s.data.length > 0, `${where}.source.data: Field required`);
      } else {
        check(s.type === "url" && typeof s.url === "string" && /^https?:\/\//.test(s.url), `${where}.source: Input tag '${s.type}' found using 'type' does not match any of the expected tags: 'base64', 'url'`);
      }
      break;
    }
    case "document":
      check(isObject(b.source) && ["base64", "text", "url", "content"].includes(b.source.type), `${where}.source: invalid document source`);
      break;
    case "tool_use":
      check(typeof b.id === "string" && /^[a-zA-Z0-9_-]+$/.test(b.id), `${where}.id: String should match pattern '^[a-zA-Z0-9_-]+$'`);
      check(typeof b.name === "string" && b.name.length > 0, `${where}.name: Field required`);
      check(isObject(b.input), `${where}.input: Input should be a valid dictionary`);
      break;
    case "tool_result":
      check(typeof b.tool_use_id === "string", `${where}.tool_use_id: Field required`);
      if (b.content !== undefined && typeof b.content !== "string") {
        check(Array.isArray(b.content), `${where}.content: Input should be a valid list`);
        b.content.forEach((c: any, i: number) => {
          check(isObject(c) && (c.type === "text" || c.type === "image" || c.type === "document" || c.type === "search_result"), `${where}.content.${i}: tool_result content must be text, image, document or search_result blocks`);
          validateBlock(c, `${where}.content.${i}`, "user");
        });
      }
      break;
  }
}

function validateRequest(req: Request, body: any, apiKey: string, counting = false): void {
  const key = req.headers.get("x-api-key");
  if (key !== apiKey) throw new Invalid("invalid x-api-key", 401, "authentication_error");
  if (!req.headers.get("anthropic-version")) throw new Invalid("anthropic-version: header is required");
  check((req.headers.get("content-type") ?? "").includes("application/json"), "Content-Type must be application/json");
  check(isObject(body), "Body must be a JSON object");
  for (const k of Object.keys(body)) check((counting ? COUNT_TOP_LEVEL : TOP_LEVEL).has(k), `${k}: Extra inputs are not permitted`);
  check(typeof body.model === "string" && body.model.length > 0, "model: Field required");
  if (!counting) check(Number.isInteger(body.max_tokens) && body.max_tokens >= 1, "max_tokens: Field required");
  check(Array.isArray(body.messages) && body.messages.length > 0, "messages: Field required");
  if (body.temperature !== undefined) check(typeof body.temperature === "number" && body.temperature >= 0 && body.temperature <= 1, "temperature: Input should be less than or equal to 1");
  if (body.top_p !== undefined) check(typeof body.top_p === "number" && body.top_p >= 0 && body.top_p <= 1, "top_p: Input should be less than or equal to 1");
  if (body.stream !== undefined) check(typeof body.stream === "boolean", "stream: Input should be a valid boolean");
  if (body.stop_sequences !== undefined) check(Array.isArray(body.stop_sequences) && body.stop_sequences.every((s: unknown) => typeof s === "string" && s.trim() !== ""), "stop_sequences: each stop sequence must contain non-whitespace");
  if (body.metadata !== undefined) {
    check(isObject(body.metadata), "metadata: Input should be a valid dictionary");
    for (const k of Object.keys(body.metadata)) check(k === "user_id", `metadata.${k}: Extra inputs are not permitted`);
  }
  if (body.system !== undefined && typeof body.system !== "string") {
    check(Array.isArray(body.system), "system: Input should be a valid string or list");
    body.system.forEach((b: any, i: number) => {
      check(isObject(b) && b.type === "text", `system.${i}.type: Input should be 'text'`);
      validateBlock(b, `system.${i}`, "user");
    });
  }

  const names = new Set<string>();
  if (body.tools !== undefined) {
    check(Array.isArray(body.tools), "tools: Input should be a valid list");
    body.tools.forEach((t: any, i: number) => {
      check(isObject(t) && typeof t.name === "string" && /^[a-zA-Z0-9_-]{1,128}$/.test(t.name), `tools.${i}.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`);
      check(!names.has(t.name), `tools: Tool names must be unique.`);
      names.add(t.name);
      // Server tools (web search, bash, text editor, code execution…) are typed and versioned, without input_schema.
      if (t.type !== undefined && t.type !== "custom") {
        check(typeof t.type === "string" && SERVER_TOOL.test(t.type), `tools.${i}.type: Input tag '${t.type}' found using 'type' does not match any of the expected tags`);
        return;
      }
      check(isObject(t.input_schema) && t.input_schema.type === "object", `tools.${i}.input_schema.type: Input should be 'object'`);
      for (const k of Object.keys(t)) check(["name", "description", "input_schema", "cache_control", "type"].includes(k), `tools.${i}.${k}: Extra inputs are not permitted`);
    });
  }
  if (body.tool_choice !== undefined) {
    const tc = body.tool_choice;
    check(isObject(tc) && ["auto", "any", "tool", "none"].includes(tc.type), "tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'");
    check(body.tools !== undefined, "tool_choice may only be specified while providing tools");
    if (tc.type === "tool") check(typeof tc.name === "string" && names.has(tc.name), `tool_choice.name: tool '${tc.name}' not found in tools`);
  }

  const thinking = body.thinking;
  if (thinking !== undefined) {
    check(isObject(thinking) && ["enabled", "disabled", "adaptive"].includes(thinking.type), "thinking.type: Input tag found using 'type' does not match any of the expected tags: 'enabled', 'disabled', 'adaptive'");
    if (thinking.type === "enabled") {
      for (const k of Object.keys(thinking)) check(k === "type" || k === "budget_tokens", `thinking.enabled.${k}: Extra inputs are not permitted`);
      check(Number.isInteger(thinking.budget_tokens) && thinking.budget_tokens >= 1024, "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024");
      if (!counting) check(thinking.budget_tokens < body.max_tokens, "`max_tokens` must be greater than `thinking.budget_tokens`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#max-tokens-and-context-window-size");
      check(body.temperature === undefined || body.temperature === 1, "`temperature` may only be set to 1 when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility");
      check(body.top_k === undefined, "`top_k` must be unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility");
      check(body.top_p === undefined || body.top_p >= 0.95, "`top_p` must be greater than or equal to 0.95 or unset when thinking is enabled. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking#feature-compatibility");
      check(!["any", "tool"].includes(body.tool_choice?.type), "Thinking may not be enabled when tool_choice forces tool use.");
      const n = body.messages.length;
      const last = body.messages[n - 1];
      const prev = body.messages[n - 2];
      const blocks = (m: any): any[] => (typeof m?.content === "string" ? [{ type: "text" }] : Array.isArray(m?.content) ? m.content : []);
      if (last?.role === "user" && blocks(last).some((b) => b?.type === "tool_result") && prev?.role === "assistant" && blocks(prev).some((b) => b?.type === "tool_use")) {
        const first = blocks(prev)[0]?.type;
        check(first === "thinking" || first === "redacted_thinking", `messages.${n - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, but found \`${first}\`. When \`thinking\` is enabled, a final \`assistant\` message must start with a thinking block (preceeding the lastmost set of \`tool_use\` and \`tool_result\` blocks). We recommend you include thinking blocks from previous turns. To avoid this requirement, disable \`thinking\`. Please consult our documentation at https://docs.claude.com/en/docs/build-with-claude/extended-thinking`);
      }
    }
  }

  let pendingToolUses: string[] = [];
  body.messages.forEach((m: any, i: number) => {
    const where = `messages.${i}`;
    check(isObject(m), `${where}: Input should be a valid dictionary`);
    check(m.role === "user" || m.role === "assistant", `${where}.role: Input should be 'user' or 'assistant'`);
    if (i === 0) check(m.role === "user", "messages: first message must use the \"user\" role");
    else check(m.role !== body.messages[i - 1].role, `messages: roles must alternate between "user" and "assistant", but found multiple "${m.role}" roles in a row`);
    const blocks: any[] = typeof m.content === "string" ? [{ type: "text", text: m.content }] : m.content;
    check(Array.isArray(blocks) && blocks.length > 0, `${where}.content: messages must have non-empty content`);
    blocks.forEach((b, j) => validateBlock(b, `${where}.content.${j}`, m.role));
    if (m.role === "user") {
      const results = blocks.filter((b) => b.type === "tool_result").map((b) => b.tool_use_id as string);
      const unexpected = results.filter((id) => !pendingToolUses.includes(id));
      check(unexpected.length === 0, `${where}.content: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(", ")}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`);
      const missing = pendingToolUses.filter((id) => !results.includes(id));
      check(missing.length === 0, `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(", ")}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`);
      const firstOther = blocks.findIndex((b) => b.type !== "tool_result");
      check(firstOther === -1 || blocks.slice(firstOther).every((b) => b.type !== "tool_result"), `${where}.content: tool_result blocks must come first in the content of a user message, before any other blocks`);
      pendingToolUses = [];
    } else {
      pendingToolUses = blocks.filter((b) => b.type === "tool_use").map((b) => b.id);
      if (i === body.messages.length - 1) check(pendingToolUses.length === 0, `messages.${i}: the final assistant message cannot contain tool_use blocks without results`);
    }
  });
}

function textOfTurn(m: any): string {
  if (typeof m.content === "string") return m.content;
  return (m.content as any[]).filter((b) => b.type === "text").map((b) => b.text).join("");
}

export async function startMockAnthropic(opts: { apiKey?: string } = {}): Promise<MockAnthropic> {
  const apiKey = opts.apiKey ?? `sk-ant-api03-${Math.random().toString(36).slice(2)}`;
  const received: Received[] = [];
  const queue: VendorReply[] = [];
  let seq = 0;
  const bills: AnthropicBill[] = [];

  const errorResponse = (status: number, type: string, message: string) =>
    new Response(JSON.stringify({ type: "error", error: { type, message }, request_id: `req_mock${++seq}` }), { status, headers: { "content-type": "application/json" } });

  function generated(body: any): { json: Record<string, unknown>; events: string[]; input: number; output: number } {
    const id = `msg_mock${++seq}`;
    const text = `anthropic answer to: ${lastUserText(body.messages, textOfTurn)}`;
    const input = Math.max(1, Math.ceil(JSON.stringify(body.messages).length / 4));
    const output = text.split(" ").length;
    const usage = { input_tokens: input, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: output };
    const json = { id, type: "message", role: "assistant", model: body.model, content: [{ type: "text", text }], stop_reason: "end_turn", stop_sequence: null, usage };
    const words = text.split(/(?<= )/);
    const events = [
      { type: "message_start", message: { id, type: "message", role: "assistant", model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { ...usage, output_tokens: 1 } } },
      { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
      { type: "ping" },
      ...words.map((w) => ({ type: "content_block_delta", index: 0, delta: { type: "text_delta", text: w } })),
      { type: "content_block_stop", index: 0 },
      { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: output } },
      { type: "message_stop" },
    ].map((e) => JSON.stringify(e));
    return { json, events, input, output };
  }

  // Message Batches: each request answered as the messages route answers it.
  const batch = anthropicBatchMock(() => server.origin, (params) => generated(params).json, (req) => req.headers.get("x-api-key") === apiKey);

  const server = serveLoopback({
    idleTimeout: 60,
    async fetch(req) {
      const url = new URL(req.url);
      const batched = await batch.handle(req, url.pathname);
      if (batched) return batched;
      const rec: Received = { method: req.method, path: url.pathname, query: Object.fromEntries(url.searchParams), headers: headersOf(req), body: null, rejected: null };
      received.push(rec);
      const counting = url.pathname === "/v1/messages/count_tokens";
      if (req.method !== "POST" || (url.pathname !== "/v1/messages" && !counting)) {
        rec.rejected = "not_found";
        return errorResponse(404, "not_found_error", `Not found: ${req.method} ${url.pathname}`);
      }
      const text = await req.text();
      rec.raw = text;
      try {
        rec.body = JSON.parse(text);
      } catch {
        rec.rejected = "invalid json";
        return errorResponse(400, "invalid_request_error", "There was an issue with the request body: it is not valid JSON");
      }
      try {
        validateRequest(req, rec.body, apiKey, counting);
      } catch (e) {
        if (!(e instanceof Invalid)) throw e;
        rec.rejected = e.message;
        return errorResponse(e.status, e.type, e.message);
      }
      if (counting) {
        const b = rec.body;
        return Response.json({ input_tokens: Math.max(1, Math.ceil(JSON.stringify([b.system ?? "", b.messages, b.tools ?? []]).length / 3)) });
      }
      const reply = queue.shift() ?? {};
      const stream = rec.body.stream === true;
      if (reply.status && (reply.status < 200 || reply.status > 299)) {
        const body = reply.error ? resolveJson("anthropic", reply.error) : { type: "error", error: { type: "api_error", message: "Internal server error" } };
        return new Response(JSON.stringify(body), { status: reply.status, headers: { "content-type": "application/json" } });
      }
      const gen = generated(rec.body);
      if (!reply.json && !reply.stream) bills.push({ input: gen.input, output: stream ? 0 : gen.output });
      const bill = bills.at(-1)!;
      if (!stream) {
        return new Response(JSON.stringify(reply.json ? resolveJson("anthropic", reply.json) : gen.json), { headers: { "content-type": "application/json", "request-id": `req_mock${seq}` } });
      }
      const lines = reply.stream ? resolveEvents("anthropic", reply.stream) : gen.events;
      const frames = frameEvents("anthropic", lines);
      // Generated streams bill each word (one text delta, one token) as it goes out.
      const onSent = reply.stream ? undefined : (i: number) => { if (JSON.parse(lines[i]!).type === "content_block_delta") bill.output++; };
      return new Response(sseBody(frames, reply, onSent), { headers: { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache", "request-id": `req_mock${seq}` } });
    },
  });

  return {
    url: server.origin,
    apiKey,
    batch,
    received,
    bills,
    get served() { return received.filter((r) => r.rejected === null); },
    enqueue(...replies) { queue.push(...replies); },
    stop: server.stop,
  };
}

