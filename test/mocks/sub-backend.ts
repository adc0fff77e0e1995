// A mock subscription backend: a real Bun HTTP server on loopback that tests point the gateway at
// (SUB_API_BASE_URL = mock.url). It speaks what the gateway expects of the real one:
//   GET  /models                 the live catalog, OpenAI list shape (entries may carry `tier`)
//   POST /responses              OpenAI Responses protocol, JSON or SSE (`stream: true`)
//   POST /audio/transcriptions   multipart form with a `file` part → `{text}`
// Every call must carry `Authorization: Bearer <access token>` and `chatgpt-account-id`. A JWT
// whose `exp` has passed, or a token passed to revoke(), gets 401 like the real backend (that is
// what drives the gateway's token refresh). With `strict: true` only tokens given to allow() are
// accepted (any other gets 401); the mock auth server (sub-auth.ts) allows every token it issues.
// A token given to allow() must come with its own account id (403 otherwise).
import { headersOf, json, serveLoopback, sleep } from "./scaffold.ts";

export interface SubModel {
  id: string;
  object?: string;
  created?: number;
  owned_by?: string;
  tier?: "flagship" | "mini";
}

export interface SubReceived {
  method: string;
  path: string;
  headers: Record<string, string>;
  /** Parsed JSON body, or for multipart the form fields (files as `{name, size, type}`). */
  body: any;
}

export interface MockSubBackend {
  url: string;
  received: SubReceived[];
  setModels(list: Array<string | SubModel>): void;
  /** Every route answers this status (null = normal service). */
  setFail(status: number | null): void;
  /** Accepts `accessToken` for `accountId` (both headers must match). */
  allow(accessToken: string, accountId: string): void;
  /** Stops accepting a token (the next call with it gets 401). */
  revoke(accessToken: string): void;
  /** Assistant text of the next answers (default: `sub answer to: <last user text>`). */
  setReply(text: string | null): void;
  /** Delay before answering /responses (lets tests overlap requests). */
  setLatency(ms: number): void;
  /** Delay before answering /audio/transcriptions (longer than the gateway's upstream timeout: a hung backend). */
  setAudioLatency(ms: number): void;
  /** The next `n` /audio/transcriptions calls answer `status`, then normal service again. */
  failAudio(n: number, status: number): void;
  stop(): Promise<void>;
}

const enc = new TextEncoder();

const DEFAULT_MODELS: SubModel[] = [
  { id: "gpt-5.1-codex" },
  { id: "gpt-5.1-codex-mini" },
  { id: "gpt-5" },
];

/** Reads `exp` (seconds) from a JWT-shaped token; null when the token is not a JWT. */
function jwtExp(token: string): number | null {
  const parts = token.split(".");
  if (parts.length !== 3) return null;
  try {
    const payload = JSON.parse(Buffer.from(parts[1]!, "base64url").toString("utf8"));
    return typeof payload.exp === "number" ? payload.exp : null;
  } catch {
    return null;
  }
}

function lastUserText(input: unknown): string {
  if (typeof input === "string") return input;
  if (!Array.isArray(input)) return "";
  for (let i = input.length - 1; i >= 0; i--) {
    const item = input[i];
    if (item?.role !== "user") continue;
    if (typeof item.content === "string") return item.content;
    if (Array.isArray(item.content)) return item.content.map((c: any) => c?.text ?? "").join("");
  }
  return "";
}

const errorJson = (status: number, message: string, code: string | null, type = "invalid_request_error") =>
  json({ error: { message, type, param: null, code } }, status);

export interface MockSubBackendOptions {
  models?: Array<string | SubModel>;
  /** Only tokens given to allow() are accepted. */
  strict?: boolean;
}

