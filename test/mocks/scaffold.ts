// The one scaffold every vendor mock stands on: a real HTTP server on loopback (the gateway talks
// to it as to the vendor), request recording helpers and the latency knob. Each mock adds only
// its vendor's protocol: paths, validation, answers, faults.

/** A mock vendor's HTTP server: its origin, its port and how to stop it (closing open connections). */
export interface LoopbackServer {
  /** `http://<host>:<port>`, no trailing slash. */
  origin: string;
  port: number;
  stop(): Promise<void>;
}

export interface LoopbackOptions {
  /** Default 0: any free port. */
  port?: number;
  /** Default 127.0.0.1. A mock never listens beyond loopback unless a test says so. */
  hostname?: string;
  /** Seconds a connection may sit idle (Bun's default when absent); long streams raise it. */
  idleTimeout?: number;
  fetch(req: Request): Response | Promise<Response>;
}

export function serveLoopback(opts: LoopbackOptions): LoopbackServer {
  const hostname = opts.hostname ?? "127.0.0.1";
  const server = Bun.serve({
    port: opts.port ?? 0,
    hostname,
    ...(opts.idleTimeout !== undefined ? { idleTimeout: opts.idleTimeout } : {}),
    fetch: opts.fetch,
  });
  return {
    origin: `http://${hostname}:${server.port}`,
    port: server.port!,
    async stop() { await server.stop(true); },
  };
}

/** The request's headers as a plain record (names lower-cased), for a mock's request log. */
export { headersOf } from "../fixtures/replay.ts";

/** A JSON answer, as vendors send them. */
export const json = (obj: unknown, status = 200, headers: Record<string, string> = {}) =>
  new Response(JSON.stringify(obj), { status, headers: { "content-type": "application/json", ...headers } });

/** The latency knob: waits `ms` before answering (0 or less: no wait). */
export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
