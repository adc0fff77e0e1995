// A mock self-hosted coding-agent bridge: a real Bun HTTP server on loopback speaking what a
// bridge serves (CONTRACT §5): `GET /health` (2xx = healthy, togglable), `GET /v1/models` (the
// OpenAI list of what it serves, settable) and OpenAI-compatible `POST /v1/chat/completions`, both
// behind `Authorization: Bearer <bridge token>`, JSON or SSE. Sent
// tools, it calls the first one (arguments {"path":"src/main.ts"}) until a tool result comes back.
// It records every request's headers so tests can prove the gateway sent only the bridge token.
import { headersOf, json, serveLoopback } from "./scaffold.ts";

export interface BridgeReceived {
  method: string;
  path: string;
  headers: Record<string, string>;
  body: any;
}

export interface MockBridge {
  url: string;
  token: string;
  received: BridgeReceived[];
  /** Chat completion requests only. */
  readonly completions: BridgeReceived[];
  readonly healthChecks: number;
  setHealthy(ok: boolean): void;
  /** Every chat call answers with this status (null = normal). */
  setFail(status: number | null): void;
  /** Chat calls answer `302 Location: <url>` (null = off). */
  setRedirect(location: string | null): void;
  setReply(text: string | null): void;
  /** What GET /v1/models lists (default ["coding-agent"]); a number makes it answer that status instead. */
  setModels(list: string[] | number): void;
  stop(): Promise<void>;
}

const enc = new TextEncoder();

export async function startMockBridge(opts: { token?: string; hostname?: string } = {}): Promise<MockBridge> {
  const token = opts.token ?? `bridge-token-${Math.random().toString(36).slice(2, 12)}`;
  const received: BridgeReceived[] = [];
  let healthy = true;
  let fail: number | null = null;
  let redirect: string | null = null;
  let reply: string | null = null;
  let models: string[] | number = ["coding-agent"];
  let healthChecks = 0;
  let seq = 0;

  const server = serveLoopback({
    hostname: opts.hostname ?? "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const headers = headersOf(req);
      const rec: BridgeReceived = { method: req.method, path: url.pathname, headers, body: null };
      received.push(rec);
      if (req.method === "GET" && url.pathname === "/health") {
        healthChecks++;
        return healthy ? json({ status: "ok" }) : json({ status: "down" }, 503);
      }
      if (req.method === "GET" && url.pathname === "/v1/models") {
        if (headers.authorization !== `Bearer ${token}`) {
          return json({ error: { message: "Invalid bridge token.", type: "authentication_error", code: "invalid_api_key" } }, 401);
        }
        if (typeof models === "number") return json({ error: { message: `Mock bridge failing with ${models}.`, type: "server_error", code: null } }, models);
        return json({ object: "list", data: models.map((id) => ({ id, object: "model", created: 1700000000, owned_by: "bridge" })) });
      }
      if (req.method !== "POST" || url.pathname !== "/v1/chat/completions") {
        return json({ error: { message: `No mock route for ${req.method} ${url.pathname}.`, type: "invalid_request_error", code: null } }, 404);
      }
      const text = await req.text();
      try { rec.body = JSON.parse(text); } catch { rec.body = text; }
      if (headers.authorization !== `Bearer ${token}`) {
        return json({ error: { message: "Invalid bridge token.", type: "authentication_error", code: "invalid_api_key" } }, 401);
      }
      if (redirect) return new Response(null, { status: 302, headers: { location: redirect } });
      if (fail !== null) return json({ error: { message: `Mock bridge failing with ${fail}.`, type: "server_error", code: null } }, fail);
      const body = rec.body ?? {};
      const model = typeof body.model === "string" ? body.model : "coding-agent";
      const last = Array.isArray(body.messages) ? body.messages[body.messages.length - 1] : null;
      const content = reply ?? `bridge answer to: ${typeof last?.content === "string" ? last.content : ""}`;
      const id = `chatcmpl-bridge${++seq}`;
      const created = Math.floor(Date.now() / 1000);
      const usage = { prompt_tokens: 7, completion_tokens: content.split(" ").length, total_tokens: 7 + content.split(" ").length };
      // An agent with tools calls the first one when the user just spoke (a tool result answers it).
      const tool = Array.isArray(body.tools) && last?.role === "user" ? body.tools[0]?.function : null;
      if (tool) {
        const call = { id: `call_bridge${seq}`, name: String(tool.name), arguments: '{"path":"src/main.ts"}' };
        if (body.stream === true) {
          const chunk = (delta: Record<string, unknown>, finish: string | null) =>
            `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
          let out = chunk({ role: "assistant", content: null, tool_calls: [{ index: 0, id: call.id, type: "function", function: { name: call.name, arguments: "" } }] }, null);
          out += chunk({ tool_calls: [{ index: 0, function: { arguments: '{"path":' } }] }, null);
          out += chunk({ tool_calls: [{ index: 0, function: { arguments: '"src/main.ts"}' } }] }, null);
          out += chunk({}, "tool_calls");
          if (body.stream_options?.include_usage) out += `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`;
          return new Response(enc.encode(out + "data: [DONE]\n\n"), { headers: { "content-type": "text/event-stream" } });
        }
        return json({
          id, object: "chat.completion", created, model,
          choices: [{ index: 0, message: { role: "assistant", content: null, tool_calls: [{ id: call.id, type: "function", function: { name: call.name, arguments: call.arguments } }], refusal: null }, logprobs: null, finish_reason: "tool_calls" }],
          usage,
        });
      }
      if (body.stream === true) {
        const chunk = (delta: Record<string, unknown>, finish: string | null) =>
          `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [{ index: 0, delta, logprobs: null, finish_reason: finish }] })}\n\n`;
        let out = chunk({ role: "assistant", content: "" }, null);
        for (const w of content.split(/(?<= )/)) out += chunk({ content: w }, null);
        out += chunk({}, "stop");
        if (body.stream_options?.include_usage) out += `data: ${JSON.stringify({ id, object: "chat.completion.chunk", created, model, choices: [], usage })}\n\n`;
        out += "data: [DONE]\n\n";
        return new Response(enc.encode(out), { headers: { "content-type": "text/event-stream" } });
      }
      return json({
        id, object: "chat.completion", created, model,
        choices: [{ index: 0, message: { role: "assistant", content, refusal: null }, logprobs: null, finish_reason: "stop" }],
        usage,
      });
    },
  });

  return {
    url: server.origin,
    token,
    received,
    get completions() { return received.filter((r) => r.path === "/v1/chat/completions"); },
    get healthChecks() { return healthChecks; },
    setHealthy(ok) { healthy = ok; },
    setFail(status) { fail = status; },
    setRedirect(location) { redirect = location; },
    setReply(text) { reply = text; },
    setModels(list) { models = list; },
    stop: server.stop,
  };
}
