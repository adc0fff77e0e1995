// A loopback upstream speaking the OpenAI protocols with tool calls, for the translation tests:
//   POST /v1/chat/completions   an OpenAI-compatible chat lane (bearer key)
//   POST /v1/responses          the `openai` lane's Responses endpoint (bearer key)
//   POST /v1/embeddings         OpenAI embeddings (float or base64, usage), strict about fields
//   GET  /models, POST /responses   a subscription backend (bearer access token + chatgpt-account-id)
// It refuses what OpenAI refuses about tool round trips (a tool message that answers no earlier
// tool call, tool calls left unanswered, a function_call_output without its function_call,
// nested chat-style tools on Responses, missing model/messages/input) in OpenAI's error shape,
// and replays the queued fixtures (test/fixtures/chat, test/fixtures/responses) or a generated
// text answer. Chat streams send the usage-only chunk only when stream_options.include_usage
// asks for it, as OpenAI does.
import { frameEvents } from "../fixtures/index.ts";
import { unsupportedChatParameter } from "../mocks/openai-model-rules.ts";
import { headersOf, isObject, resolveEvents, resolveJson, sseBody, type Received, type VendorReply } from "../fixtures/replay.ts";

export interface MockOpenAIProtocol {
  /** Base for PROVIDER_<ID>_BASE_URL (…/v1). */
  url: string;
  /** Base for SUB_API_BASE_URL. */
  subUrl: string;
  apiKey: string;
  /** The sub sign-in this backend accepts. */
  sub: { accessToken: string; accountId: string };
  received: Received[];
  readonly served: Received[];
  enqueue(...replies: VendorReply[]): void;
  /** Replies for POST /v1/embeddings (`json`: a 200 with that body; `status` + `error`: a failure); else a generated answer. */
  enqueueEmbeddings(...replies: VendorReply[]): void;
  stop(): Promise<void>;
}

class Invalid extends Error {
  constructor(message: string, readonly status = 400, readonly code: string | null = null, readonly param: string | null = null) {
    super(message);
  }
}
const check = (cond: unknown, message: string, param: string | null = null): void => {
  if (!cond) throw new Invalid(message, 400, null, param);
};

/** OpenAI's `metadata` (chat and Responses): at most 16 pairs, each value a string of at most 512 characters. */
function validateMetadata(m: unknown): void {
  if (m === undefined || m === null) return;
  check(isObject(m), `Invalid type for 'metadata': expected an object, but got ${Array.isArray(m) ? "an array" : `a ${typeof m}`} instead.`, "metadata");
  const entries = Object.entries(m as Record<string, unknown>);
  check(entries.length <= 16, `Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with ${entries.length} properties instead.`, "metadata");
  for (const [k, v] of entries) {
    check(typeof v === "string", `Invalid type for 'metadata.${k}': expected a string, but got ${Array.isArray(v) ? "an array" : `a ${typeof v}`} instead.`, `metadata.${k}`);
    check((v as string).length <= 512, `Invalid 'metadata.${k}': string too long. Expected a string with maximum length 512.`, `metadata.${k}`);
  }
}

function validateChat(body: any): void {
  validateMetadata(body.metadata);
  check(typeof body.model === "string", "you must provide a model parameter", "model");
  check(Array.isArray(body.messages) && body.messages.length > 0, "Missing required parameter: 'messages'.", "messages");
  let open: string[] = [];
  body.messages.forEach((m: any, i: number) => {
    check(isObject(m) && ["system", "developer", "user", "assistant", "tool"].includes(m.role), `Invalid value: '${m?.role}'. Supported values are: 'system', 'assistant', 'user', 'tool', 'function', and 'developer'.`, `messages[${i}].role`);
    if (m.role === "tool") {
      check(open.includes(m.tool_call_id), "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.", `messages.[${i}].role`);
      open = open.filter((id) => id !== m.tool_call_id);
      return;
    }
    check(open.length === 0, `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${open.join(", ")}`, "messages");
    open = m.role === "assistant" && Array.isArray(m.tool_calls) ? m.tool_calls.map((t: any) => t.id) : [];
  });
  for (const [i, t] of (body.tools ?? []).entries()) {
    check(t?.type === "function" && typeof t.function?.name === "string", `Missing required parameter: 'tools[${i}].function'.`, `tools[${i}].function`);
  }
}

function validateResponses(body: any): void {
  validateMetadata(body.metadata);
  check(typeof body.model === "string", "Missing required parameter: 'model'.", "model");
  check(body.input !== undefined, "Missing required parameter: 'input'.", "input");
  const calls = new Set<string>();
  for (const item of Array.isArray(body.input) ? body.input : []) {
    if (item?.type === "function_call") calls.add(item.call_id);
    if (item?.type === "function_call_output") check(calls.has(item.call_id), `No tool call found for function call output with call_id ${item.call_id}.`, "input");
  }
  for (const [i, t] of (body.tools ?? []).entries()) {
    check(typeof t?.name === "string", `Missing required parameter: 'tools[${i}].name'.`, `tools[${i}].name`);
    check(t.function === undefined, `Unknown parameter: 'tools[${i}].function'.`, `tools[${i}].function`);
  }
}

