// An upstream that accepts TCP connections and never answers a byte (a wedged load balancer, a
// host whose service hangs): the gateway's connect succeeds and only its upstream timeout ends the
// attempt. Counts the connections it took, and can start answering like a healthy upstream
// (`recover(url)`: every new connection is piped to that server), to test a lane coming back.
import { createConnection, createServer, type Server, type Socket } from "node:net";

export interface BlackHole {
  /** Base URL including /v1, e.g. http://127.0.0.1:40123/v1 */
  url: string;
  port: number;
  /** Connections accepted so far. */
  readonly connections: number;
  /** From now on, new connections are relayed to this http://host:port/v1 upstream. */
  recover(url: string): void;
  stop(): Promise<void>;
}

export async function startBlackHole(): Promise<BlackHole> {
  const sockets = new Set<Socket>();
  let connections = 0;
  let target: { host: string; port: number } | null = null;
  const server: Server = createServer((s) => {
    connections++;
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    if (!target) return; // read nothing, answer nothing
    const up = createConnection(target);
    up.on("error", () => s.destroy());
    s.pipe(up).pipe(s);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  const port = (server.address() as { port: number }).port;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    port,
    get connections() { return connections; },
    recover(url) {
      const u = new URL(url);
      target = { host: u.hostname, port: Number(u.port) };
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => server.close(() => r()));
    },
  };
}
