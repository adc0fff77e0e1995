// What a stream may make the gateway hold. A client that stops reading (a stalled agent, or an
// attacker opening many streams and reading none) must not make it read the upstream's answer into
// memory: the relay pulls from the upstream only as the client takes what it was sent, so the
// upstream's own writes stall once the sockets' buffers between them are full. When the client
// finally leaves, the upstream's connection closes and the request is accounted as aborted. And an
// upstream that never ends an SSE event (garbage, or a hostile bridge) breaks its stream at
// MAX_SSE_EVENT_BYTES instead of being held whole. The upstream here is a raw HTTP/1.1 server that
// writes an endless answer only as fast as its socket drains, counting what it wrote.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, connect, type Server, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { MAX_SSE_EVENT_BYTES } from "../../src/protocols/sse.ts";
import { MAX_UPSTREAM_ANSWER_BYTES, MAX_UPSTREAM_ERROR_BYTES } from "../../src/net/read-capped.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, usageRows } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";

const sleep = Bun.sleep;

/** Chunked transfer framing of one piece. */
const framedPiece = (text: string) => `${text.length.toString(16)}\r\n${text}\r\n`;

/**
 * An OpenAI-style upstream whose answer never ends; `written` is what its sockets accepted. What
 * it answers follows a marker in the request: "answer late" (after the gateway's KEEPALIVE_MS),
 * "no boundary" (one `data: ` line that never ends), "error then hold" (a content chunk, an error
 * event, then nothing on an open connection), "endless json" (a non-streamed answer that never
 * ends; "as an error": with status 500); else SSE events without end.
 */
function endlessUpstream() {
  const state = { written: 0, sockets: new Set<Socket>() };
  const chunk = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4o-mini", choices: [{ index: 0, delta: { content: "x".repeat(4000) }, finish_reason: null }] })}\n\n`;
  const events = framedPiece(chunk);
  const garbage = framedPiece("g".repeat(16 * 1024));
  const head = (status: number, type: string) => `HTTP/1.1 ${status} X\r\ncontent-type: ${type}\r\ntransfer-encoding: chunked\r\n\r\n`;
  /** Writes `first`, then `piece` over and over, only as fast as the socket drains. */
  const pumpForever = (sock: Socket, first: string, piece: string) => {
    if (sock.destroyed) return;
    sock.write(first);
    const pump = () => {
      while (!sock.destroyed) {
        state.written += piece.length;
        if (!sock.write(piece)) return void sock.once("drain", pump);
      }
    };
    pump();
  };
  const server: Server = createServer((sock) => {
    state.sockets.add(sock);
    sock.on("close", () => state.sockets.delete(sock));
    sock.on("error", () => {});
    let req = "";
    sock.on("data", (d) => {
      req += d.toString("latin1");
      if (!req.includes("\r\n\r\n")) return;
      const m = /content-length: *(\d+)/i.exec(req);
      if (m && req.length - req.indexOf("\r\n\r\n") - 4 < Number(m[1])) return;
      sock.removeAllListeners("data");
      if (req.includes("error then hold")) {
        const text = `${chunk.replace("x".repeat(4000), "partial")}data: ${JSON.stringify({ error: { message: "overloaded mid-answer", type: "server_error", code: null } })}\n\n`;
        sock.write(head(200, "text/event-stream") + framedPiece(text));
      } else if (req.includes("endless json")) {
        pumpForever(sock, head(req.includes("as an error") ? 500 : 200, "application/json") + framedPiece('{"a":"aa'), garbage);
      } else if (req.includes("no boundary")) {
        pumpForever(sock, head(200, "text/event-stream") + framedPiece("data: "), garbage);
      } else {
        setTimeout(() => pumpForever(sock, head(200, "text/event-stream"), events), req.includes("answer late") ? 600 : 0);
      }
    });
  });
  return new Promise<{ url: string; state: typeof state; stop: () => Promise<void> }>((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      resolve({
        url: `http://127.0.0.1:${port}/v1`,
        state,
        stop: () => new Promise<void>((r) => { for (const s of state.sockets) s.destroy(); server.close(() => r()); }),
      });
    });
  });
}

