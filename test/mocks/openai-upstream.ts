// A mock OpenAI-protocol upstream: a real Bun HTTP server on loopback that tests and benchmarks
// point the gateway at (PROVIDER_<ID>_BASE_URL = mock.url). It answers, streams, fails with any
// status, hangs, breaks mid-stream and records what it received.
//
// Behaviour comes from the request body's extra property `mock` (which the gateway forwards
// untouched, so one request works direct and through the gateway), overriding the server default
// set with setDefault(). A client that rewrites the body (another gateway in the benchmark) can
// send the same object as JSON in the `x-mock` header instead. Standalone: `npx bun test/mocks/openai-upstream.ts --port 9100`.
import { unsupportedChatParameter } from "./openai-model-rules.ts";
import { json, serveLoopback, sleep } from "./scaffold.ts";
import { openaiBatchMock, type OpenAIBatchMock } from "./openai-batch.ts";

export interface MockBehavior {
  /** Answer with this HTTP status (non-2xx → an OpenAI-style error body). */
  status?: number;
  /** Error object for a non-2xx answer (default: an OpenAI-style error naming the status). */
  error?: Record<string, unknown>;
  /** A non-2xx answer's `retry-after` header (seconds or an HTTP date), as vendors send with 429 and 503. */
  retry_after?: string;
  /** Delay before the response headers. */
  latency_ms?: number;
  /** Streaming: delay between the headers and the first chunk. */
  first_byte_ms?: number;
  /** Streaming: number of content chunks (default 5). */
  chunks?: number;
  /** Streaming: delay between chunks. */
  chunk_delay_ms?: number;
  /** Streaming: the connection breaks after this many content chunks (0 = right after the headers). */
  break_after?: number;
  /** Streaming: the upstream closes the stream cleanly after this many content chunks, without its terminator ([DONE] / response.completed). */
  close_after?: number;
  /** Never answer (until the client goes away). */
  hang?: boolean;
  /** Streaming: pause between the finish_reason chunk and the usage chunk (a client may leave in between). */
  usage_delay_ms?: number;
  /** Report usage (default true; streams also need stream_options.include_usage, like OpenAI). */
  usage?: boolean;
  /** Assistant text (split across the chunks when streaming). */
  content?: string;
  /** 404 model_not_found like OpenAI: true = every model, string(s) = only those model names. */
  unknown_model?: boolean | string | string[];
  /** Token counts reported in usage (defaults derive from the request and the answer). */
  prompt_tokens?: number;
  completion_tokens?: number;
  cached_tokens?: number;
  /** Streaming: unusual but valid SSE (no space after `data:`, odd field order and spacing, CRLF). */
  odd_format?: boolean;
  /**
   * Streaming: an SSE comment right away, before first_byte_ms (as OpenRouter's `: OPENROUTER
   * PROCESSING`). It flushes the headers, so a break_after: 0 then breaks a stream already answered 200.
   */
  processing_comment?: boolean;
  /** The answer's finish_reason (default "stop"), e.g. "length" for an answer cut by an output limit. */
  finish_reason?: string;
  /** The upstream's own price in its chat usage, as OpenRouter sends it (`usage.cost`, `usage.cost_details`). */
  upstream_cost?: number;
  /** Fixed completion id and created time (byte-for-byte comparisons of two answers). */
  id?: string;
  created?: number;
  /**
   * Chat: answer with these tool calls instead of text (finish_reason tool_calls). Streamed as
   * OpenAI streams them: the call's id and name first, its arguments in two pieces after.
   */
  tool_calls?: Array<{ id: string; name: string; arguments: string }>;
}

export interface ReceivedRequest {
  path: string;
  headers: Record<string, string>;
  body: any;
}

/**
 * What the vendor bills one accepted request for: its prompt, and every output token it generated,
 * including those of a stream the client abandoned (generation stops at the disconnect).
 */
export interface MockBill {
  prompt: number;
  completion: number;
}

