// Round-trip time of a Redis PING, sent one at a time on one connection: what "Redis 1 ms away"
// measured as, beside Redis local, in the same run.
import { createConnection } from "node:net";
import { median } from "./stats.ts";

export async function pingRttMs(host: string, port: number, pings = 200): Promise<number> {
  const sock = createConnection({ host, port, noDelay: true });
  await new Promise<void>((ok, fail) => sock.once("connect", () => ok()).once("error", fail));
  const times: number[] = [];
  let answered: (() => void) | null = null;
  let failed: Error | null = null;
  sock.on("data", () => answered?.());
  sock.on("error", (e) => { failed = e; answered?.(); });
  try {
    for (let i = 0; i < pings; i++) {
      const t0 = performance.now();
      await new Promise<void>((ok) => {
        answered = ok;
        sock.write("PING\r\n");
      });
      if (failed) throw failed;
      times.push(performance.now() - t0);
    }
  } finally {
    sock.destroy();
  }
  return median(times);
}
