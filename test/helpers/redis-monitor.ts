// Redis MONITOR on a raw socket, for tests and the count guards that watch what the gateway sends.
// ioredis' monitor() marks its connection as monitoring only once the MONITOR reply's promise has
// settled; on a busy Redis the first command lines arrive in the same read as that "+OK", find an
// empty command queue, and ioredis emits "Command queue state error" (an unhandled error that fails
// the suite). Here every line after the "+OK" is a command line, whatever read it came in.
import { connect, type Socket } from "node:net";

/** One command Redis ran: its arguments (unescaped), the source ("lua" for a script's calls, else the client's address) and db. */
export type MonitorListener = (time: string, args: string[], source: string, db: string) => void;

export interface RedisMonitor {
  on(event: "monitor", fn: MonitorListener): void;
  off(event: "monitor", fn: MonitorListener): void;
  close(): void;
}

/** Opens a MONITOR connection to `url` (redis://host:port) and resolves once Redis has acknowledged it. */
export function monitorRedis(url: string): Promise<RedisMonitor> {
  const u = new URL(url);
  const listeners = new Set<MonitorListener>();
  const socket: Socket = connect({ host: u.hostname, port: Number(u.port || 6379) });
  let buffered = "";
  let acknowledged = false;
  return new Promise((resolve, reject) => {
    socket.once("error", reject);
    socket.on("connect", () => {
      const auth = u.password ? `AUTH ${decodeURIComponent(u.password)}\r\n` : "";
      socket.write(`${auth}MONITOR\r\n`);
    });
    socket.on("data", (chunk: Buffer) => {
      buffered += chunk.toString("latin1");
      let nl: number;
      while ((nl = buffered.indexOf("\r\n")) >= 0) {
        const line = buffered.slice(0, nl);
        buffered = buffered.slice(nl + 2);
        if (line.startsWith("-")) { reject(new Error(`MONITOR refused: ${line.slice(1)}`)); socket.destroy(); return; }
        if (!acknowledged) {
          if (line === "+OK") {
            acknowledged = true;
            socket.off("error", reject);
            socket.on("error", () => {});
            resolve({ on: (_e, fn) => void listeners.add(fn), off: (_e, fn) => void listeners.delete(fn), close: () => socket.destroy() });
          }
          continue;
        }
        const parsed = parseMonitorLine(line);
        if (parsed) for (const fn of listeners) fn(parsed.time, parsed.args, parsed.source, parsed.db);
      }
    });
  });
}

/** `+1795921378.356291 [0 127.0.0.1:47156] "evalsha" "ce85…" "1"`: arguments are quoted and escaped as Redis' sdscatrepr does. */
export function parseMonitorLine(line: string): { time: string; db: string; source: string; args: string[] } | null {
  const m = /^\+(\S+) \[(\S+) ([^\]]+)\] /.exec(line);
  if (!m) return null;
  const args: string[] = [];
  let i = m[0].length;
  while (i < line.length) {
    if (line[i] !== '"') { i++; continue; }
    let s = "";
    i++;
    while (i < line.length && line[i] !== '"') {
      const c = line[i]!;
      if (c !== "\\") { s += c; i++; continue; }
      const e = line[i + 1];
      if (e === "x") { s += String.fromCharCode(parseInt(line.slice(i + 2, i + 4), 16)); i += 4; continue; }
      s += e === "n" ? "\n" : e === "r" ? "\r" : e === "t" ? "\t" : e === "a" ? "\x07" : e === "b" ? "\b" : (e ?? "");
      i += 2;
    }
    args.push(Buffer.from(s, "latin1").toString("utf8"));
    i++;
  }
  return { time: m[1]!, db: m[2]!, source: m[3]!, args };
}
