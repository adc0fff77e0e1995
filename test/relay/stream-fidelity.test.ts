// What an agent's stream must survive on the pass-through path. Real Responses streams echo the
// request's tools and the whole answer in response.created / response.completed, and every
// Responses object carries `"error":null`: those events (33 kB with 40 tools, megabytes for a long
// answer) reach the client byte for byte. Codex hangs up as soon as it reads response.completed:
// the request is served, not abandoned (CONTRACT §9). And its WebSocket probe gets 426 at once.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, connect, type Server, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, usageRows } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";

const tools = Array.from({ length: 40 }, (_, i) => ({
  type: "function",
  name: `tool_${i}`,
  description: `Tool number ${i}: ${"does something useful with files and the shell. ".repeat(12)}`,
  parameters: { type: "object", properties: { path: { type: "string", description: "A path." } }, required: ["path"] },
  strict: false,
}));

const response = (status: string, text: string, usage: unknown) => ({
  id: "resp_fidelity", object: "response", created_at: 1, status, error: null, incomplete_details: null,
  instructions: "You are a coding agent.", model: "gpt-4.1-mini", tools, usage,
  output: text ? [{ type: "message", id: "msg_1", status: "completed", role: "assistant", content: [{ type: "output_text", text, annotations: [] }] }] : [],
});

/** A Responses SSE stream as OpenAI sends it: echoing tools in response.created, the whole answer in response.completed. */
function responsesStream(answer: string): string {
  const usage = { input_tokens: 900, output_tokens: 1200, total_tokens: 2100, input_tokens_details: { cached_tokens: 0 }, output_tokens_details: { reasoning_tokens: 0 } };
  const ev = (type: string, body: Record<string, unknown>, seq: number) => `event: ${type}\ndata: ${JSON.stringify({ type, sequence_number: seq, ...body })}\n\n`;
  return [
    ev("response.created", { response: response("in_progress", "", null) }, 0),
    ev("response.output_text.delta", { item_id: "msg_1", output_index: 0, content_index: 0, delta: answer.slice(0, 10) }, 1),
    ev("response.output_text.delta", { item_id: "msg_1", output_index: 0, content_index: 0, delta: answer.slice(10) }, 2),
    ev("response.completed", { response: response("completed", answer, usage) }, 3),
  ].join("");
}

const framed = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

/**
 * A raw HTTP/1.1 upstream. "hold after" in the request: the stream's last event is written, then
 * the connection stays open for 3 s before the chunked body ends (the client leaves in between).
 */
function scriptedUpstream(answer: string) {
  const sockets = new Set<Socket>();
  const body = responsesStream(answer);
  const chat = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4.1-mini", choices: [{ index: 0, delta: { role: "assistant", content: "hi" }, finish_reason: null }] })}\n\n`
    + `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4.1-mini", choices: [{ index: 0, delta: {}, finish_reason: "stop" }] })}\n\n`
    + `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4.1-mini", choices: [], usage: { prompt_tokens: 12, completion_tokens: 1, total_tokens: 13 } })}\n\n`
    + "data: [DONE]\n\n";
  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let req = "";
    sock.on("data", (d) => {
      req += d.toString("latin1");
      const head = req.indexOf("\r\n\r\n");
      if (head < 0) return;
      const m = /content-length: *(\d+)/i.exec(req);
      if (m && Buffer.byteLength(req.slice(head + 4), "latin1") < Number(m[1])) return;
      sock.removeAllListeners("data");
      const text = req.includes("/chat/completions") ? chat : body;
      sock.write(`HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n`);
      sock.write(framed(text));
      const end = () => { if (!sock.destroyed) sock.end("0\r\n\r\n"); };
      if (req.includes("hold after")) setTimeout(end, 3000);
      else end();
    });
  });
  return new Promise<{ url: string; sockets: Set<Socket>; body: string; stop: () => Promise<void> }>((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      resolve({ url: `http://127.0.0.1:${port}/v1`, sockets, body, stop: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }) });
    });
  });
}