export interface MockUpstream {
  /** One bill per request the upstream accepted (2xx), in arrival order. */
  bills: MockBill[];
  /** Base URL including /v1, e.g. http://127.0.0.1:40123/v1 */
  url: string;
  port: number;
  received: ReceivedRequest[];
  /** The Batch API's files and batches (uploads counts purpose=batch files received). */
  batch: OpenAIBatchMock;
  /** Requests whose client went away before the answer was complete. */
  readonly aborted: number;
  setDefault(behavior: MockBehavior): void;
  /** Resolves once `aborted` reaches n (or rejects after timeoutMs). */
  waitForAborts(n: number, timeoutMs?: number): Promise<void>;
  stop(): Promise<void>;
}

const enc = new TextEncoder();

function unknownModel(b: MockBehavior, model: string): boolean {
  const u = b.unknown_model;
  if (u === undefined || u === false) return false;
  if (u === true) return true;
  return Array.isArray(u) ? u.includes(model) : u === model;
}

function errorBody(status: number, b: MockBehavior, model: string): Record<string, unknown> {
  if (b.error) return { error: b.error };
  if (status === 404) return notFound(model);
  return {
    error: {
      message: `Mock upstream error with status ${status}.`,
      type: status === 429 ? "rate_limit_error" : status >= 500 ? "server_error" : "invalid_request_error",
      param: null,
      code: status === 429 ? "rate_limit_exceeded" : null,
    },
  };
}

function notFound(model: string) {
  return {
    error: {
      message: `The model \`${model}\` does not exist or you do not have access to it.`,
      type: "invalid_request_error",
      param: null,
      code: "model_not_found",
    },
  };
}

function pieces(b: MockBehavior, n: number): string[] {
  if (b.content === undefined) return Array.from({ length: n }, (_, i) => `tok${i} `);
  const text = b.content;
  const out: string[] = [];
  const size = Math.ceil(text.length / Math.max(1, n));
  for (let i = 0; i < n; i++) out.push(text.slice(i * size, (i + 1) * size));
  return out;
}

function promptTokens(body: any, b: MockBehavior): number {
  if (b.prompt_tokens !== undefined) return b.prompt_tokens;
  const src = body?.messages ?? body?.input ?? "";
  return Math.max(1, Math.ceil(JSON.stringify(src).length / 4));
}

/** The request's output limit: like the real API, the answer never has more completion tokens. */
function outputLimit(body: any): number {
  const v = body?.max_completion_tokens ?? body?.max_tokens ?? body?.max_output_tokens;
  return typeof v === "number" && v > 0 ? v : Infinity;
}

/** Choices asked for (`n`): like the real API, each is generated and billed. */
function choiceCount(body: any): number {
  return Number.isInteger(body?.n) && body.n > 1 ? body.n : 1;
}

function chatUsage(body: any, b: MockBehavior, completion: number) {
  const p = promptTokens(body, b);
  const c = Math.min(b.completion_tokens ?? completion, outputLimit(body)) * choiceCount(body);
  return {
    prompt_tokens: p,
    completion_tokens: c,
    total_tokens: p + c,
    prompt_tokens_details: { cached_tokens: b.cached_tokens ?? 0 },
    completion_tokens_details: { reasoning_tokens: 0 },
    ...(b.upstream_cost !== undefined ? { cost: b.upstream_cost, cost_details: { upstream_inference_cost: b.upstream_cost } } : {}),
  };
}

function responsesUsage(body: any, b: MockBehavior, completion: number) {
  const p = promptTokens(body, b);
  const c = Math.min(b.completion_tokens ?? completion, outputLimit(body));
  return {
    input_tokens: p,
    input_tokens_details: { cached_tokens: b.cached_tokens ?? 0 },
    output_tokens: c,
    output_tokens_details: { reasoning_tokens: 0 },
    total_tokens: p + c,
  };
}

