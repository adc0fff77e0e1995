// A gateway in its own process (`bun src/main.ts`), for tests that need two processes over one
// Postgres and Redis, or a real SIGTERM. The port comes from its "gateway listening" log line.
import { join } from "node:path";

export interface ChildGateway {
  url: string;
  /** Sends SIGTERM and waits for the process to exit; returns its exit code. */
  terminate(): Promise<number>;
  /** Sends SIGKILL (no drain, no shutdown hooks) and waits for the process to be gone. */
  kill(): Promise<void>;
  output(): string;
  /** Sends `signal` without waiting. */
  signal(signal: NodeJS.Signals): void;
  /** Resolves with the exit code once the process is gone. */
  readonly exited: Promise<number>;
}

const ROOT = join(import.meta.dir, "..", "..");

export async function spawnGateway(env: Record<string, string>, timeoutMs = 30_000): Promise<ChildGateway> {
  // The bun binary `npx bun` resolves to, run directly so SIGTERM reaches the gateway itself.
  const bin = join(ROOT, "node_modules", ".bin", "bun");
  const proc = Bun.spawn([bin, "src/main.ts"], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", HOST: "127.0.0.1", PORT: "0", LOG_LEVEL: "info", NODE_ENV: "test", ...env },
    stdout: "pipe",
    stderr: "pipe",
  });
  let out = "";
  // Keep draining stdout and stderr so the child never blocks on a full pipe (a runtime's report
  // of an error it did not expect goes to stderr; 64 kB of it unread would freeze the child).
  // Each stream is kept apart, so a stderr chunk never lands inside a stdout log line.
  let err = "";
  const drain = async (r: { read(): Promise<{ done: boolean; value?: Uint8Array }> }, into: (s: string) => void) => {
    const d = new TextDecoder();
    for (;;) {
      const { done, value } = await r.read().catch(() => ({ done: true, value: undefined }));
      if (done) break;
      into(d.decode(value, { stream: true }));
    }
  };
  void drain(proc.stderr.getReader(), (s) => (err += s));
  const reader = proc.stdout.getReader();
  const dec = new TextDecoder();
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`child gateway did not start: ${out}`)), timeoutMs);
    (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        out += dec.decode(value);
        const m = /"port":(\d+)[^\n]*"gateway listening"/.exec(out);
        if (m) {
          clearTimeout(timer);
          resolve(Number(m[1]));
          break;
        }
      }
    })().catch(reject);
  });
  void drain(reader, (s) => (out += s));
  return {
    url: `http://127.0.0.1:${port}`,
    async terminate() {
      proc.kill("SIGTERM");
      return await proc.exited;
    },
    async kill() {
      proc.kill("SIGKILL");
      await proc.exited;
    },
    output: () => (err ? `${out}\n[stderr]\n${err}` : out),
    signal: (sig) => proc.kill(sig),
    exited: proc.exited,
  };
}

/**
 * Another gateway process over the stores of `of` (a test gateway or its env): the same Postgres,
 * Redis, secret key and data directory, plus `env` (the provider base URLs, timings). Only the
 * stores `of` has are passed on.
 */
export function spawnSibling(of: { env: Record<string, string> }, env: Record<string, string> = {}, timeoutMs?: number): Promise<ChildGateway> {
  const shared: Record<string, string> = {};
  for (const k of ["DATABASE_URL", "REDIS_URL", "GATEWAY_SECRET_KEY", "DATA_DIR"]) if (of.env[k]) shared[k] = of.env[k]!;
  return spawnGateway({ ...shared, ...env }, timeoutMs);
}

/** POSTs a JSON body with a routing key to any gateway's URL (in process or a child's). */
export function post(url: string, raw: string, body: unknown, path = "/v1/chat/completions"): Promise<Response> {
  return fetch(url + path, { method: "POST", headers: { authorization: `Bearer ${raw}`, "content-type": "application/json" }, body: JSON.stringify(body) });
}

/** post(), answering null where the connection fails (a gateway killed while the request runs). */
export function tryPost(url: string, raw: string, body: unknown, path?: string): Promise<Response | null> {
  return post(url, raw, body, path).catch(() => null);
}