const EMBEDDING_FIELDS = new Set(["model", "input", "encoding_format", "dimensions", "user"]);

function validateEmbeddings(body: any): void {
  check(isObject(body), "The body must be a JSON object.");
  for (const k of Object.keys(body)) check(EMBEDDING_FIELDS.has(k), `Unrecognized request argument supplied: ${k}`, k);
  check(typeof body.model === "string" && body.model, "you must provide a model parameter", "model");
  const input = body.input;
  const ok = typeof input === "string" || (Array.isArray(input) && input.length > 0 && input.length <= 2048 && (input.every((s) => typeof s === "string" && s.length > 0) || input.every((n) => Number.isInteger(n)) || input.every((a) => Array.isArray(a))));
  check(ok, "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference.", "input");
  if (body.encoding_format !== undefined) check(body.encoding_format === "float" || body.encoding_format === "base64", "'encoding_format' must be 'float' or 'base64'", "encoding_format");
  if (body.dimensions !== undefined) check(Number.isInteger(body.dimensions) && body.dimensions > 0, "'dimensions' must be a positive integer", "dimensions");
}

/** The mock's embedding of one input: a deterministic vector. */
function vectorOf(input: unknown, dims: number): number[] {
  const s = typeof input === "string" ? input : JSON.stringify(input);
  return Array.from({ length: dims }, (_, i) => Math.round(Math.cos(s.length * (i + 1) + (s.charCodeAt(i % Math.max(1, s.length)) || 0)) * 1e4) / 1e4);
}

function embeddingsAnswer(body: any): Record<string, unknown> {
  const inputs: unknown[] = typeof body.input === "string" || !Array.isArray(body.input) || typeof body.input[0] === "number" ? [body.input] : body.input;
  const dims = body.dimensions ?? 8;
  const data = inputs.map((inp, index) => {
    const v = vectorOf(inp, dims);
    const f = new Float32Array(v);
    return { object: "embedding", index, embedding: body.encoding_format === "base64" ? Buffer.from(f.buffer).toString("base64") : v };
  });
  const tokens = inputs.reduce((n: number, inp) => n + Math.max(1, Math.ceil((typeof inp === "string" ? inp.length : JSON.stringify(inp).length) / 4)), 0);
  return { object: "list", data, model: body.model, usage: { prompt_tokens: tokens, total_tokens: tokens } };
}

const lastUser = (texts: string[]) => texts.filter(Boolean).at(-1) ?? "";

