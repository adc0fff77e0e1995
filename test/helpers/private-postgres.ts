// A Postgres cluster of the test's own (initdb in a temporary directory, run as user postgres on a
// free port, no fsync) for fault tests that stop and restart it. Never the machine's shared one.
// Stopped by the postmaster's PID (read from postmaster.pid), restarted on the same port and data.
import { chmodSync, mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import postgres from "postgres";

export interface PrivatePostgres {
  /** URL of the `postgres` database on this cluster. */
  url: string;
  port: number;
  /** Fast shutdown (SIGINT to the postmaster): clients are disconnected, new connections refused. */
  stopServer(): Promise<void>;
  /** Starts the postmaster again on the same port and data. */
  startServer(): Promise<void>;
  /** SIGSTOP to the postmaster and every backend: connections stay open and nothing answers. */
  freeze(): void;
  /** SIGCONT to the same processes. */
  thaw(): void;
  /** Stops it for good and removes the data. */
  destroy(): Promise<void>;
}

export async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

const asPostgres = (args: string[]) => ["runuser", "-u", "postgres", "--", ...args];

async function run(args: string[]): Promise<void> {
  const p = Bun.spawn(asPostgres(args), { stdout: "pipe", stderr: "pipe" });
  const [code, err] = await Promise.all([p.exited, new Response(p.stderr).text()]);
  if (code !== 0) throw new Error(`${args[0]} failed (${code}): ${err.slice(0, 500)}`);
}

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const c = postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {} });
    try {
      await c`select 1`;
      await c.end();
      return;
    } catch {
      await c.end({ timeout: 0 }).catch(() => {});
      await Bun.sleep(50);
    }
  }
  throw new Error(`private postgres at ${url} did not start`);
}

/** Running, or stopped; an exited process its parent has not reaped yet (a zombie) is not. */
function isAlive(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]![0] !== "Z";
  } catch {
    return false;
  }
}

/** Field 4 of /proc/<pid>/stat, the parent (the command, field 2, may hold spaces: split after ")"). */
function parentOf(pid: number): number {
  try {
    return Number(readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ")[1]);
  } catch {
    return -1;
  }
}

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const root = mkdtempSync(join(tmpdir(), "gw-pg-"));
  chmodSync(root, 0o777);
  const data = join(root, "data");
  const port = await freePort();
  await run(["initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8"]);
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  const start = async () => {
    // Detached: the postmaster outlives runuser; it is found and stopped by its own PID.
    Bun.spawn(asPostgres(["postgres", "-D", data, "-p", String(port), "-k", root, "-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "max_connections=60"]), { stdout: "ignore", stderr: "ignore" });
    await waitReady(url);
  };
  const pid = () => Number(readFileSync(join(data, "postmaster.pid"), "utf8").split("\n")[0]);
  const stop = async () => {
    let p: number;
    try { p = pid(); } catch { return; }
    process.kill(p, "SIGINT");
    for (let i = 0; i < 200 && isAlive(p); i++) await Bun.sleep(25);
    if (isAlive(p)) process.kill(p, "SIGKILL");
  };
  /** The postmaster and its children (backends, checkpointer, walwriter…), from /proc. */
  const cluster = () => {
    const root = pid();
    const kids = readdirSync("/proc").filter((d) => /^\d+$/.test(d)).map(Number).filter((p) => parentOf(p) === root);
    return [root, ...kids];
  };
  let frozen: number[] = [];
  const resume = () => {
    if (!frozen.length) return;
    // runuser, the postmaster's parent, stops itself when its child stops (as su does): it is
    // continued too, or it could not reap the postmaster when that exits.
    for (const p of [...frozen, parentOf(frozen[0]!)]) {
      if (p > 1) try { process.kill(p, "SIGCONT"); } catch {}
    }
    frozen = [];
  };
  await start();
  return {
    url,
    port,
    stopServer: stop,
    startServer: start,
    freeze: () => {
      frozen = cluster();
      for (const p of frozen) {
        // A backend listed a moment ago may have exited since (a client's connection closing):
        // it has nothing left to freeze. The postmaster itself must stop.
        try {
          process.kill(p, "SIGSTOP");
        } catch (e) {
          if (p === frozen[0] || (e as { code?: string }).code !== "ESRCH") throw e;
        }
      }
    },
    thaw: resume,
    destroy: async () => {
      resume();
      await stop();
      rmSync(root, { recursive: true, force: true });
    },
  };
}
