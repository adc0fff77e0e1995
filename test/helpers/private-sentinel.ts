// A Sentinel-managed Redis of the test's own: one master, one replica and Sentinels, every one a
// `redis-server` process on a free loopback port in a temporary directory, with a password, no
// persistence, stopped by PID. Sentinels notice a dead master after 1 s and promote the replica.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Redis from "ioredis";
import { freePort } from "./private-postgres.ts";

export const SENTINEL_MASTER = "gwmaster";

export interface PrivateSentinelRedis {
  /** `REDIS_SENTINELS` value. */
  sentinels: string;
  password: string;
  /** Ports of the two data nodes (the first starts as master). */
  ports: number[];
  /** Port of the current master, as the Sentinels say. */
  masterPort(): Promise<number>;
  /** A direct client to a data node (tests only). */
  client(port: number): Redis;
  /** SIGKILLs the data node on `port` (the master, for a failover). */
  kill(port: number): Promise<void>;
  /** Starts the data node on `port` again, empty, as a replica of the current master. */
  restartAsReplica(port: number): Promise<void>;
  /** Waits until the Sentinels name a master other than `port` and it accepts writes. */
  waitPromoted(from: number, timeoutMs?: number): Promise<number>;
  stop(): Promise<void>;
}

async function waitFor(what: string, f: () => Promise<boolean>, timeoutMs = 20_000): Promise<void> {
  const t0 = Date.now();
  for (;;) {
    try {
      if (await f()) return;
    } catch {}
    if (Date.now() - t0 > timeoutMs) throw new Error(`timed out waiting for ${what}`);
    await Bun.sleep(50);
  }
}

export async function startPrivateSentinelRedis(opts: { sentinels?: number } = {}): Promise<PrivateSentinelRedis> {
  const dir = mkdtempSync(join(tmpdir(), "gw-sentinel-"));
  const password = `pw${Math.random().toString(36).slice(2, 10)}`;
  const ports = [await freePort(), await freePort()];
  const sPorts: number[] = [];
  for (let i = 0; i < (opts.sentinels ?? 1); i++) sPorts.push(await freePort());
  const procs = new Map<number, ReturnType<typeof Bun.spawn>>();
  const auth = ["--requirepass", password, "--masterauth", password];
  const startNode = (port: number, replicaOf: number | null) => {
    const nodeDir = join(dir, `node-${port}`);
    Bun.spawnSync(["mkdir", "-p", nodeDir]);
    const args = ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", nodeDir, ...auth];
    if (replicaOf !== null) args.push("--replicaof", "127.0.0.1", String(replicaOf));
    procs.set(port, Bun.spawn(args, { stdout: "ignore", stderr: "ignore" }));
  };
  const client = (port: number) => {
    const c = new Redis({ host: "127.0.0.1", port, password, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    c.on("error", () => {});
    return c;
  };
  const ask = async <T>(port: number, f: (c: Redis) => Promise<T>): Promise<T> => {
    const c = client(port);
    try {
      await c.connect();
      return await f(c);
    } finally {
      c.disconnect();
    }
  };
  const sentinel = (port: number) => {
    const c = new Redis({ host: "127.0.0.1", port, maxRetriesPerRequest: 0, retryStrategy: () => null, lazyConnect: true });
    c.on("error", () => {});
    return c;
  };
  const masterPort = async () => {
    const c = sentinel(sPorts[0]!);
    try {
      await c.connect();
      const addr = (await c.call("SENTINEL", "get-master-addr-by-name", SENTINEL_MASTER)) as [string, string];
      return Number(addr[1]);
    } finally {
      c.disconnect();
    }
  };
  const kill = async (port: number) => {
    const p = procs.get(port);
    procs.delete(port);
    if (!p) return;
    p.kill("SIGKILL");
    await p.exited;
  };
  const stop = async () => {
    for (const port of [...procs.keys()]) await kill(port);
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    startNode(ports[0]!, null);
    await waitFor("the master", () => ask(ports[0]!, async (c) => (await c.ping()) === "PONG"));
    startNode(ports[1]!, ports[0]!);
    await waitFor("the replica's link", () => ask(ports[1]!, async (c) => String(await c.info("replication")).includes("master_link_status:up")));
    for (const sp of sPorts) {
      const conf = join(dir, `sentinel-${sp}.conf`);
      writeFileSync(conf, [
        `port ${sp}`,
        "bind 127.0.0.1",
        `dir ${dir}`,
        `sentinel monitor ${SENTINEL_MASTER} 127.0.0.1 ${ports[0]} ${Math.floor(sPorts.length / 2) + 1}`,
        `sentinel auth-pass ${SENTINEL_MASTER} ${password}`,
        // Declared rather than discovered (a Sentinel polls its master's INFO every 10 s).
        `sentinel known-replica ${SENTINEL_MASTER} 127.0.0.1 ${ports[1]}`,
        `sentinel down-after-milliseconds ${SENTINEL_MASTER} 1000`,
        `sentinel failover-timeout ${SENTINEL_MASTER} 4000`,
        `sentinel parallel-syncs ${SENTINEL_MASTER} 1`,
        "",
      ].join("\n"));
      procs.set(sp, Bun.spawn(["redis-server", conf, "--sentinel"], { stdout: "ignore", stderr: "ignore" }));
    }
    for (const sp of sPorts) {
      await waitFor("a Sentinel that knows the replica", async () => {
        const c = sentinel(sp);
        try {
          await c.connect();
          const replicas = (await c.call("SENTINEL", "replicas", SENTINEL_MASTER)) as unknown[];
          return replicas.length === 1 && JSON.stringify(replicas).includes("slave");
        } finally {
          c.disconnect();
        }
      });
    }
    if (sPorts.length > 1) {
      await waitFor("the Sentinels to know each other", async () => {
        const c = sentinel(sPorts[0]!);
        try {
          await c.connect();
          return ((await c.call("SENTINEL", "sentinels", SENTINEL_MASTER)) as unknown[]).length === sPorts.length - 1;
        } finally {
          c.disconnect();
        }
      });
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return {
    sentinels: sPorts.map((p) => `127.0.0.1:${p}`).join(","),
    password,
    ports,
    masterPort,
    client,
    kill,
    restartAsReplica: async (port) => {
      await kill(port);
      startNode(port, await masterPort());
      await waitFor("the restarted replica's link", () => ask(port, async (c) => String(await c.info("replication")).includes("master_link_status:up")));
    },
    waitPromoted: async (from, timeoutMs = 30_000) => {
      let to = from;
      await waitFor("the Sentinels to promote the replica", async () => {
        to = await masterPort();
        return to !== from && (await ask(to, async (c) => ((await c.call("ROLE")) as string[])[0] === "master"));
      }, timeoutMs);
      return to;
    },
    stop,
  };
}