export async function startMockOpenAIProtocol(): Promise<MockOpenAIProtocol> {
  const apiKey = `sk-proj-${Math.random().toString(36).slice(2)}`;
  const sub = { accessToken: `at-${Math.random().toString(36).slice(2)}`, accountId: `acc-${Math.random().toString(36).slice(2, 10)}` };
  const received: Received[] = [];
  const queue: VendorReply[] = [];
  const embeddingsQueue: VendorReply[] = [];
  let seq = 0;

  const error = (status: number, message: string, code: string | null = null, param: string | null = null) =>
    new Response(JSON.stringify({ error: { message, type: status === 401 ? "invalid_request_error" : "invalid_request_error", param, code } }), { status, headers: { "content-type": "application/json" } });

  function generatedChat(body: any) {
    const id = `chatcmpl-gen${++seq}`;
    const text = `chat answer to: ${lastUser(body.messages.filter((m: any) => m.role === "user").map((m: any) => (typeof m.content === "string" ? m.content : (m.content ?? []).map((p: any) => p.text ?? "").join(""))))}`;
    const usage = { prompt_tokens: 20, completion_tokens: 6, total_tokens: 26 };
    const base = { id, object: "chat.completion.chunk", created: 1727000000, model: body.model };
    return {
      json: { id, object: "chat.completion", created: 1727000000, model: body.model, choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop", logprobs: null }], usage },
      events: [
        { ...base, choices: [{ index: 0, delta: { role: "assistant", content: text }, finish_reason: null }] },
        { ...base, choices: [{ index: 0, delta: {}, finish_reason: "stop" }], usage },
      ].map((e) => JSON.stringify(e)),
    };
  }

  function generatedResponses(body: any) {
    const items = typeof body.input === "string" ? [{ role: "user", content: body.input }] : body.input;
    const text = `responses answer to: ${lastUser(items.filter((i: any) => i.role === "user").map((i: any) => (typeof i.content === "string" ? i.content : i.content.map((p: any) => p.text ?? "").join(""))))}`;
    const id = `resp_gen${++seq}`;
    const item = { id: `msg_gen${seq}`, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] };
    const usage = { input_tokens: 20, input_tokens_details: { cached_tokens: 0 }, output_tokens: 6, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 26 };
    const done = { id, object: "response", created_at: 1727000000, status: "completed", model: body.model, output: [item], usage };
    let sn = 0;
    const ev = (type: string, o: Record<string, unknown>) => JSON.stringify({ type, sequence_number: sn++, ...o });
    return {
      json: done,
      events: [
        ev("response.created", { response: { ...done, status: "in_progress", output: [], usage: null } }),
        ev("response.output_item.added", { output_index: 0, item: { ...item, status: "in_progress", content: [] } }),
        ev("response.output_text.delta", { item_id: item.id, output_index: 0, content_index: 0, delta: text }),
        ev("response.output_item.done", { output_index: 0, item }),
        ev("response.completed", { response: done }),
      ],
    };
  }

  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 60,
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname;
      const rec: Received = { method: req.method, path, query: Object.fromEntries(url.searchParams), headers: headersOf(req), body: null, rejected: null };
      received.push(rec);
      const isSub = path === "/models" || path === "/responses";
      const bearer = req.headers.get("authorization") ?? "";
      if (isSub ? bearer !== `Bearer ${sub.accessToken}` || req.headers.get("chatgpt-account-id") !== sub.accountId : bearer !== `Bearer ${apiKey}`) {
        rec.rejected = "auth";
        return error(401, "Incorrect API key provided.", "invalid_api_key");
      }
      if (req.method === "POST" && path === "/v1/embeddings") {
        try {
          rec.body = await req.json();
          validateEmbeddings(rec.body);
        } catch (e) {
          rec.rejected = e instanceof Error ? e.message : "json";
          if (e instanceof Invalid) return error(e.status, e.message, e.code, e.param);
          return error(400, "We could not parse the JSON body of your request.");
        }
        const queued = embeddingsQueue.shift();
        if (queued?.status && (queued.status < 200 || queued.status > 299)) return new Response(JSON.stringify(queued.error ?? {}), { status: queued.status, headers: { "content-type": "application/json" } });
        return Response.json(queued?.json ?? embeddingsAnswer(rec.body));
      }
      if (req.method === "GET" && path === "/models") {
        return Response.json({ object: "list", data: [{ id: "gpt-5", object: "model", created: 1735689600, owned_by: "openai" }, { id: "gpt-5-mini", object: "model", created: 1735689600, owned_by: "openai" }] });
      }
      const kind = path === "/v1/chat/completions" ? "chat" : path === "/v1/responses" || path === "/responses" ? "responses" : null;
      if (req.method !== "POST" || !kind) {
        rec.rejected = "not_found";
        return error(404, `Invalid URL (${req.method} ${path})`);
      }
      try {
        rec.body = await req.json();
      } catch {
        rec.rejected = "json";
        return error(400, "We could not parse the JSON body of your request.");
      }
      try {
        if (kind === "chat") {
          validateChat(rec.body);
          const refused = unsupportedChatParameter(rec.body, String(rec.body.model));
          if (refused) throw new Invalid(refused.message, 400, "unsupported_parameter", refused.param);
        }
        else validateResponses(rec.body);
      } catch (e) {
        if (!(e instanceof Invalid)) throw e;
        rec.rejected = e.message;
        return error(e.status, e.message, e.code, e.param);
      }
      const reply = queue.shift() ?? {};
      if (reply.status && (reply.status < 200 || reply.status > 299)) {
        return new Response(JSON.stringify(reply.error ? resolveJson(kind, reply.error) : { error: { message: "The server had an error.", type: "server_error", param: null, code: null } }), { status: reply.status, headers: { "content-type": "application/json" } });
      }
      const gen = kind === "chat" ? generatedChat(rec.body) : generatedResponses(rec.body);
      if (rec.body.stream !== true) return Response.json(reply.json ? resolveJson(kind, reply.json) : gen.json);
      let lines = reply.stream ? resolveEvents(kind, reply.stream) : gen.events;
      if (kind === "chat" && rec.body.stream_options?.include_usage !== true) {
        lines = lines.filter((l) => (JSON.parse(l).choices ?? []).length > 0);
      }
      return new Response(sseBody(frameEvents(kind, lines), reply), { headers: { "content-type": "text/event-stream" } });
    },
  });

  return {
    url: `http://127.0.0.1:${server.port}/v1`,
    subUrl: `http://127.0.0.1:${server.port}`,
    apiKey,
    sub,
    received,
    get served() { return received.filter((r) => r.rejected === null && r.method === "POST"); },
    enqueue(...replies) { queue.push(...replies); },
    enqueueEmbeddings(...replies) { embeddingsQueue.push(...replies); },
    async stop() { await server.stop(true); },
  };
}