describe(`upstream bounds (${storesLabel}): a client that stops reading, an upstream that sends garbage, holds on after an error or never ends its answer`, () => {
  let gw: TestGateway;
  let up: Awaited<ReturnType<typeof endlessUpstream>>;
  let key: { raw: string };

  beforeAll(async () => {
    up = await endlessUpstream();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: up.url, KEEPALIVE_MS: "300" });
    const acct = await createAccount(gw);
    const cred = await addCredential(gw, acct.id, "openai");
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", cred.id)] });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await up?.stop();
  }, 60_000);

  /** Waits up to `ms` for the gateway to close every connection to the upstream. */
  const upstreamReleased = async (ms: number) => {
    await until("the upstream's connections to close", async () => (up.state.sockets.size === 0 ? true : null), ms, 20).catch(() => {});
    expect(up.state.sockets.size).toBe(0);
  };
  const recordsOf = (requestId: string) => usageRows(gw, eq(usageRecords.requestId, requestId));

  /** Opens a stream on a raw socket, stops reading after the headers, and watches the upstream. */
  async function stallAndResume(path: string, body: Record<string, unknown>, extra: Record<string, string> = {}, late = false) {
    const upstreamBefore = up.state.written;
    const u = new URL(gw.url);
    const text = JSON.stringify(body);
    const client = connect(Number(u.port), u.hostname);
    let got = 0;
    let headers = "";
    client.on("data", (d) => {
      got += d.length;
      if (!headers.includes("\r\n\r\n")) headers += d.toString("latin1");
    });
    const more = Object.entries(extra).map(([k, v]) => `${k}: ${v}\r\n`).join("");
    client.write(`POST ${path} HTTP/1.1\r\nhost: ${u.host}\r\nauthorization: Bearer ${key.raw}\r\ncontent-type: application/json\r\n${more}content-length: ${Buffer.byteLength(text)}\r\n\r\n${text}`);
    while (!headers.includes("\r\n\r\n")) await sleep(10);
    expect(headers).toStartWith("HTTP/1.1 200");
    // A late upstream: the client's headers (and a comment) came before the upstream's first byte.
    if (late) expect(up.state.written).toBe(upstreamBefore);
    client.pause();
    // Every buffer between the upstream and the paused client fills; then the upstream stalls.
    const before = up.state.written;
    await sleep(2000);
    const stalledAt = up.state.written;
    await sleep(1500);
    const grew = up.state.written - stalledAt;
    expect(stalledAt - before).toBeLessThan(64e6);
    expect(grew).toBeLessThan(1e6);
    // Reading again: the stream moves on.
    client.resume();
    const had = got;
    await sleep(500);
    expect(got - had).toBeGreaterThan(1e6);
    // The client leaves: the upstream's connection is closed, and the request is one record, aborted.
    const id = /\r\nx-request-id: *([^\r]+)/i.exec(headers)?.[1];
    expect(id).toBeDefined();
    client.destroy();
    await upstreamReleased(10_000);
    const rows = await recordsOf(id!);
    expect(rows.map((r) => [r.status, r.outcome])).toEqual([[200, "aborted"]]);
    expect(rows[0]!.completionTokens).toBeGreaterThan(0);
  }

  test("pass-through: the gateway stops reading the upstream while the client does not read and goes on when it does; when the client leaves, the upstream connection closes and the request is one aborted record with its output counted", async () => {
    await stallAndResume("/v1/chat/completions", { model: "gpt-4o-mini", stream: true, messages: [{ role: "user", content: "go" }] });
  }, 30_000);

  test("translated (an Anthropic client on an OpenAI lane): the same", async () => {
    await stallAndResume("/v1/messages", { model: "gpt-4o-mini", stream: true, max_tokens: 100, messages: [{ role: "user", content: "go" }] }, { "anthropic-version": "2023-06-01" });
  }, 30_000);

  test("CONTRACT §8 keep-alive: a stream answered with comments while the upstream was silent holds back the same way once the upstream answers", async () => {
    await stallAndResume("/v1/chat/completions", { model: "gpt-4o-mini", stream: true, messages: [{ role: "user", content: "answer late" }] }, {}, true);
  }, 30_000);

  test.each([
    ["pass-through", "/v1/chat/completions", {}, {}],
    ["translated", "/v1/messages", { max_tokens: 100 }, { "anthropic-version": "2023-06-01" }],
  ] as const)("%s: an upstream that never ends an event: the stream breaks with the protocol's error event once the event passes MAX_SSE_EVENT_BYTES, the upstream is let go, and the record says broken", async (_, path, extra, headers) => {
    const before = up.state.written;
    const r = await gw.req(path, { token: key.raw, headers, body: { model: "gpt-4o-mini", stream: true, ...extra, messages: [{ role: "user", content: "no boundary" }] } });
    const id = r.headers.get("x-request-id")!;
    const text = await r.text();
    expect(r.status).toBe(200);
    expect(text).toContain("error");
    expect(text).toContain("more than 16 MiB, or bytes that never end an event. Retry later");
    expect(up.state.written - before).toBeLessThan(MAX_SSE_EVENT_BYTES + 48e6);
    await upstreamReleased(10_000);
    const rows = await recordsOf(id);
    expect(rows.map((x) => [x.status, x.outcome])).toEqual([[r.status, "broken"]]);
  }, 30_000);

  test("CONTRACT §8: an error event mid-stream on a translated stream ends the client's stream and lets the upstream go, though it keeps its connection open", async () => {
    const r = await gw.req("/v1/messages", { token: key.raw, headers: { "anthropic-version": "2023-06-01" }, body: { model: "gpt-4o-mini", stream: true, max_tokens: 100, messages: [{ role: "user", content: "error then hold" }] } });
    const text = await r.text();
    expect(text).toContain("partial");
    expect(text).toContain("event: error");
    await upstreamReleased(2000);
  }, 30_000);

  test("an answer that never ends is given up past MAX_UPSTREAM_ANSWER_BYTES: the lane fails (502 here, the next lane would serve), the upstream is let go, and the attempt is charged its worst case", async () => {
    const before = up.state.written;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: { model: "gpt-4o-mini", max_tokens: 1000, messages: [{ role: "user", content: "endless json" }] } });
    expect(r.status).toBe(502);
    expect(r.body.error.message).toContain("larger than 128 MiB");
    expect(up.state.written - before).toBeLessThan(MAX_UPSTREAM_ANSWER_BYTES + 48e6);
    await upstreamReleased(10_000);
    const rows = await recordsOf(r.headers.get("x-request-id")!);
    expect(rows.map((x) => [x.status, x.outcome, x.errorCode])).toEqual([[200, "broken", "answer_too_large"]]);
    expect(rows[0]!.completionTokens).toBe(1000);
  }, 60_000);

  test("an error body that never ends is read to MAX_UPSTREAM_ERROR_BYTES at most: the lane fails with the upstream's status", async () => {
    const before = up.state.written;
    const r = await gw.call("/v1/chat/completions", { token: key.raw, body: { model: "gpt-4o-mini", messages: [{ role: "user", content: "endless json as an error" }] } });
    expect(r.status).toBe(502);
    expect(r.body.error.message).toContain("HTTP 500");
    expect(up.state.written - before).toBeLessThan(MAX_UPSTREAM_ERROR_BYTES + 48e6);
    await upstreamReleased(10_000);
  }, 60_000);
});
