// A pass-through stream whose events arrive cut into many small reads: an event of megabytes
// carried across hundreds of reads, and events whose text is built to make a scanner do the most
// work per byte (escaped usage and error markers, line ends of every kind, in every event). Each
// must reach the client byte for byte, the usage event at its end must be what the request is
// charged, and the event loop must never be held for long: the longest gap of a 1 ms timer during
// the request is printed beside each test and bounded far above a linear scan, so a copy per read
// (quadratic in the event's size) or a scan that backtracks fails it.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { createServer, type Server, type Socket } from "node:net";
import { eq } from "drizzle-orm";
import { usageRecords } from "../../src/store/db/schema/index.ts";
import { createAccount, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { addCredential, addRoutingKey, lane, usageRows } from "../helpers/relay-world.ts";
import { until } from "../helpers/until.ts";

const framed = (b: Buffer) => Buffer.concat([Buffer.from(`${b.length.toString(16)}\r\n`), b, Buffer.from("\r\n")]);
const chunk = (content: string) => `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4o-mini", choices: [{ index: 0, delta: { content }, finish_reason: null }], usage: null })}\n\n`;
const USAGE = { prompt_tokens: 11, completion_tokens: 4321, total_tokens: 4332 };
const tail = `data: ${JSON.stringify({ id: "c", object: "chat.completion.chunk", created: 1, model: "gpt-4o-mini", choices: [], usage: USAGE })}\n\ndata: [DONE]\n\n`;

/** The answers: one 8 MB event, or 2,000 events of marker-laden text; written in `piece`-byte writes, each its own chunk of the HTTP framing. */
const ANSWERS: Record<string, { text: string; piece: number }> = {
  "one huge event": { text: chunk("first") + chunk("z".repeat(8 * 1024 * 1024)) + tail, piece: 1024 },
  "marker-laden events": {
    text: Array.from({ length: 2000 }, (_, i) => chunk(`${'"usage":{"prompt_tokens":1} "error":{} \r\n\r\r\n\n'.repeat(20)}${i}`)).join("") + tail,
    piece: 777,
  },
};

/** A raw HTTP/1.1 upstream that writes its answer in small pieces, each after the socket drained. */
function piecemealUpstream() {
  const sockets = new Set<Socket>();
  const server: Server = createServer((sock) => {
    sockets.add(sock);
    sock.on("close", () => sockets.delete(sock));
    sock.on("error", () => {});
    let req = "";
    sock.on("data", (d) => {
      req += d.toString("latin1");
      const m = /content-length: *(\d+)/i.exec(req);
      if (!req.includes("\r\n\r\n") || (m && req.length - req.indexOf("\r\n\r\n") - 4 < Number(m[1]))) return;
      sock.removeAllListeners("data");
      const answer = Object.entries(ANSWERS).find(([marker]) => req.includes(marker))![1];
      const bytes = Buffer.from(answer.text);
      sock.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n");
      let at = 0;
      const next = () => {
        while (at < bytes.length && !sock.destroyed) {
          const ok = sock.write(framed(bytes.subarray(at, (at += answer.piece))));
          if (!ok) return void sock.once("drain", next);
        }
        if (!sock.destroyed) sock.end("0\r\n\r\n");
      };
      next();
    });
  });
  return new Promise<{ url: string; stop: () => Promise<void> }>((resolve) => {
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as { port: number }).port;
      resolve({ url: `http://127.0.0.1:${port}/v1`, stop: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }) });
    });
  });
}

describe(`pass-through streams cut into small reads (${storesLabel}): megabyte events and marker-laden text`, () => {
  let gw: TestGateway;
  let up: Awaited<ReturnType<typeof piecemealUpstream>>;
  let key: { raw: string };

  beforeAll(async () => {
    up = await piecemealUpstream();
    gw = await startTestGateway({ PROVIDER_OPENAI_BASE_URL: up.url });
    const acct = await createAccount(gw);
    key = await addRoutingKey(gw, acct.id, { lanes: [lane("openai", (await addCredential(gw, acct.id, "openai")).id)], monthlyBudgetUsd: 100 });
  }, 60_000);
  afterAll(async () => {
    await gw?.stop();
    await up?.stop();
  }, 60_000);

  for (const marker of Object.keys(ANSWERS)) {
    test(`${marker}: byte for byte to the client, charged the usage event's counts, the loop never held long`, async () => {
      let longest = 0;
      let last = performance.now();
      const ticker = setInterval(() => {
        const now = performance.now();
        longest = Math.max(longest, now - last);
        last = now;
      }, 1);
      let text: string;
      let requestId: string | null;
      try {
        const res = await gw.req("/v1/chat/completions", {
          method: "POST",
          token: key.raw,
          body: { model: "gpt-4o-mini", stream: true, stream_options: { include_usage: true }, messages: [{ role: "user", content: marker }] },
        });
        expect(res.status).toBe(200);
        requestId = res.headers.get("x-request-id");
        text = await res.text();
      } finally {
        clearInterval(ticker);
      }
      console.log(`${marker}: the event loop's longest gap during the request was ${longest.toFixed(1)} ms`);
      // The gateway's only rewrite: its cost in the usage event (CONTRACT §9).
      const want = ANSWERS[marker]!.text;
      expect(text.slice(0, want.length - tail.length)).toBe(want.slice(0, want.length - tail.length));
      expect(text.endsWith("data: [DONE]\n\n")).toBe(true);
      expect(text).toContain('"completion_tokens":4321');
      expect(longest).toBeLessThan(1000);
      const rows = await until("the usage record", async () => {
        const r = await usageRows(gw, eq(usageRecords.requestId, requestId!));
        return r.length ? r : null;
      }, 10_000);
      expect(rows.map((r) => [r.outcome, r.promptTokens, r.completionTokens])).toEqual([["ok", 11, 4321]]);
    }, 60_000);
  }
});
