// A keep-alive HTTP/1.1 client on Bun.connect for upstream calls. Bun's fetch runs every
// connection on its own HTTP-client thread, so each request and every response chunk of a stream
// crosses threads (a futex wakeup and a context switch on a pinned core); this client reads the
// socket on the JS thread that relays the bytes. It answers with a standard `Response`, so the
// relay reads it exactly like fetch's.
//
// What it does: one request per connection at a time, connections reused per origin (LIFO, idle
// ones closed after idleTimeoutS), a cap on connections per origin with a FIFO queue beyond it,
// Content-Length, chunked and read-until-close bodies, gzip/deflate answers decoded, TLS through
// `Bun.connect({ tls })` (certificates verified), a connect timeout, abort through the signal (a
// request or a body in flight), backpressure (the socket pauses while the reader is behind).
// A request sent on a reused connection that the server closed before answering a single byte
// (the keep-alive race) is sent once more on a fresh connection, as browsers and Go do.
// What it leaves to fetch (`handles()` says no): proxies from the environment, non-http(s) URLs.
// It follows no redirects: a 3xx reaches the caller as it is (an upstream API never redirects a POST).
import type { Socket } from "bun";

export interface Http1ClientOptions {
  /** Connections per origin (busy + idle); requests beyond wait in order. Default 256, like Bun's fetch. */
  maxConnectionsPerOrigin?: number;
  /** Idle connections kept per origin. Default 64. */
  maxIdlePerOrigin?: number;
  /** An idle connection is closed after about this many seconds (servers commonly close at 5+ s). Default 4. */
  idleTimeoutS?: number;
  /** Connecting (TCP + TLS) must finish within this. Default 10 s. */
  connectTimeoutMs?: number;
  /** Status line + headers larger than this are a malformed answer. Default 64 KiB. */
  maxHeaderBytes?: number;
  /** Extra TLS options (tests pass the `ca` of a self-signed loopback server). */
  tls?: { ca?: string | string[]; rejectUnauthorized?: boolean };
}

export interface Http1Request {
  method: string;
  url: URL;
  headers: Record<string, string>;
  body?: string | Uint8Array;
  signal?: AbortSignal;
}

/** The upstream answered something that is not HTTP/1.x, or went away mid-answer. */
export class UpstreamProtocolError extends Error {
  override name = "UpstreamProtocolError";
}

const PROXY_VARS = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"];
/** Read once: the environment's proxy settings do not change while the process runs. */
const PROXY_FROM_ENV = PROXY_VARS.some((v) => process.env[v]);
const MAX_LINE = 8192;
const CR = 13;
const LF = 10;
const HEAD_END = Buffer.from("\r\n\r\n");
const enum S { Head, Length, ChunkSize, ChunkData, ChunkEnd, Trailers, UntilClose, Done }

type Sock = Socket<Conn>;

/** One request/response on a connection: the writer, the response parser and the body stream. */
class Exchange {
  state = S.Head;
  /** Bytes of an incomplete head or line carried over to the next read. */
  carry: Uint8Array | null = null;
  remaining = 0;
  gotBytes = false;
  keepAlive = true;
  responded = false;
  controller: ReadableStreamDefaultController<Uint8Array> | null = null;
  pending: Uint8Array | null = null;
  out: Uint8Array[] = [];
  onAbort: (() => void) | null = null;

  constructor(
    readonly req: Http1Request,
    readonly payload: Uint8Array,
    readonly resolve: (r: Response) => void,
    readonly reject: (e: unknown) => void,
    readonly retryable: boolean,
  ) {}
}

class Conn {
  socket: Sock | null = null;
  ex: Exchange | null = null;
  closed = false;
  /** Has completed an exchange: a close before the first byte may be the keep-alive race. */
  used = false;
  idleSince = 0;
  constructor(readonly origin: Origin) {}
}

interface Waiter {
  resolve(c: Conn): void;
  reject(e: unknown): void;
}

class Origin {
  idle: Conn[] = [];
  open = 0;
  waiters: Waiter[] = [];
  constructor(readonly key: string, readonly host: string, readonly port: number, readonly tls: boolean, readonly hostHeader: string) {}
}

