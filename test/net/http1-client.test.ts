// The keep-alive HTTP/1.1 upstream client against real loopback servers: Bun.serve for well-formed
// answers, raw TCP servers (Bun.listen) for byte-exact framing, split reads and broken answers.
import { afterAll, afterEach, describe, expect, test } from "bun:test";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { Http1Client, UpstreamProtocolError } from "../../src/net/http1-client.ts";

const clients: Http1Client[] = [];
const stops: Array<() => void> = [];
afterEach(() => {
  for (const c of clients.splice(0)) c.close();
  for (const s of stops.splice(0)) s();
});

function client(opts?: ConstructorParameters<typeof Http1Client>[0]): Http1Client {
  const c = new Http1Client(opts);
  clients.push(c);
  return c;
}

function post(c: Http1Client, url: string, body = "{}", signal?: AbortSignal): Promise<Response> {
  return c.request({ method: "POST", url: new URL(url), headers: { "content-type": "application/json", authorization: "Bearer sk-test" }, body, signal });
}

/** A raw TCP server: `onRequest` gets the socket and the request text each time a full request head (and body) arrived. */
function rawServer(onRequest: (s: import("bun").Socket<{ buf: string; conn: number }>, req: string, conn: number) => void) {
  let conns = 0;
  let live = 0;
  let maxLive = 0;
  const server = Bun.listen<{ buf: string; conn: number }>({
    hostname: "127.0.0.1",
    port: 0,
    socket: {
      open(s) {
        s.data = { buf: "", conn: ++conns };
        live++;
        maxLive = Math.max(maxLive, live);
      },
      data(s, d) {
        s.data.buf += d.toString("latin1");
        for (;;) {
          const end = s.data.buf.indexOf("\r\n\r\n");
          if (end < 0) return;
          const len = Number(/content-length: (\d+)/i.exec(s.data.buf.slice(0, end))?.[1] ?? 0);
          if (s.data.buf.length < end + 4 + len) return;
          const req = s.data.buf.slice(0, end + 4 + len);
          s.data.buf = s.data.buf.slice(end + 4 + len);
          onRequest(s, req, s.data.conn);
        }
      },
      close() {
        live--;
      },
    },
  });
  stops.push(() => server.stop(true));
  return { url: `http://127.0.0.1:${server.port}/v1/chat/completions`, stats: () => ({ conns, live, maxLive }) };
}

/** Writes `parts` one by one with a pause between, so each lands in its own read on the client. */
async function dribble(s: import("bun").Socket<any>, parts: string[], gapMs = 15) {
  for (const p of parts) {
    s.write(p);
    await Bun.sleep(gapMs);
  }
}