describe(`stream fidelity (${storesLabel}): agents' Responses streams pass through intact`, () => {
  let gw: TestGateway;
  let up: Awaited<ReturnType<typeof scriptedUpstream>>;
  let key: { raw: string };
  // An answer of ~5 MB: response.completed carries it whole, with `"error":null`, and the lane has a secret.
  const answer = `${"The quick brown fox writes a long patch. ".repeat(128 * 1024)}end.`;

  beforeAll(async () => {
    up = await scriptedUpstream(answer);
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: up.url });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await up?.stop();
  }, 60_000);

  test("a pass-through Responses stream with a 33 kB response.created and a 5 MB response.completed reaches the client byte for byte", async () => {
    expect(Buffer.byteLength(up.body)).toBeGreaterThan(10 * 1024 * 1024); // the answer twice: the deltas and response.completed
    const res = await gw.req("/v1/responses", { token: key.raw, body: { model: "gpt-4.1-mini", stream: true, input: "write it", tools } });
    expect(res.status).toBe(200);
    const got = await res.text();
    const requestId = res.headers.get("x-request-id")!;
    const rows = await until("the record", async () => {
      const r = await usageRows(gw, eq(usageRecords.requestId, requestId));
      return r.length ? r : null;
    }, 10_000);
    expect(rows[0]!.outcome).toBe("ok");
    expect(rows[0]!.completionTokens).toBe(1200);
    // The one change: the gateway's cost, written into response.completed's usage in place (CONTRACT §9).
    const usageEnd = `"output_tokens_details":{"reasoning_tokens":0}}`;
    const at = up.body.lastIndexOf(usageEnd) + usageEnd.length - 1;
    const cost = `,"cost":${JSON.stringify(rows[0]!.costUsd)}`;
    expect(got.length).toBe(up.body.length + cost.length);
    expect(got === up.body.slice(0, at) + cost + up.body.slice(at)).toBe(true);
  }, 60_000);

  /** A raw client that sends a streamed request and hangs up once `marker` has arrived. */
  async function hangUpAfter(path: string, body: Record<string, unknown>, marker: string): Promise<string> {
    const u = new URL(gw.url);
    const text = JSON.stringify(body);
    const client = connect(Number(u.port), u.hostname);
    let got = "";
    const seen = new Promise<void>((resolve) => {
      client.on("data", (d) => {
        got += d.toString("utf8");
        if (got.includes(marker)) resolve();
      });
    });
    client.write(`POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${key.raw}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    await seen;
    client.destroy();
    return /x-request-id: *([^\r\n]+)/i.exec(got)![1]!;
  }

  for (const [name, path, body, marker] of [
    ["Responses, after response.completed", "/v1/responses", { model: "gpt-4.1-mini", stream: true, input: "hold after", tools }, '"type":"response.completed"'],
    ["chat, after [DONE]", "/v1/chat/completions", { model: "gpt-4.1-mini", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: "hold after" }] }, "data: [DONE]"],
  ] as const) {
    test(`CONTRACT §9: a client that hangs up right after the terminal event (${name}) is served: outcome ok, full usage`, async () => {
      const requestId = await hangUpAfter(path, body, marker);
      const rows = await until("the record", async () => {
        const r = await usageRows(gw, eq(usageRecords.requestId, requestId));
        return r.length ? r : null;
      }, 10_000);
      expect(rows.length).toBe(1);
      expect(rows[0]!.outcome).toBe("ok");
      expect(rows[0]!.status).toBe(200);
      expect(rows[0]!.provider).toBe("openai");
      expect(rows[0]!.promptTokens).toBe(path === "/v1/responses" ? 900 : 12);
      const line = await until("the access line", async () => gw.logs.find((l) => l.includes(requestId) && l.includes('"served_by"')) ?? null, 5000);
      expect(line).toContain('"served_by":"openai');
    }, 30_000);
  }

  test("CONTRACT §9: a WebSocket upgrade of GET /v1/responses answers 426 at once (never 405); a plain GET still 405", async () => {
    const ws = await gw.req("/v1/responses", { method: "GET", token: key.raw, headers: { upgrade: "websocket", connection: "Upgrade", "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" } });
    expect(ws.status).toBe(426);
    const body = await ws.json() as { error: { code: string; message: string } };
    expect(body.error.code).toBe("websocket_not_supported");
    expect(body.error.message).toContain("POST");
    const plain = await gw.req("/v1/responses", { method: "GET", token: key.raw });
    expect(plain.status).toBe(405);
  });
});
