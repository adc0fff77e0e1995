// A loopback TCP proxy that holds every chunk for --delay-ms before passing it on, in each direction:
// Redis "1 ms away" (production Redis is not on the gateway's host) without a network namespace.
// Order is kept (every chunk waits the same time, timers fire in order). Prints its address first.
//   bun bench/redis-delay-proxy.ts --upstream 127.0.0.1:6379 --delay-ms 1 [--port 0]
import { createConnection, createServer, type Socket } from "node:net";

const arg = (name: string, dflt?: string) => {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? process.argv[i + 1] : dflt;
  if (v === undefined) throw new Error(`--${name} is required`);
  return v;
};
const [host, port] = arg("upstream").split(":") as [string, string];
const delayMs = Number(arg("delay-ms", "1"));

/** Sends what `from` reads to `to`, each chunk `delayMs` later; either side closing closes the other. */
function pipeDelayed(from: Socket, to: Socket): void {
  from.on("data", (chunk) => setTimeout(() => to.writable && to.write(chunk), delayMs));
  from.on("end", () => setTimeout(() => to.end(), delayMs));
  from.on("error", () => to.destroy());
  from.on("close", () => setTimeout(() => to.destroy(), delayMs));
}

const server = createServer({ noDelay: true }, (client) => {
  const upstream = createConnection({ host, port: Number(port), noDelay: true });
  pipeDelayed(client, upstream);
  pipeDelayed(upstream, client);
});
server.listen(Number(arg("port", "0")), "127.0.0.1", () => {
  const a = server.address();
  if (a && typeof a === "object") console.log(`127.0.0.1:${a.port}`);
});
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(0));