describe("HTTP/1.1 upstream client", () => {
  test("RFC 9112 content-length: a JSON POST arrives intact and the answer reads like fetch's", async () => {
    let got: { method: string; path: string; auth: string | null; body: string } | null = null;
    const server = Bun.serve({
      hostname: "127.0.0.1",
      port: 0,
      async fetch(req) {
        got = { method: req.method, path: new URL(req.url).pathname + new URL(req.url).search, auth: req.headers.get("authorization"), body: await req.text() };
        return Response.json({ ok: true, echo: got.body.length }, { status: 201, headers: { "x-request-id": "up-1" } });
      },
    });
    stops.push(() => server.stop(true));
    const c = client();
    const body = JSON.stringify({ model: "m", messages: [{ role: "user", content: "é ünïcödé ✓".repeat(50) }] });
    const res = await post(c, `http://127.0.0.1:${server.port}/v1/chat/completions?x=1`, body);
    expect(res.status).toBe(201);
    expect(res.ok).toBe(true);
    expect(res.headers.get("x-request-id")).toBe("up-1");
    expect(await res.json()).toEqual({ ok: true, echo: body.length });
    expect(got!).toEqual({ method: "POST", path: "/v1/chat/completions?x=1", auth: "Bearer sk-test", body });
  });

  test("RFC 9112 keep-alive: sequential requests to one origin reuse one connection", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}"));
    const c = client();
    for (let i = 0; i < 5; i++) expect(await (await post(c, srv.url)).text()).toBe("{}");
    expect(srv.stats().conns).toBe(1);
    expect(c.stats()).toEqual({ open: 1, idle: 1, waiting: 0 });
  });

  test("RFC 9112 connection: close: the connection is not reused", async () => {
    const srv = rawServer((s) => {
      s.write("HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 2\r\n\r\n{}");
      s.end();
    });
    const c = client();
    expect(await (await post(c, srv.url)).text()).toBe("{}");
    expect(await (await post(c, srv.url)).text()).toBe("{}");
    expect(srv.stats().conns).toBe(2);
  });

  test("RFC 9112 chunked: chunk sizes, CRLFs and data split across reads decode to the exact body", async () => {
    const body = "data: {\"a\":1}\n\ndata: {\"b\":22}\n\ndata: [DONE]\n\n";
    const chunks = [body.slice(0, 15), body.slice(15, 31), body.slice(31)];
    let wire = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
    for (const ch of chunks) wire += `${Buffer.byteLength(ch).toString(16)};ext=1\r\n${ch}\r\n`;
    wire += "0\r\nx-trailer: t\r\n\r\n";
    // Every split point: in the status line, the headers, a size line, between CR and LF, in data.
    const cuts = [5, 40, 88, 89, 90, 93, 100, 118, 119, wire.length - 3, wire.length - 1];
    const parts: string[] = [];
    let at = 0;
    for (const cut of cuts) {
      parts.push(wire.slice(at, cut));
      at = cut;
    }
    parts.push(wire.slice(at));
    const srv = rawServer((s) => void dribble(s, parts, 5));
    const c = client();
    const res = await post(c, srv.url);
    expect(res.headers.get("content-type")).toBe("text/event-stream");
    expect(res.headers.get("transfer-encoding")).toBeNull();
    expect(await res.text()).toBe(body);
    // The answer ended cleanly, so the connection went back to the pool and serves the next one.
    expect(await (await post(c, srv.url)).text()).toBe(body);
    expect(srv.stats().conns).toBe(1);
  });

  test("RFC 9112 chunked: a stream's chunks reach the reader as they arrive, not at the end", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const srv = rawServer(async (s) => {
      s.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n");
      await gate;
      s.write("6\r\nsecond\r\n0\r\n\r\n");
    });
    const res = await post(client(), srv.url);
    const reader = res.body!.getReader();
    const dec = new TextDecoder();
    expect(dec.decode((await reader.read()).value)).toBe("first");
    release();
    expect(dec.decode((await reader.read()).value)).toBe("second");
    expect((await reader.read()).done).toBe(true);
  });

  test("RFC 9112 body until close: an answer without length or chunking ends with the connection", async () => {
    const srv = rawServer((s) => {
      void dribble(s, ["HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\r\nhello ", "world"]).then(() => s.end());
    });
    const res = await post(client(), srv.url);
    expect(await res.text()).toBe("hello world");
  });

  test("RFC 9112: 100 Continue before the answer is skipped; 204 has no body", async () => {
    const srv = rawServer((s, req) => {
      if (req.includes("/v1/chat")) s.write("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nyes");
      else s.write("HTTP/1.1 204 No Content\r\n\r\n");
    });
    const c = client();
    expect(await (await post(c, srv.url)).text()).toBe("yes");
    const r = await post(c, srv.url.replace("/v1/chat/completions", "/empty"));
    expect(r.status).toBe(204);
    expect(await r.text()).toBe("");
    expect(srv.stats().conns).toBe(1);
  });

  test("gzip-encoded answers are decoded, like fetch does", async () => {
    const text = JSON.stringify({ hello: "world".repeat(100) });
    const gz = gzipSync(text);
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, fetch: () => new Response(gz, { headers: { "content-encoding": "gzip", "content-type": "application/json" } }) });
    stops.push(() => server.stop(true));
    const res = await post(client(), `http://127.0.0.1:${server.port}/`);
    expect(res.headers.get("content-encoding")).toBeNull();
    expect(await res.text()).toBe(text);
  });

  test("malformed: a status line that is not HTTP/1.x rejects with a protocol error", async () => {
    const srv = rawServer((s) => s.write("SSH-2.0-OpenSSH_9.6\r\n\r\n"));
    const err = await post(client(), srv.url).catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamProtocolError);
    expect(String(err.message)).toContain("HTTP/1.x");
  });

  test("malformed: an invalid chunk size errors the body stream and the connection is dropped", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\nzz\r\nbad\r\n"));
    const c = client();
    const res = await post(c, srv.url);
    const err = await res.text().catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamProtocolError);
    expect(String(err.message)).toContain("chunk size");
    expect(c.stats().open).toBe(0);
  });

  test("malformed: chunk data longer than its declared size is refused", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\ntoolong\r\n0\r\n\r\n"));
    const err = await (await post(client(), srv.url)).text().catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamProtocolError);
  });

  test("malformed: two different content-lengths, a bad header line, oversized headers", async () => {
    const answers = [
      "HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\n{}",
      "HTTP/1.1 200 OK\r\nno colon here\r\n\r\n",
      `HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(70_000)}\r\n\r\n`,
    ];
    let i = 0;
    const srv = rawServer((s) => s.write(answers[i++]!));
    const c = client();
    for (let k = 0; k < answers.length; k++) {
      const err = await post(c, srv.url).catch((e) => e);
      expect(err).toBeInstanceOf(UpstreamProtocolError);
    }
  });

  test("the upstream closing before answering rejects; closing mid-body errors the stream", async () => {
    let n = 0;
    const srv = rawServer((s) => {
      if (n++ === 0) s.end();
      else {
        s.write("HTTP/1.1 200 OK\r\ncontent-length: 100\r\n\r\nonly a part");
        setTimeout(() => s.end(), 10);
      }
    });
    const c = client();
    const first = await post(c, srv.url).catch((e) => e);
    expect(first).toBeInstanceOf(UpstreamProtocolError);
    expect(String(first.message)).toContain("before answering");
    const res = await post(c, srv.url);
    const err = await res.text().catch((e) => e);
    expect(err).toBeInstanceOf(UpstreamProtocolError);
    expect(String(err.message)).toContain("mid-answer");
  });

  test("keep-alive race: a reused connection closed without a byte is retried once on a fresh one", async () => {
    const srv = rawServer((s, _req, conn) => {
      // Connection 1 answers its first request, then closes on the second one without answering.
      if (conn === 1 && (s.data as any).served) return void s.end();
      (s.data as any).served = true;
      s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    });
    const c = client();
    expect(await (await post(c, srv.url)).text()).toBe("ok");
    expect(await (await post(c, srv.url)).text()).toBe("ok");
    expect(srv.stats().conns).toBe(2);
  });

  test("abort: a signal aborted while waiting for the answer rejects with its reason and closes the connection", async () => {
    const srv = rawServer(() => {});
    const c = client();
    const ac = new AbortController();
    const p = post(c, srv.url, "{}", ac.signal);
    await Bun.sleep(30);
    const reason = new Error("caller gave up");
    ac.abort(reason);
    expect(await p.catch((e) => e)).toBe(reason);
    await Bun.sleep(30);
    expect(srv.stats().live).toBe(0);
    expect(c.stats().open).toBe(0);
  });

  test("abort: aborting mid-stream errors the reader; cancelling the body closes the connection", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nfirst\r\n"));
    const c = client();
    const ac = new AbortController();
    const res = await post(c, srv.url, "{}", ac.signal);
    const reader = res.body!.getReader();
    expect((await reader.read()).done).toBe(false);
    ac.abort(new Error("timeout"));
    expect(await reader.read().catch((e) => e.message)).toBe("timeout");
    const res2 = await post(c, srv.url);
    await res2.body!.cancel();
    await Bun.sleep(30);
    expect(c.stats().open).toBe(0);
    expect(srv.stats().live).toBe(0);
  });

  test("pool limit: connections per origin are capped and the requests beyond it wait their turn", async () => {
    const srv = rawServer((s) => setTimeout(() => s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"), 40));
    const c = client({ maxConnectionsPerOrigin: 2 });
    const all = await Promise.all(Array.from({ length: 6 }, () => post(c, srv.url).then((r) => r.text())));
    expect(all).toEqual(Array(6).fill("ok"));
    expect(srv.stats().maxLive).toBe(2);
    expect(srv.stats().conns).toBe(2);
  });

  test("idle connections close after the idle timeout", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"));
    const c = client({ idleTimeoutS: 1 });
    await (await post(c, srv.url)).text();
    expect(c.stats().idle).toBe(1);
    await Bun.sleep(2200);
    expect(c.stats().open).toBe(0);
    expect(srv.stats().live).toBe(0);
  });

  test("a refused connection rejects (the lane fails over)", async () => {
    const port = (() => {
      const s = Bun.listen({ hostname: "127.0.0.1", port: 0, socket: { data() {} } });
      const p = s.port;
      s.stop(true);
      return p;
    })();
    const c = client();
    expect(await post(c, `http://127.0.0.1:${port}/`).catch((e) => e)).toBeInstanceOf(Error);
    expect(c.stats().open).toBe(0);
  });

  test("a header value with a line break is refused before anything is sent", async () => {
    const srv = rawServer((s) => s.write("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"));
    const c = client();
    expect(() => c.request({ method: "POST", url: new URL(srv.url), headers: { "x-a": "b\r\nx-injected: 1" }, body: "{}" })).toThrow(TypeError);
    expect(srv.stats().conns).toBe(0);
  });

  test("fetch stays the path for proxies from the environment and non-http URLs", () => {
    expect(Http1Client.handles(new URL("http://127.0.0.1/v1"), {})).toBe(true);
    expect(Http1Client.handles(new URL("https://api.openai.com/v1"), {})).toBe(true);
    expect(Http1Client.handles(new URL("https://api.openai.com/v1"), { HTTPS_PROXY: "http://proxy:3128" })).toBe(false);
    expect(Http1Client.handles(new URL("file:///etc/passwd"), {})).toBe(false);
  });
});

describe("HTTP/1.1 upstream client over TLS", () => {
  const dir = mkdtempSync(join(tmpdir(), "http1-tls-"));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));
  const made = Bun.spawnSync(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost",
    "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-keyout", join(dir, "key.pem"), "-out", join(dir, "cert.pem")]);

  test.skipIf(made.exitCode !== 0)("TLS through Bun.connect: verified against the server's CA, refused without it", async () => {
    const cert = readFileSync(join(dir, "cert.pem"), "utf8");
    const key = readFileSync(join(dir, "key.pem"), "utf8");
    const server = Bun.serve({ hostname: "127.0.0.1", port: 0, tls: { cert, key }, fetch: async (req) => new Response(`tls:${await req.text()}`) });
    stops.push(() => server.stop(true));
    const url = `https://localhost:${server.port}/v1/x`;
    const trusted = client({ tls: { ca: cert } });
    expect(await (await post(trusted, url, "hi")).text()).toBe("tls:hi");
    expect(await (await post(trusted, url, "again")).text()).toBe("tls:again");
    expect(trusted.stats().open).toBe(1);
    const strict = client();
    expect(await post(strict, url, "hi").catch((e) => e)).toBeInstanceOf(Error);
  });
});