function indexOf(buf: Uint8Array, from: number, byte: number): number {
  return buf.indexOf(byte, from);
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

const latin1 = new TextDecoder("latin1");

export class Http1Client {
  private origins = new Map<string, Origin>();
  private readonly maxConns: number;
  private readonly maxIdle: number;
  private readonly idleS: number;
  private readonly connectMs: number;
  private readonly maxHead: number;
  private closedClient = false;
  private sweeper: ReturnType<typeof setInterval> | null = null;
  private readonly handlers;

  constructor(private readonly opts: Http1ClientOptions = {}) {
    this.maxConns = opts.maxConnectionsPerOrigin ?? 256;
    this.maxIdle = opts.maxIdlePerOrigin ?? 64;
    this.idleS = opts.idleTimeoutS ?? 4;
    this.connectMs = opts.connectTimeoutMs ?? 10_000;
    this.maxHead = opts.maxHeaderBytes ?? 64 * 1024;
    const self = this;
    this.handlers = {
      data(s: Sock, buf: Buffer) {
        const c = s.data;
        const ex = c.ex;
        if (!ex) {
          // Bytes on an idle connection: the server broke the protocol; never reuse it.
          self.destroy(c);
          return;
        }
        self.feed(c, ex, buf);
      },
      drain(s: Sock) {
        const ex = s.data.ex;
        if (ex?.pending) self.write(s.data, ex, ex.pending);
      },
      close(s: Sock, err?: Error) {
        self.onClose(s.data, err);
      },
      end(s: Sock) {
        s.end();
        self.onClose(s.data);
      },
      error(s: Sock, err: Error) {
        self.onClose(s.data, err);
      },
    };
  }

  /** Whether this client can carry a request to `url`; anything else goes through fetch. */
  static handles(url: URL, env?: Record<string, string | undefined>): boolean {
    if (url.protocol !== "http:" && url.protocol !== "https:") return false;
    return env ? !PROXY_VARS.some((v) => env[v]) : !PROXY_FROM_ENV;
  }

  /** Sends one request; resolves with the answer's status and headers, its body streaming in. */
  request(req: Http1Request): Promise<Response> {
    if (this.closedClient) return Promise.reject(new Error("the upstream client is closed"));
    if (req.signal?.aborted) return Promise.reject(req.signal.reason);
    const origin = this.originOf(req.url);
    const payload = this.serialize(req, origin);
    return new Promise<Response>((resolve, reject) => {
      this.start(origin, req, payload, resolve, reject, true);
    });
  }

  /** Open connections per origin (busy and idle) and requests waiting for one. */
  stats(): { open: number; idle: number; waiting: number } {
    let open = 0, idle = 0, waiting = 0;
    for (const o of this.origins.values()) {
      open += o.open;
      idle += o.idle.length;
      waiting += o.waiters.length;
    }
    return { open, idle, waiting };
  }

  /** Closes idle connections and refuses new requests; requests in flight finish. */
  close(): void {
    this.closedClient = true;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    for (const o of this.origins.values()) {
      for (const c of o.idle.splice(0)) this.destroy(c);
      for (const w of o.waiters.splice(0)) w.reject(new Error("the upstream client is closed"));
    }
  }

  private originOf(url: URL): Origin {
    const tls = url.protocol === "https:";
    const port = url.port ? Number(url.port) : tls ? 443 : 80;
    const key = `${url.protocol}//${url.hostname}:${port}`;
    let o = this.origins.get(key);
    if (!o) {
      const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname;
      o = new Origin(key, host, port, tls, url.host);
      this.origins.set(key, o);
    }
    return o;
  }

  private serialize(req: Http1Request, origin: Origin): Uint8Array {
    const body = req.body === undefined ? null : typeof req.body === "string" ? Buffer.from(req.body) : req.body;
    let head = `${req.method} ${req.url.pathname}${req.url.search} HTTP/1.1\r\nhost: ${origin.hostHeader}\r\n`;
    for (const name in req.headers) {
      const v = req.headers[name]!;
      // Header injection is impossible through this client: CR/LF in a name or value is refused.
      if (/[\r\n]/.test(name) || /[\r\n]/.test(v)) throw new TypeError(`header ${JSON.stringify(name)} contains a line break`);
      const lower = name.toLowerCase();
      if (lower === "host" || lower === "content-length" || lower === "connection" || lower === "transfer-encoding") continue;
      head += `${name}: ${v}\r\n`;
    }
    if (!("accept-encoding" in req.headers)) head += "accept-encoding: gzip, deflate\r\n";
    head += body ? `content-length: ${body.length}\r\n\r\n` : req.method === "GET" || req.method === "HEAD" ? "\r\n" : "content-length: 0\r\n\r\n";
    const h = Buffer.from(head, "latin1");
    return body ? concat(h, body) : h;
  }

  private start(origin: Origin, req: Http1Request, payload: Uint8Array, resolve: (r: Response) => void, reject: (e: unknown) => void, retryable: boolean): void {
    const ex = new Exchange(req, payload, resolve, reject, retryable);
    const signal = req.signal;
    let conn: Conn | null = null;
    let waiter: Waiter | null = null;
    if (signal) {
      ex.onAbort = () => {
        if (conn) this.abortExchange(conn, ex, signal.reason);
        else if (waiter) {
          const i = origin.waiters.indexOf(waiter);
          if (i >= 0) origin.waiters.splice(i, 1);
          reject(signal.reason);
        }
      };
      signal.addEventListener("abort", ex.onAbort, { once: true });
    }
    const go = (c: Conn) => {
      conn = c;
      if (signal?.aborted) {
        this.release(c);
        return reject(signal.reason);
      }
      c.ex = ex;
      c.socket!.ref();
      this.write(c, ex, payload);
    };
    const fail = (e: unknown) => {
      this.detach(ex);
      reject(e);
    };
    // An idle connection, or a new one under the cap, or a place in the queue.
    let idle: Conn | undefined;
    while ((idle = origin.idle.pop()) && idle.closed) {}
    if (idle) return go(idle);
    if (origin.open < this.maxConns) {
      this.connect(origin).then(go, fail);
      return;
    }
    waiter = { resolve: go, reject: fail };
    origin.waiters.push(waiter);
  }

  private connect(origin: Origin): Promise<Conn> {
    const c = new Conn(origin);
    origin.open++;
    return new Promise<Conn>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        if (settled) return;
        settled = true;
        c.closed = true;
        origin.open--;
        c.socket?.terminate();
        reject(new UpstreamProtocolError(`connecting to ${origin.hostHeader} took longer than ${this.connectMs} ms`));
      }, this.connectMs);
      Bun.connect<Conn>({
        hostname: origin.host,
        port: origin.port,
        data: c,
        tls: origin.tls ? { serverName: origin.host, rejectUnauthorized: true, ...this.opts.tls } : undefined,
        socket: { ...this.handlers, connectError: () => {} },
      }).then(
        (s) => {
          clearTimeout(timer);
          c.socket = s;
          if (settled) {
            s.terminate();
            return;
          }
          settled = true;
          s.setNoDelay?.(true);
          resolve(c);
        },
        (e) => {
          clearTimeout(timer);
          if (settled) return;
          settled = true;
          c.closed = true;
          origin.open--;
          this.handOver(origin);
          reject(e);
        },
      );
    });
  }

  private write(c: Conn, ex: Exchange, bytes: Uint8Array): void {
    const n = c.socket!.write(bytes);
    ex.pending = n < 0 ? null : n < bytes.length ? bytes.subarray(n) : null;
  }

  // ── parsing ──────────────────────────────────────────────────────────────────────────────────

  private feed(c: Conn, ex: Exchange, input: Uint8Array): void {
    ex.gotBytes = true;
    let buf = input;
    let off = 0;
    try {
      if (ex.state === S.Head) {
        if (ex.carry) {
          buf = concat(ex.carry, input);
          ex.carry = null;
        }
        off = this.parseHead(c, ex, buf);
        if (off < 0) return;
      }
      off = this.parseBody(ex, buf, off);
    } catch (e) {
      this.fail(c, ex, e);
      return;
    }
    this.flush(c, ex);
    if (ex.state === S.Done) {
      if (off < buf.length) ex.keepAlive = false; // bytes past the end of the answer
      this.finish(c, ex);
    }
  }

  /** Reads the status line and headers; returns the offset of the body in `buf`, or -1 when more must come. */
  private parseHead(c: Conn, ex: Exchange, buf: Uint8Array): number {
    let start = 0;
    for (;;) {
      const end = Buffer.prototype.indexOf.call(buf, HEAD_END, start) as number;
      if (end < 0) {
        if (buf.length - start > this.maxHead) throw new UpstreamProtocolError(`the upstream's response headers exceed ${this.maxHead} bytes`);
        ex.carry = buf.slice(start);
        return -1;
      }
      if (end - start > this.maxHead) throw new UpstreamProtocolError(`the upstream's response headers exceed ${this.maxHead} bytes`);
      const lines = latin1.decode(buf.subarray(start, end)).split("\r\n");
      const m = /^HTTP\/1\.([01]) (\d{3})(?: (.*))?$/.exec(lines[0]!);
      if (!m) throw new UpstreamProtocolError(`the upstream did not answer in HTTP/1.x (status line ${JSON.stringify(lines[0]!.slice(0, 40))})`);
      const status = Number(m[2]);
      const bodyAt = end + 4;
      if (status >= 100 && status < 200) {
        if (status === 101) throw new UpstreamProtocolError("the upstream switched protocols");
        start = bodyAt; // 100 Continue / 103 Early Hints: the real answer follows
        continue;
      }
      const headers = new Headers();
      let length: number | null = null;
      let chunked = false;
      let close = m[1] === "0";
      let encoding: string | null = null;
      for (let i = 1; i < lines.length; i++) {
        const line = lines[i]!;
        const colon = line.indexOf(":");
        if (colon <= 0) throw new UpstreamProtocolError(`malformed response header line ${JSON.stringify(line.slice(0, 40))}`);
        const name = line.slice(0, colon).trim().toLowerCase();
        const value = line.slice(colon + 1).trim();
        if (name === "content-length") {
          if (!/^\d{1,15}$/.test(value) || (length !== null && length !== Number(value))) throw new UpstreamProtocolError(`invalid content-length ${JSON.stringify(value)}`);
          length = Number(value);
        } else if (name === "transfer-encoding") {
          chunked = /(?:^|,)\s*chunked\s*$/i.test(value);
          if (!chunked) throw new UpstreamProtocolError(`unsupported transfer-encoding ${JSON.stringify(value)}`);
        } else if (name === "connection") {
          const v = value.toLowerCase();
          if (v.includes("close")) close = true;
          else if (v.includes("keep-alive")) close = false;
        } else if (name === "content-encoding" && value.toLowerCase() !== "identity") {
          encoding = value.toLowerCase();
        } else if (name !== "keep-alive") {
          headers.append(name, value);
        }
      }
      if (encoding !== null && encoding !== "gzip" && encoding !== "x-gzip" && encoding !== "deflate") {
        throw new UpstreamProtocolError(`unsupported content-encoding ${JSON.stringify(encoding)}`);
      }
      ex.keepAlive = !close;
      if (ex.req.method === "HEAD" || status === 204 || status === 304) ex.state = S.Done;
      else if (chunked) ex.state = S.ChunkSize; // chunked wins over a content-length (RFC 9112 6.3)
      else if (length !== null) {
        ex.remaining = length;
        ex.state = length === 0 ? S.Done : S.Length;
      } else {
        ex.state = S.UntilClose;
        ex.keepAlive = false;
      }
      ex.responded = true;
      if (ex.state === S.Done) {
        ex.resolve(new Response(null, { status, statusText: m[3] ?? "", headers }));
        return bodyAt;
      }
      if (encoding === null && ex.state === S.Length && buf.length - bodyAt >= ex.remaining) {
        // The common plain answer: headers and the whole body in one read, no stream needed.
        const n = ex.remaining;
        ex.remaining = 0;
        ex.state = S.Done;
        ex.resolve(new Response(buf.slice(bodyAt, bodyAt + n), { status, statusText: m[3] ?? "", headers }));
        return bodyAt + n;
      }
      this.streamBody(c, ex, status, m[3] ?? "", headers, encoding);
      return bodyAt;
    }
  }

  /** Resolves the caller's Response with a body that streams in as the socket reads it. */
  private streamBody(c: Conn, ex: Exchange, status: number, statusText: string, headers: Headers, encoding: string | null): void {
    let stream = new ReadableStream<Uint8Array>(
      {
        start: (ctl) => {
          ex.controller = ctl;
        },
        pull: () => {
          if (!c.closed && c.ex === ex) c.socket?.resume();
        },
        cancel: () => {
          // The reader gave up (client gone): the connection is in an unknown state, close it.
          if (c.ex === ex) this.fail(c, ex, new Error("the response body was cancelled"));
        },
      },
      { highWaterMark: 16 },
    );
    if (encoding !== null) stream = stream.pipeThrough(new DecompressionStream(encoding === "deflate" ? "deflate" : "gzip") as unknown as TransformStream<Uint8Array, Uint8Array>);
    ex.resolve(new Response(stream, { status, statusText, headers }));
  }

  private parseBody(ex: Exchange, buf: Uint8Array, off: number): number {
    while (off < buf.length && ex.state !== S.Done) {
      switch (ex.state) {
        case S.Length:
        case S.ChunkData: {
          const n = Math.min(ex.remaining, buf.length - off);
          ex.out.push(buf.slice(off, off + n));
          off += n;
          ex.remaining -= n;
          if (ex.remaining === 0) ex.state = ex.state === S.Length ? S.Done : S.ChunkEnd;
          break;
        }
        case S.UntilClose:
          ex.out.push(off === 0 ? buf.slice() : buf.slice(off));
          off = buf.length;
          break;
        default: {
          // A line: chunk size, the CRLF after chunk data, or a trailer.
          const lf = indexOf(buf, off, LF);
          let line: Uint8Array;
          if (lf < 0) {
            const part = buf.subarray(off);
            ex.carry = ex.carry ? concat(ex.carry, part) : part.slice();
            if (ex.carry.length > MAX_LINE) throw new UpstreamProtocolError("a chunked-encoding line of the upstream's answer is too long");
            return buf.length;
          }
          line = buf.subarray(off, lf);
          if (ex.carry) {
            line = concat(ex.carry, line);
            ex.carry = null;
          }
          off = lf + 1;
          const len = line.length && line[line.length - 1] === CR ? line.length - 1 : line.length;
          const text = latin1.decode(line.subarray(0, len));
          if (ex.state === S.ChunkSize) {
            const size = text.split(";", 1)[0]!.trim();
            if (!/^[0-9a-fA-F]{1,12}$/.test(size)) throw new UpstreamProtocolError(`invalid chunk size ${JSON.stringify(text.slice(0, 20))} in the upstream's answer`);
            ex.remaining = parseInt(size, 16);
            ex.state = ex.remaining === 0 ? S.Trailers : S.ChunkData;
          } else if (ex.state === S.ChunkEnd) {
            if (text !== "") throw new UpstreamProtocolError("chunk data longer than its declared size in the upstream's answer");
            ex.state = S.ChunkSize;
          } else if (text === "") {
            ex.state = S.Done; // end of the trailers
          }
        }
      }
    }
    return off;
  }

  /** Hands the body bytes of one read to the reader, in one piece. */
  private flush(c: Conn, ex: Exchange): void {
    const parts = ex.out;
    if (parts.length === 0 || !ex.controller) {
      parts.length = 0;
      return;
    }
    let bytes: Uint8Array;
    if (parts.length === 1) bytes = parts[0]!;
    else {
      let n = 0;
      for (const p of parts) n += p.length;
      bytes = new Uint8Array(n);
      n = 0;
      for (const p of parts) {
        bytes.set(p, n);
        n += p.length;
      }
    }
    parts.length = 0;
    try {
      ex.controller.enqueue(bytes);
      if ((ex.controller.desiredSize ?? 1) <= 0 && ex.state !== S.Done) c.socket?.pause();
    } catch {
      // The reader cancelled; cancel() already closed the connection.
    }
  }

  private finish(c: Conn, ex: Exchange): void {
    c.ex = null;
    this.detach(ex);
    if (ex.controller) {
      try {
        ex.controller.close();
      } catch {}
    }
    if (!ex.keepAlive) {
      this.destroy(c);
      return;
    }
    c.used = true;
    this.release(c);
  }

  // ── connection lifecycle ─────────────────────────────────────────────────────────────────────

  private release(c: Conn): void {
    if (c.closed) return;
    const o = c.origin;
    const w = o.waiters.shift();
    if (w) return w.resolve(c);
    if (o.idle.length >= this.maxIdle || this.closedClient) return this.destroy(c);
    c.idleSince = performance.now();
    c.socket!.unref();
    o.idle.push(c);
    // One sweeper per client closes connections idle too long (Bun's socket timeouts tick in
    // 4-second steps, and a timer per request would cost more than the sweep).
    if (!this.sweeper) {
      this.sweeper = setInterval(() => this.sweep(), Math.max(250, (this.idleS * 1000) / 4));
      this.sweeper.unref?.();
    }
  }

  private sweep(): void {
    const cutoff = performance.now() - this.idleS * 1000;
    let idle = 0;
    for (const o of this.origins.values()) {
      // LIFO: the oldest idle connections sit at the bottom of the stack.
      while (o.idle.length && o.idle[0]!.idleSince <= cutoff) this.destroy(o.idle[0]!);
      idle += o.idle.length;
    }
    if (idle === 0 && this.sweeper) {
      clearInterval(this.sweeper);
      this.sweeper = null;
    }
  }

  /** A connection slot freed up: the first waiter gets a new connection. */
  private handOver(o: Origin): void {
    const w = o.waiters.shift();
    if (!w) return;
    this.connect(o).then(w.resolve, w.reject);
  }

  private destroy(c: Conn): void {
    if (c.closed) return;
    c.closed = true;
    c.origin.open--;
    const i = c.origin.idle.indexOf(c);
    if (i >= 0) c.origin.idle.splice(i, 1);
    c.socket?.terminate();
    this.handOver(c.origin);
  }

  private onClose(c: Conn, err?: Error): void {
    const ex = c.ex;
    const wasClosed = c.closed;
    if (!wasClosed) {
      c.closed = true;
      c.origin.open--;
      const i = c.origin.idle.indexOf(c);
      if (i >= 0) c.origin.idle.splice(i, 1);
    }
    c.ex = null;
    if (ex) {
      if (ex.state === S.UntilClose) {
        this.flush(c, ex);
        ex.state = S.Done;
        this.detach(ex);
        try {
          ex.controller?.close();
        } catch {}
      } else if (!ex.gotBytes && c.used && ex.retryable && !ex.req.signal?.aborted) {
        // The keep-alive race: the server closed the idle connection as we reused it.
        this.detach(ex);
        this.start(c.origin, ex.req, ex.payload, ex.resolve, ex.reject, false);
        if (!wasClosed) this.handOver(c.origin);
        return;
      } else {
        const why = err?.message ? `: ${err.message}` : "";
        this.fail(c, ex, new UpstreamProtocolError(ex.responded ? `the upstream closed the connection mid-answer${why}` : `the upstream closed the connection before answering${why}`));
      }
    }
    if (!wasClosed) this.handOver(c.origin);
  }

  private fail(c: Conn, ex: Exchange, e: unknown): void {
    this.detach(ex);
    if (c.ex === ex) c.ex = null;
    if (!ex.responded) ex.reject(e);
    else if (ex.controller) {
      try {
        ex.controller.error(e);
      } catch {}
    }
    ex.state = S.Done;
    this.destroy(c);
  }

  private abortExchange(c: Conn, ex: Exchange, reason: unknown): void {
    if (c.ex !== ex) return; // already answered in full
    this.fail(c, ex, reason);
  }

  private detach(ex: Exchange): void {
    if (ex.onAbort && ex.req.signal) ex.req.signal.removeEventListener("abort", ex.onAbort);
    ex.onAbort = null;
  }
}