const SSE_HEADERS = { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" };

/** Behaviour from the `x-mock` header (JSON), for proxies that drop unknown body properties. */
function headerBehavior(req: Request): MockBehavior | undefined {
  const h = req.headers.get("x-mock");
  if (!h) return undefined;
  try {
    return JSON.parse(h) as MockBehavior;
  } catch {
    return undefined;
  }
}

/**
 * OpenAI's rule for `metadata` (chat completions and Responses): up to 16 pairs, keys up to 64
 * characters, values strings up to 512; anything else is a 400 as the API words it.
 */
function metadataError(m: unknown): { message: string; param: string; code: string } | null {
  if (m === undefined || m === null) return null;
  if (typeof m !== "object" || Array.isArray(m)) return { message: "Invalid type for 'metadata': expected an object, but got " + (Array.isArray(m) ? "an array" : `a ${typeof m}`) + " instead.", param: "metadata", code: "invalid_type" };
  const entries = Object.entries(m as Record<string, unknown>);
  if (entries.length > 16) return { message: `Invalid 'metadata': too many properties. Expected an object with at most 16 properties, but got an object with ${entries.length} properties instead.`, param: "metadata", code: "object_above_max_properties" };
  for (const [k, v] of entries) {
    if (typeof v !== "string") return { message: `Invalid type for 'metadata.${k}': expected a string, but got ${Array.isArray(v) ? "an array" : v === null ? "null" : `a ${typeof v}`} instead.`, param: `metadata.${k}`, code: "invalid_type" };
    if (v.length > 512) return { message: `Invalid 'metadata.${k}': string too long. Expected a string with maximum length 512, but got a string with length ${v.length} instead.`, param: `metadata.${k}`, code: "string_above_max_length" };
  }
  return null;
}

export async function startMockOpenAI(opts: { port?: number; /** false: keep no record of requests (long benchmarks). */ record?: boolean } = {}): Promise<MockUpstream> {
  const record = opts.record !== false;
  let defaults: MockBehavior = {};
  let aborted = 0;
  const received: ReceivedRequest[] = [];
  const abortWaiters: Array<{ n: number; resolve: () => void }> = [];
  let seq = 0;
  const bills: MockBill[] = [];
  const openBill = (body: any, b: MockBehavior): MockBill => {
    const bill = { prompt: promptTokens(body, b), completion: 0 };
    bills.push(bill);
    return bill;
  };

  const noteAbort = () => {
    aborted++;
    for (const w of abortWaiters.splice(0)) {
      if (aborted >= w.n) w.resolve();
      else abortWaiters.push(w);
    }
  };

  /** Runs `fn` with a flag that turns true when the client goes away; counts the abort once. */
  const watch = (req: Request) => {
    const state = { gone: false, done: false };
    req.signal.addEventListener("abort", () => {
      if (state.gone || state.done) return;
      state.gone = true;
      noteAbort();
    });
    return state;
  };

  const wait = async (ms: number | undefined, state: { gone: boolean }) => {
    if (!ms) return;
    const end = Date.now() + ms;
    while (!state.gone && Date.now() < end) await sleep(Math.min(50, end - Date.now()));
  };

  function streamChat(body: any, b: MockBehavior, state: { gone: boolean; done: boolean }, model: string): Response {
    const n = b.chunks ?? 5;
    const parts = pieces(b, n);
    const id = b.id ?? `chatcmpl-mock${++seq}`;
    const created = b.created ?? Math.floor(Date.now() / 1000);
    const includeUsage = b.usage !== false && body?.stream_options?.include_usage === true;
    const odd = b.odd_format === true;
    const ev = (obj: Record<string, unknown>) => {
      if (!odd) return `data: ${JSON.stringify(obj)}\n\n`;
      // Reversed field order, spaces after separators, no space after `data:`, CRLF endings.
      const reordered = Object.fromEntries(Object.entries(obj).reverse());
      return `data:${JSON.stringify(reordered, null, 0).replace(/,"/g, ',  "').replace(/":/g, '" :')}\r\n\r\n`;
    };
    const choices = choiceCount(body);
    const bill = openBill(body, b);
    const chunk = (delta: Record<string, unknown>, finish: string | null, index = 0) => {
      const o: Record<string, unknown> = {
        id, object: "chat.completion.chunk", created, model,
        system_fingerprint: "fp_mock",
        choices: [{ index, delta, logprobs: null, finish_reason: finish }],
      };
      if (includeUsage) o.usage = null;
      return ev(o);
    };
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          if (b.processing_comment) controller.enqueue(enc.encode(": PROCESSING\n\n"));
          await wait(b.first_byte_ms, state);
          if (b.tool_calls) {
            let out = chunk({ role: "assistant", content: null }, null);
            b.tool_calls.forEach((tc, index) => {
              const half = Math.ceil(tc.arguments.length / 2);
              out += chunk({ tool_calls: [{ index, id: tc.id, type: "function", function: { name: tc.name, arguments: "" } }] }, null);
              out += chunk({ tool_calls: [{ index, function: { arguments: tc.arguments.slice(0, half) } }] }, null);
              out += chunk({ tool_calls: [{ index, function: { arguments: tc.arguments.slice(half) } }] }, null);
            });
            out += chunk({}, "tool_calls");
            if (includeUsage) out += ev({ id, object: "chat.completion.chunk", created, model, system_fingerprint: "fp_mock", choices: [], usage: chatUsage(body, b, n) });
            controller.enqueue(enc.encode(out + "data: [DONE]\n\n"));
            bill.completion = chatUsage(body, b, n).completion_tokens;
            state.done = true;
            controller.close();
            return;
          }
          for (let i = 0; i < n; i++) {
            if (state.gone) return;
            if (i > 0) await wait(b.chunk_delay_ms, state);
            if (state.gone) return;
            if (b.break_after !== undefined && i >= b.break_after) {
              controller.error(undefined); // resets the connection (an Error would also be printed by Bun)
              return;
            }
            if (b.close_after !== undefined && i >= b.close_after) {
              state.done = true;
              controller.close();
              return;
            }
            let out = "";
            for (let j = 0; j < choices; j++) out += chunk(i === 0 ? { role: "assistant", content: parts[i] } : { content: parts[i] }, null, j);
            controller.enqueue(enc.encode(out));
            bill.completion += choices;
          }
          if (b.break_after === n) {
            await wait(b.chunk_delay_ms, state);
            controller.error(undefined); // resets the connection (an Error would also be printed by Bun)
            return;
          }
          bill.completion = chatUsage(body, b, n).completion_tokens;
          let tail = "";
          for (let j = 0; j < choices; j++) tail += chunk({}, b.finish_reason ?? "stop", j);
          if (includeUsage && b.usage_delay_ms) {
            controller.enqueue(enc.encode(tail));
            tail = "";
            await wait(b.usage_delay_ms, state);
            if (state.gone) return;
          }
          if (includeUsage) {
            tail += ev({ id, object: "chat.completion.chunk", created, model, system_fingerprint: "fp_mock", choices: [], usage: chatUsage(body, b, n) });
          }
          tail += odd ? "data:[DONE]\r\n\r\n" : "data: [DONE]\n\n";
          controller.enqueue(enc.encode(tail));
          state.done = true;
          controller.close();
        } catch {
          // The client went away while we wrote; the abort listener counted it.
        }
      },
      cancel() {
        if (!state.done && !state.gone) { state.gone = true; noteAbort(); }
      },
    });
    return new Response(stream, { headers: SSE_HEADERS });
  }

  function streamResponses(body: any, b: MockBehavior, state: { gone: boolean; done: boolean }, model: string): Response {
    const n = b.chunks ?? 5;
    const parts = pieces(b, n);
    const id = b.id ?? `resp_mock${++seq}`;
    const msgId = `msg_${id}`;
    const created = b.created ?? Math.floor(Date.now() / 1000);
    let sn = 0;
    const ev = (type: string, obj: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sn++, ...obj })}\n\n`;
    const base = { id, object: "response", created_at: created, model, output: [] as unknown[] };
    const bill = openBill(body, b);
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        try {
          await wait(b.first_byte_ms, state);
          controller.enqueue(enc.encode(ev("response.created", { response: { ...base, status: "in_progress" } })
            + ev("response.output_item.added", { output_index: 0, item: { id: msgId, type: "message", status: "in_progress", role: "assistant", content: [] } })));
          for (let i = 0; i < n; i++) {
            if (state.gone) return;
            if (i > 0) await wait(b.chunk_delay_ms, state);
            if (state.gone) return;
            if (b.break_after !== undefined && i >= b.break_after) {
              controller.error(undefined); // resets the connection (an Error would also be printed by Bun)
              return;
            }
            if (b.close_after !== undefined && i >= b.close_after) {
              state.done = true;
              controller.close();
              return;
            }
            controller.enqueue(enc.encode(ev("response.output_text.delta", { item_id: msgId, output_index: 0, content_index: 0, delta: parts[i] })));
            bill.completion++;
          }
          const text = parts.join("");
          const item = { id: msgId, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] };
          const done: Record<string, unknown> = { ...base, status: "completed", output: [item] };
          bill.completion = responsesUsage(body, b, n).output_tokens;
          if (b.usage !== false) done.usage = responsesUsage(body, b, n);
          controller.enqueue(enc.encode(ev("response.output_text.done", { item_id: msgId, output_index: 0, content_index: 0, text })
            + ev("response.output_item.done", { output_index: 0, item })
            + ev("response.completed", { response: done })));
          state.done = true;
          controller.close();
        } catch {}
      },
      cancel() {
        if (!state.done && !state.gone) { state.gone = true; noteAbort(); }
      },
    });
    return new Response(stream, { headers: SSE_HEADERS });
  }

  function completeChat(body: any, b: MockBehavior, model: string) {
    const n = b.chunks ?? 5;
    const text = pieces(b, n).join("");
    const out: Record<string, unknown> = {
      id: b.id ?? `chatcmpl-mock${++seq}`, object: "chat.completion", created: b.created ?? Math.floor(Date.now() / 1000), model,
      choices: Array.from({ length: choiceCount(body) }, (_, index) => b.tool_calls
        ? { index, message: { role: "assistant", content: null, refusal: null, tool_calls: b.tool_calls.map((tc) => ({ id: tc.id, type: "function", function: { name: tc.name, arguments: tc.arguments } })) }, logprobs: null, finish_reason: "tool_calls" }
        : { index, message: { role: "assistant", content: text, refusal: null }, logprobs: null, finish_reason: b.finish_reason ?? "stop" }),
      system_fingerprint: "fp_mock",
    };
    if (b.usage !== false) out.usage = chatUsage(body, b, n);
    return out;
  }

  function completeResponses(body: any, b: MockBehavior, model: string) {
    const n = b.chunks ?? 5;
    const text = pieces(b, n).join("");
    const id = b.id ?? `resp_mock${++seq}`;
    const out: Record<string, unknown> = {
      id, object: "response", created_at: b.created ?? Math.floor(Date.now() / 1000), status: "completed", model,
      output: [{ id: `msg_${id}`, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] }],
    };
    if (b.usage !== false) out.usage = responsesUsage(body, b, n);
    return out;
  }

  // The Batch API: each line answered as its route answers it (its `mock` behaviour applies to that
  // line): chat, Responses, or embeddings (vectors of 4, a token per 4 characters of input).
  const batch = openaiBatchMock((body: any, url: string) => {
    const b: MockBehavior = { ...defaults, ...(body && typeof body === "object" ? body.mock : undefined) };
    const model = typeof body?.model === "string" ? body.model : "unknown";
    const status = b.status ?? 200;
    if (status < 200 || status > 299) return { status, body: errorBody(status, b, model) };
    if (url === "/v1/responses") return { status: 200, body: completeResponses(body, b, model) };
    if (url === "/v1/embeddings") {
      const inputs: unknown[] = Array.isArray(body?.input) ? body.input : [body?.input];
      const tokens = b.prompt_tokens ?? Math.max(1, Math.ceil(JSON.stringify(body?.input ?? "").length / 4));
      return { status: 200, body: { object: "list", model, data: inputs.map((_, index) => ({ object: "embedding", index, embedding: [0.1, 0.2, 0.3, 0.4] })), usage: { prompt_tokens: tokens, total_tokens: tokens } } };
    }
    return { status: 200, body: completeChat(body, b, model) };
  });

  const server = serveLoopback({
    port: opts.port ?? 0,
    idleTimeout: 255,
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname;
      const batched = await batch.handle(req, path);
      if (batched) return batched;
      const headers: Record<string, string> = {};
      if (record) req.headers.forEach((v, k) => { headers[k] = v; });
      if (req.method === "GET" && path === "/v1/models") {
        if (record) received.push({ path, headers, body: null });
        return json({
          object: "list",
          data: ["gpt-4o-mini", "gpt-4o", "gpt-4.1"].map((id) => ({ id, object: "model", created: 1700000000, owned_by: "mock" })),
        });
      }
      if (req.method !== "POST" || (path !== "/v1/chat/completions" && path !== "/v1/responses")) {
        return json({ error: { message: `No mock route for ${req.method} ${path}.`, type: "invalid_request_error", param: null, code: null } }, 404);
      }
      const state = watch(req);
      const text = await req.text();
      let body: any = text;
      try { body = JSON.parse(text); } catch {}
      if (record) received.push({ path, headers, body });
      const b: MockBehavior = { ...defaults, ...headerBehavior(req), ...(body && typeof body === "object" ? body.mock : undefined) };
      const model = typeof body?.model === "string" ? body.model : "unknown";
      if (b.hang) {
        openBill(body, b); // accepted, then nothing generated
        await new Promise<void>((resolve) => {
          if (state.gone) resolve();
          req.signal.addEventListener("abort", () => resolve());
        });
        return new Response(null, { status: 499 });
      }
      await wait(b.latency_ms, state);
      if (state.gone) {
        if (!unknownModel(b, model) && (b.status ?? 200) < 300) openBill(body, b); // the prompt was read
        return new Response(null, { status: 499 });
      }
      if (unknownModel(b, model)) { state.done = true; return json(notFound(model), 404); }
      const status = b.status ?? 200;
      if (status < 200 || status > 299) { state.done = true; return json(errorBody(status, b, model), status, b.retry_after === undefined ? {} : { "retry-after": b.retry_after }); }
      const chat = path === "/v1/chat/completions";
      const refused = chat ? unsupportedChatParameter(body, model) : null;
      if (refused) { state.done = true; return json({ error: { message: refused.message, type: "invalid_request_error", param: refused.param, code: "unsupported_parameter" } }, 400); }
      const badMeta = metadataError(body?.metadata);
      if (badMeta) { state.done = true; return json({ error: { message: badMeta.message, type: "invalid_request_error", param: badMeta.param, code: badMeta.code } }, 400); }
      if (body?.stream === true) return chat ? streamChat(body, b, state, model) : streamResponses(body, b, state, model);
      state.done = true;
      const answer = chat ? completeChat(body, b, model) : completeResponses(body, b, model);
      const u = (chat ? chatUsage(body, b, b.chunks ?? 5) : responsesUsage(body, b, b.chunks ?? 5)) as { prompt_tokens?: number; completion_tokens?: number; output_tokens?: number };
      openBill(body, b).completion = u.completion_tokens ?? u.output_tokens ?? 0;
      return json(answer);
    },
  });

  return {
    url: `${server.origin}/v1`,
    port: server.port,
    received,
    bills,
    batch,
    get aborted() { return aborted; },
    setDefault(behavior) { defaults = { ...behavior }; },
    waitForAborts(n, timeoutMs = 5000) {
      if (aborted >= n) return Promise.resolve();
      return new Promise<void>((resolve, reject) => {
        const t = setTimeout(() => reject(new Error(`expected ${n} aborted requests, saw ${aborted}`)), timeoutMs);
        abortWaiters.push({ n, resolve: () => { clearTimeout(t); resolve(); } });
      });
    },
    stop: server.stop,
  };
}

if (import.meta.main) {
  const i = process.argv.indexOf("--port");
  const port = i > 0 ? Number(process.argv[i + 1]) : 0;
  const mock = await startMockOpenAI({ port });
  console.log(mock.url);
}