export async function startMockSubBackend(opts: MockSubBackendOptions = {}): Promise<MockSubBackend> {
  const toModel = (m: string | SubModel): SubModel => (typeof m === "string" ? { id: m } : m);
  let models: SubModel[] = (opts.models ?? DEFAULT_MODELS).map(toModel);
  let fail: number | null = null;
  let reply: string | null = null;
  let latency = 0;
  let audioLatency = 0;
  let audioFailures: { n: number; status: number } = { n: 0, status: 0 };
  const tokens = new Map<string, string>(); // access token → account id
  const revoked = new Set<string>();
  const received: SubReceived[] = [];
  let seq = 0;

  /** null when the caller may proceed, else the 401/403 answer. */
  function checkAuth(req: Request): Response | null {
    const h = req.headers.get("authorization") ?? "";
    const token = h.startsWith("Bearer ") ? h.slice(7) : "";
    const account = tokens.get(token);
    if (!token || revoked.has(token) || (opts.strict && account === undefined)) {
      return errorJson(401, "Your authentication token is not valid or has expired.", "token_invalid");
    }
    const exp = jwtExp(token);
    if (exp !== null && exp * 1000 <= Date.now()) {
      return errorJson(401, "Provided authentication token is expired. Please try signing in again.", "token_expired");
    }
    const sentAccount = req.headers.get("chatgpt-account-id");
    if (!sentAccount || (account !== undefined && sentAccount !== account)) {
      return errorJson(403, "The chatgpt-account-id header does not match the token's account.", "account_mismatch");
    }
    return null;
  }

  function usage(input: unknown, outputTokens: number) {
    const inTok = Math.max(1, Math.ceil(JSON.stringify(input ?? "").length / 4));
    return {
      input_tokens: inTok,
      input_tokens_details: { cached_tokens: 0 },
      output_tokens: outputTokens,
      output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: inTok + outputTokens,
    };
  }

  function responseObject(body: any, text: string, status: "in_progress" | "completed", id: string, msgId: string, created: number) {
    const out: Record<string, unknown> = {
      id, object: "response", created_at: created, status, error: null, incomplete_details: null,
      instructions: body.instructions ?? null, model: body.model,
      output: status === "completed"
        ? [{ id: msgId, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] }]
        : [],
      parallel_tool_calls: true, reasoning: body.reasoning ?? { effort: null, summary: null },
      service_tier: body.service_tier ?? "auto", store: false, text: body.text ?? { format: { type: "text" } },
      usage: status === "completed" ? usage(body.input, text.split(" ").length) : null,
    };
    return out;
  }

  function streamResponse(body: any, text: string): Response {
    const id = `resp_sub${++seq}`;
    const msgId = `msg_sub${seq}`;
    const created = Math.floor(Date.now() / 1000);
    let sn = 0;
    const ev = (type: string, obj: Record<string, unknown>) =>
      `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: sn++, ...obj })}\n\n`;
    const words = text.split(/(?<= )/);
    const stream = new ReadableStream<Uint8Array>({
      async start(controller) {
        controller.enqueue(enc.encode(
          ev("response.created", { response: responseObject(body, text, "in_progress", id, msgId, created) })
          + ev("response.in_progress", { response: responseObject(body, text, "in_progress", id, msgId, created) })
          + ev("response.output_item.added", { output_index: 0, item: { id: msgId, type: "message", status: "in_progress", role: "assistant", content: [] } })
          + ev("response.content_part.added", { item_id: msgId, output_index: 0, content_index: 0, part: { type: "output_text", text: "", annotations: [] } }),
        ));
        for (const w of words) {
          controller.enqueue(enc.encode(ev("response.output_text.delta", { item_id: msgId, output_index: 0, content_index: 0, delta: w })));
          await sleep(1);
        }
        const item = { id: msgId, type: "message", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] };
        controller.enqueue(enc.encode(
          ev("response.output_text.done", { item_id: msgId, output_index: 0, content_index: 0, text })
          + ev("response.content_part.done", { item_id: msgId, output_index: 0, content_index: 0, part: { type: "output_text", text, annotations: [] } })
          + ev("response.output_item.done", { output_index: 0, item })
          + ev("response.completed", { response: responseObject(body, text, "completed", id, msgId, created) }),
        ));
        controller.close();
      },
    });
    return new Response(stream, { headers: { "content-type": "text/event-stream", "cache-control": "no-cache" } });
  }

  const server = serveLoopback({
    idleTimeout: 60,
    async fetch(req) {
      const url = new URL(req.url);
      const path = url.pathname;
      const headers = headersOf(req);
      const rec: SubReceived = { method: req.method, path, headers, body: null };
      received.push(rec);
      if (fail !== null) return errorJson(fail, `Mock subscription backend failing with ${fail}.`, null, fail >= 500 ? "server_error" : "invalid_request_error");

      if (req.method === "GET" && path === "/models") {
        const denied = checkAuth(req);
        if (denied) return denied;
        return json({
          object: "list",
          data: models.map((m) => ({ object: "model", created: 1735689600, owned_by: "sub", ...m })),
        });
      }

      if (req.method === "POST" && path === "/responses") {
        let body: any;
        try { body = await req.json(); } catch { return errorJson(400, "Body is not JSON.", null); }
        rec.body = body;
        const denied = checkAuth(req);
        if (denied) return denied;
        if (latency) await sleep(latency);
        if (typeof body?.model !== "string" || !models.some((m) => m.id === body.model)) {
          return errorJson(400, `The model \`${body?.model}\` does not exist or you do not have access to it.`, "model_not_found");
        }
        if (body.input === undefined) return errorJson(400, "Missing required parameter: 'input'.", "missing_required_parameter");
        const text = reply ?? `sub answer to: ${lastUserText(body.input)}`;
        if (body.stream === true) return streamResponse(body, text);
        const id = `resp_sub${++seq}`;
        return json(responseObject(body, text, "completed", id, `msg_sub${seq}`, Math.floor(Date.now() / 1000)));
      }

      if (req.method === "POST" && path === "/audio/transcriptions") {
        const denied = checkAuth(req);
        if (denied) return denied;
        if (audioLatency) await sleep(audioLatency);
        if (audioFailures.n > 0) {
          audioFailures.n--;
          return errorJson(audioFailures.status, `Mock transcription failing with ${audioFailures.status}.`, null, "server_error");
        }
        let form: Awaited<ReturnType<Request["formData"]>>;
        try { form = await req.formData(); } catch { return errorJson(400, "Send multipart/form-data with a `file` part.", null); }
        const fields: Record<string, unknown> = {};
        for (const [k, v] of form.entries()) {
          fields[k] = typeof v === "string" ? v : { name: v.name, size: v.size, type: v.type };
        }
        rec.body = fields;
        const file = form.get("file");
        if (!file || typeof file === "string") return errorJson(400, "Missing the `file` part.", null);
        const bytes = new Uint8Array(await file.arrayBuffer());
        return json({ text: `transcribed ${file.name} (${bytes.length} bytes, model ${fields.model ?? "default"})` });
      }

      return errorJson(404, `No mock route for ${req.method} ${path}.`, null);
    },
  });

  return {
    url: server.origin,
    received,
    setModels(list) { models = list.map(toModel); },
    setFail(status) { fail = status; },
    allow(accessToken, accountId) { tokens.set(accessToken, accountId); revoked.delete(accessToken); },
    revoke(accessToken) { tokens.delete(accessToken); revoked.add(accessToken); },
    setReply(text) { reply = text; },
    setLatency(ms) { latency = ms; },
    setAudioLatency(ms) { audioLatency = ms; },
    failAudio(n, status) { audioFailures = { n, status }; },
    stop: server.stop,
  };
}
