// A redis-server of the test's own (free port, temporary directory, no persistence) for fault
// tests that stop, freeze or restart it. Never the machine's shared Redis. Stopped by its PID.
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import Redis from "ioredis";

export interface PrivateRedis {
  url: string;
  port: number;
  /** SIGSTOP: the process stays, its socket accepts, nothing answers. */
  freeze(): void;
  /** SIGCONT after freeze(). */
  thaw(): void;
  /** Kills the process (its data, kept only in memory, is gone). */
  kill(): Promise<void>;
  /** Starts a new process on the same port: empty, or with the last SAVE's snapshot when there is one. */
  restart(): Promise<void>;
  /**
   * Reads the last SAVE's snapshot (what restart() loads) in a scratch redis-server of its own, so
   * a test can see what a restart will lose without racing the clients that reconnect to it.
   */
  readSnapshot<T>(read: (r: Redis) => Promise<T>): Promise<T>;
  stop(): Promise<void>;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const s = createServer();
    s.once("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const port = (s.address() as { port: number }).port;
      s.close(() => resolve(port));
    });
  });
}

/** A redis-server on loopback that keeps nothing on disk unless told to SAVE, in `dir`. */
const redisArgs = (port: number, dir: string) => ["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir];

async function waitReady(url: string): Promise<void> {
  for (let i = 0; i < 100; i++) {
    const c = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    c.on("error", () => {});
    try {
      await c.connect();
      await c.ping();
      c.disconnect();
      return;
    } catch {
      c.disconnect();
      await Bun.sleep(50);
    }
  }
  throw new Error(`redis-server at ${url} did not start`);
}

async function claimAllSlots(url: string): Promise<void> {
  const c = new Redis(url, { maxRetriesPerRequest: 0 });
  try {
    await c.call("CLUSTER", "ADDSLOTSRANGE", "0", "16383");
    for (let i = 0; i < 100; i++) {
      if (String(await c.call("CLUSTER", "INFO")).includes("cluster_state:ok")) return;
      await Bun.sleep(50);
    }
    throw new Error(`redis-server at ${url} did not reach cluster_state:ok`);
  } finally {
    c.disconnect();
  }
}

export interface PrivateRedisOptions {
  /** Cluster mode: one node owning all 16,384 slots, so any multi-key command or script whose
   *  keys hash to different slots fails with CROSSSLOT, exactly as on a real Redis Cluster. */
  cluster?: boolean;
}

export async function startPrivateRedis(opts: PrivateRedisOptions = {}): Promise<PrivateRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), "gw-redis-"));
  const url = `redis://127.0.0.1:${port}`;
  let proc: ReturnType<typeof Bun.spawn> | null = null;
  const start = async () => {
    const cluster = opts.cluster ? ["--cluster-enabled", "yes", "--cluster-config-file", join(dir, `nodes-${Date.now()}.conf`)] : [];
    proc = Bun.spawn([...redisArgs(port, dir), ...cluster], { stdout: "ignore", stderr: "ignore" });
    await waitReady(url);
    if (opts.cluster) await claimAllSlots(url);
  };
  const kill = async () => {
    const p = proc;
    proc = null;
    if (!p) return;
    p.kill("SIGCONT");
    p.kill("SIGKILL");
    await p.exited;
  };
  await start();
  return {
    url,
    port,
    freeze: () => proc?.kill("SIGSTOP"),
    thaw: () => proc?.kill("SIGCONT"),
    kill,
    restart: async () => {
      await kill();
      await start();
    },
    readSnapshot: async (read) => {
      const scratchDir = mkdtempSync(join(tmpdir(), "gw-redis-snapshot-"));
      copyFileSync(join(dir, "dump.rdb"), join(scratchDir, "dump.rdb"));
      const scratchPort = await freePort();
      const p = Bun.spawn(redisArgs(scratchPort, scratchDir), { stdout: "ignore", stderr: "ignore" });
      const c = new Redis(`redis://127.0.0.1:${scratchPort}`, { lazyConnect: true, maxRetriesPerRequest: 0 });
      c.on("error", () => {});
      try {
        await waitReady(`redis://127.0.0.1:${scratchPort}`);
        await c.connect();
        return await read(c);
      } finally {
        c.disconnect();
        p.kill("SIGKILL");
        await p.exited;
        rmSync(scratchDir, { recursive: true, force: true });
      }
    },
    stop: async () => {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface PrivateCluster {
  /** `REDIS_CLUSTER_NODES` value (every master). */
  nodes: string;
  ports: number[];
  stop(): Promise<void>;
}

/** A real Redis Cluster of `masters` redis-server processes (no replicas), slots spread by redis-cli. */
export async function startPrivateCluster(masters = 3): Promise<PrivateCluster> {
  const dir = mkdtempSync(join(tmpdir(), "gw-cluster-"));
  const ports: number[] = [];
  for (let i = 0; i < masters; i++) ports.push(await freePort());
  const procs = ports.map((port) =>
    Bun.spawn([...redisArgs(port, dir),
      "--cluster-enabled", "yes", "--cluster-config-file", join(dir, `nodes-${port}.conf`), "--cluster-node-timeout", "2000"], { stdout: "ignore", stderr: "ignore" }));
  const stop = async () => {
    for (const p of procs) p.kill("SIGKILL");
    await Promise.all(procs.map((p) => p.exited));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    for (const p of ports) await waitReady(`redis://127.0.0.1:${p}`);
    const create = Bun.spawn(["redis-cli", "--cluster", "create", ...ports.map((p) => `127.0.0.1:${p}`), "--cluster-replicas", "0", "--cluster-yes"], { stdout: "pipe", stderr: "pipe" });
    const [code, out] = await Promise.all([create.exited, new Response(create.stdout).text()]);
    if (code !== 0) throw new Error(`redis-cli --cluster create failed: ${out.slice(-500)}`);
    for (const p of ports) {
      const c = new Redis(`redis://127.0.0.1:${p}`, { maxRetriesPerRequest: 0 });
      try {
        let ok = false;
        for (let i = 0; i < 200 && !ok; i++) {
          ok = String(await c.call("CLUSTER", "INFO")).includes("cluster_state:ok");
          if (!ok) await Bun.sleep(50);
        }
        if (!ok) throw new Error(`cluster node ${p} did not reach cluster_state:ok`);
      } finally {
        c.disconnect();
      }
    }
  } catch (e) {
    await stop();
    throw e;
  }
  return { nodes: ports.map((p) => `127.0.0.1:${p}`).join(","), ports, stop };
}
