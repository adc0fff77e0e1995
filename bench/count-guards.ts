// Deterministic guards of the hot path: what one request costs in counts, not in time (timings
// are noise on a shared machine, counts are not). Drives N requests per scenario through a gateway
// on a Postgres and a Redis of its own (private ports, temporary directories: nothing else talks
// to them, so every delta is the gateway's) and counts per request:
//   - Redis commands the gateway sends and the commands its scripts run, told apart by MONITOR
//     (a script's own calls show as source "lua"; INFO commandstats counts both alike), and round
//     trips: INFO stats' total_reads_processed delta (one per socket read, so a pipeline is one),
//     less this script's own INFO calls;
//   - Postgres statements: pg_stat_statements calls in the gateway's database (utility
//     statements included), loaded into the private cluster; the usage drain's batch writes,
//     whose number follows the window's length and not its requests, per second of the window;
//   - syscalls of the whole gateway process, every thread: `strace -c -f -p <pid>` over the window;
//   - JS heap allocated, in bytes and in objects: the gateway runs with its collector off
//     (BUN_JSC_useGC=0) and a preload (lib/heap-mark.ts) that reports the heap's size and cell
//     count on SIGUSR2; with nothing freed, their growth over the window is what it allocated,
//     the same figure in every run (a collection running or not no longer moves it).
// Per chunk of a paced stream (budgets.json perChunk): the same budgeted stream with 100 and with
// 20 chunks the mock sends 2 ms apart, the difference over the 80 extra chunks (syscalls, heap).
// Fails (exit 1) when a figure exceeds bench/budgets.json. A change that adds work to the hot path
// raises the budget in the same commit, visibly.
//   bun bench/count-guards.ts [--requests 1000] [--root <gateway tree>] [--json] [--no-check]
import { mkdtempSync, readFileSync, rmSync, writeFileSync, openSync, closeSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import Redis from "ioredis";
import postgres from "postgres";
import type { Subprocess } from "bun";
import { startPrivateRedis } from "../test/helpers/private-redis.ts";
import { monitorRedis, type RedisMonitor } from "../test/helpers/redis-monitor.ts";
import { startPrivatePostgres } from "../test/helpers/private-postgres.ts";
import { startMockOpenAI } from "../test/mocks/openai-upstream.ts";
import { provision } from "./lib/provision.ts";
import { freePort, stopChild, waitHealthy } from "./lib/processes.ts";
import { agentChatBody } from "./lib/agent-body.ts";

const HERE = import.meta.dir;
const arg = (name: string): string | undefined => {
  const i = process.argv.indexOf(name);
  return i > 0 ? process.argv[i + 1] : undefined;
};
const REQUESTS = Number(arg("--requests") ?? 1000);
const WARMUP = Number(arg("--warmup") ?? 60);
// One client: each request is its own event-loop turn, so what batches per turn batches the same
// way in every run (a fleet's concurrency changes the grouping, not what a request costs).
const CLIENTS = Number(arg("--clients") ?? 1);
const ROOT = resolve(arg("--root") ?? join(HERE, ".."));
const BUDGETS = join(HERE, "budgets.json");
/** The paced pair (perChunk in budgets.json): chunks per stream, the mock's pause between chunks, streams per scenario, concurrent clients. */
const PACED_SHORT = 20;
const PACED_LONG = 100;
const PACED_DELAY_MS = 2;
const PACED_REQUESTS = Number(arg("--paced-requests") ?? 160);
const PACED_CLIENTS = 8;
/** What one chunk of a paced stream costs: counted, never timed. */
export type ChunkMetric = "syscalls" | "heapKb" | "heapObjects";
const CHUNK_METRICS: ChunkMetric[] = ["syscalls", "heapKb", "heapObjects"];

export type Metric = "redisCommands" | "redisScriptCommands" | "redisRoundTrips" | "redisDrainReadsPerSecond" | "pgStatements" | "pgDrainWritesPerSecond" | "syscalls" | "heapKb" | "heapObjects";
export const METRICS: Metric[] = ["redisCommands", "redisScriptCommands", "redisRoundTrips", "redisDrainReadsPerSecond", "pgStatements", "pgDrainWritesPerSecond", "syscalls", "heapKb", "heapObjects"];
/** Metrics counted per second of a window rather than per request. */
const PER_SECOND: Metric[] = ["pgDrainWritesPerSecond", "redisDrainReadsPerSecond"];
/**
 * The usage drain's reads of the stream: one a turn while it has work (every 200 ms), fewer when
 * idle. They follow the window's length and whether the drain is at its busy pace, not the
 * requests, so they are guarded per second of the window and left out of the per-request counts
 * (each is one round trip).
 */
const DRAIN_READS = new Set(["xreadgroup", "xautoclaim"]);

/**
 * The usage drain's batch writes (src/relay/usage-queue.ts: the records' INSERT and the keys'
 * last_used_at UPDATE, each at most once per drain turn). Their number follows the window's length,
 * not its requests (a machine that serves the same requests in twice the time drains twice as often),
 * so they are guarded per second of the window and left out of the per-request statements.
 */
export const isDrainWrite = (statement: string) => /^\s*(insert into usage_records|update routing_keys set last_used_at)/i.test(statement);
type Row = Record<Metric, number> & {
  scenario: string;
  requests: number;
  ok: number;
  /** Profile detail (printed with --detail, never budgeted): per request. */
  redisByCommand: Record<string, number>;
  pgByStatement: Record<string, number>;
  syscallsByName: Record<string, number>;
  /** JS objects allocated, by type (the collector off: every cell allocated is still there). */
  heapObjectsByType: Record<string, number>;
  timers: Record<string, number>;
  /** Wall time of the window's requests (under strace: never budgeted, a hint only). */
  elapsedMs: number;
};

/** An instance with no request: what it sends Redis (its scripts' commands included) and Postgres, per second. */
type Idle = { redisCommandsPerSecond: number; pgStatementsPerSecond: number; detail: Record<string, number>; ms: number };
const QUIET_MS = Number(arg("--quiet-ms") ?? 10_000);
const sum = (o: Record<string, number>) => Object.values(o).reduce((x, y) => x + y, 0);
const drainReads = (sent: Record<string, number>) => sum(Object.fromEntries(Object.entries(sent).filter(([c]) => DRAIN_READS.has(c))));

/** The timer counts and the heap's size and object count the preload printed with mark `n`. */
function markAt(log: string, n: number): { timers: Record<string, number>; heap: { bytes: number; objects: number; types: Record<string, number> } } {
  const m = new RegExp(`HEAP-MARK ${n} (\\{.*\\}) (\\{.*\\})\n`).exec(log);
  return m ? { timers: JSON.parse(m[1]!), heap: JSON.parse(m[2]!) } : { timers: {}, heap: { bytes: NaN, objects: NaN, types: {} } };
}

function stracePath(): string | null {
  for (const p of ["/usr/bin/strace", "/bin/strace", "/usr/local/bin/strace"]) if (existsSync(p)) return p;
  return null;
}

async function main(): Promise<number> {
  const strace = stracePath();
  if (!strace) {
    console.error("count guards: strace is missing (Debian: apt-get install strace); syscalls per request cannot be counted");
    return 1;
  }
  const work_ = mkdtempSync(join(tmpdir(), "gw-counts-"));
  const redis = await startPrivateRedis();
  const pg = await startPrivatePostgres();
  const mock = await startMockOpenAI({ record: false });
  let gateway: Subprocess | null = null;
  let info: Redis | null = null;
  const monitors: RedisMonitor[] = [];
  let admin: ReturnType<typeof postgres> | null = null;
  try {
    // pg_stat_statements needs to be preloaded: set it, restart the private cluster, create it.
    const boot = postgres(pg.url, { max: 1, onnotice: () => {} });
    await boot.unsafe("alter system set shared_preload_libraries = 'pg_stat_statements'");
    await boot.unsafe("create database gw");
    await boot.end();
    await pg.stopServer();
    await pg.startServer();
    admin = postgres(pg.url, { max: 1, onnotice: () => {} });
    await admin.unsafe("create extension if not exists pg_stat_statements").catch((e: Error) => {
      throw new Error(`pg_stat_statements cannot be loaded (Debian: it ships with the postgresql package; elsewhere postgresql-contrib): ${e.message}`);
    });
    const dbUrl = pg.url.replace(/\/postgres$/, "/gw");
    const dbOid = (await admin<{ oid: number }[]>`select oid from pg_database where datname = 'gw'`)[0]!.oid;

    const port = freePort();
    const url = `http://127.0.0.1:${port}`;
    const logPath = join(work_, "gateway.log");
    const errPath = join(work_, "gateway.err");
    const out = openSync(logPath, "a");
    const err = openSync(errPath, "a");
    const webhookSecret = `whsec_${randomBytes(16).toString("hex")}`;
    const dataDir = join(work_, "data");
    gateway = Bun.spawn([process.execPath, "--preload", join(HERE, "lib", "heap-mark.ts"), join(ROOT, "src", "main.ts")], {
      cwd: ROOT,
      stdout: out,
      stderr: err,
      env: {
        PATH: process.env.PATH ?? "",
        HOME: process.env.HOME ?? "",
        NODE_ENV: "production",
        LOG_LEVEL: "info",
        PORT: String(port),
        HOST: "127.0.0.1",
        BASE_URL: url,
        DATA_DIR: dataDir,
        DATABASE_URL: dbUrl,
        REDIS_URL: redis.url,
        GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"),
        BILLING_WEBHOOK_SECRET: webhookSecret,
        PROVIDER_OPENAI_BASE_URL: mock.url,
        SIGNUP_IP_LIMIT_PER_HOUR: "100000",
        BUN_JSC_useGC: "0",
      },
    });
    const gw = gateway;
    await waitHealthy(`${url}/healthz`, gw, 60_000, () => readFileSync(errPath, "utf8").slice(-3000) + readFileSync(logPath, "utf8").slice(-3000));
    const acct = await provision({ gatewayUrl: url, dataDir, webhookSecret, runAdmin: async () => ({ code: 1, output: "no admin" }) });
    const unbudgeted = await fetch(`${url}/v1/organizations/routing-keys`, {
      method: "POST",
      headers: { "content-type": "application/json", authorization: `Bearer ${acct.accountToken}` },
      body: JSON.stringify({ label: "unbudgeted", mode: "fallback", providers: [{ provider: "openai", credential_id: acct.credentialId, model: null }] }),
    }).then((r) => r.json() as Promise<{ raw_key: string }>);

    info = new Redis(redis.url);
    const readsNow = async () => Number(/^total_reads_processed:(\d+)/m.exec(await info!.info("stats"))?.[1] ?? NaN);
    // Every command Redis runs, as MONITOR sees it; counting is switched on for the window only.
    const monitor = await monitorRedis(redis.url);
    monitors.push(monitor);
    let counting = false;
    const sent = new Map<string, number>();
    let scripted = 0;
    const sentByScripts = new Map<string, number>();
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      if (!counting) return;
      const name = String(args[0]).toLowerCase();
      if (name === "info") return;
      if (source === "lua") {
        scripted++;
        sentByScripts.set(name, (sentByScripts.get(name) ?? 0) + 1);
      } else sent.set(name, (sent.get(name) ?? 0) + 1);
    });
    const pgNow = async () => {
      const rows = await admin!<{ query: string; calls: string }[]>`select query, calls::bigint as calls from pg_stat_statements where dbid = ${dbOid}`;
      return new Map(rows.map((r) => [r.query.replace(/\s+/g, " ").slice(0, 60), Number(r.calls)]));
    };

    // The paced pair: the same budgeted stream with PACED_SHORT and PACED_LONG chunks the mock sends
    // PACED_DELAY_MS apart (each chunk its own upstream read and client write); their difference
    // over the extra chunks is what one chunk costs, the request's fixed cost cancelled.
    const scenarios: Array<{ id: string; key: string; stream: boolean; mock: Record<string, unknown>; requests: number; clients: number }> = [
      { id: "chat-budget", key: acct.routingKey, stream: false, mock: { chunks: 20 }, requests: REQUESTS, clients: CLIENTS },
      { id: "stream-budget", key: acct.routingKey, stream: true, mock: { chunks: 20 }, requests: REQUESTS, clients: CLIENTS },
      { id: "chat-unbudgeted", key: unbudgeted.raw_key, stream: false, mock: { chunks: 20 }, requests: REQUESTS, clients: CLIENTS },
      ...[PACED_SHORT, PACED_LONG].map((chunks) => ({
        id: `paced-${chunks}`, key: acct.routingKey, stream: true, mock: { chunks, chunk_delay_ms: PACED_DELAY_MS }, requests: PACED_REQUESTS, clients: PACED_CLIENTS,
      })),
    ];
    /** Every count over one window: `work` runs, then the window stays open `settleMs` more. */
    const window = async (id: string, work: () => Promise<unknown>, settleMs: number) => {
      const mark0 = await heapMark(gw, errPath);
      const traceFile = join(work_, `${id}.strace`);
      // Every syscall line of every thread (-f), with what each fd is (-y) so the marker lines this
      // measurement itself makes the gateway write (stderr) can be left out.
      const tracer = Bun.spawn([strace, "-f", "-y", "-o", traceFile, "-p", String(gw.pid)], { stdout: "ignore", stderr: "ignore" });
      await Bun.sleep(500); // attached to every thread
      const reads0 = await readsNow();
      const p0 = await pgNow();
      sent.clear();
      sentByScripts.clear();
      scripted = 0;
      counting = true;
      const started = performance.now();
      await work();
      const workMs = performance.now() - started;
      await Bun.sleep(settleMs);
      counting = false;
      const reads1 = await readsNow();
      const p1 = await pgNow();
      tracer.kill("SIGINT");
      await tracer.exited;
      const mark1 = await heapMark(gw, errPath);
      const log = readFileSync(errPath, "utf8");
      const pg: Record<string, number> = {};
      for (const [q, n] of p1) if (n - (p0.get(q) ?? 0) > 0 && !q.includes("pg_stat_statements")) pg[q] = n - (p0.get(q) ?? 0);
      const m0 = markAt(log, mark0);
      const m1 = markAt(log, mark1);
      const grown = (a: Record<string, number>, b: Record<string, number>) => Object.fromEntries(Object.entries(b).map(([k, v]) => [k, v - (a[k] ?? 0)]));
      return {
        redis: Object.fromEntries(sent),
        scripted,
        byScripts: Object.fromEntries(sentByScripts),
        // The later INFO call is one read of this script's own in the delta.
        reads: reads1 - reads0 - 1,
        pg,
        syscalls: syscallsOf(readFileSync(traceFile, "utf8"), errPath),
        heapKb: (m1.heap.bytes - m0.heap.bytes) / 1024,
        heapObjects: m1.heap.objects - m0.heap.objects,
        heapTypes: grown(m0.heap.types, m1.heap.types),
        timers: grown(m0.timers, m1.timers),
        ms: workMs + settleMs,
        workMs,
      };
    };
    // An instance with no traffic at all, long enough that every periodic job (the drain's 200 ms
    // read and 5 s takeover scan, the heartbeat, the job worker's 5 s poll, the webhook outbox's
    // claim each second) falls into it a steady number of times: a fleet pays this per instance,
    // whatever its traffic. Taken before any request, so nothing a burst leaves behind (a lease's
    // return, the last batch, a budget-alert check) lands in it.
    await Bun.sleep(2000);
    const quiet = await window("quiet", () => Bun.sleep(QUIET_MS), 0);
    const idleRow: Idle = {
      redisCommandsPerSecond: (sum(quiet.redis) + quiet.scripted) / (quiet.ms / 1000),
      pgStatementsPerSecond: sum(quiet.pg) / (quiet.ms / 1000),
      detail: { ...quiet.redis, ...Object.fromEntries(Object.entries(quiet.byScripts).map(([k, v]) => [`${k} (script)`, v])), ...quiet.pg },
      ms: quiet.ms,
    };
    const rows: Row[] = [];
    for (const s of scenarios) {
      const body = agentChatBody(s.mock, s.stream);
      const REQUESTS = s.requests;
      const CLIENTS = s.clients;
      const send = async () => {
        const r = await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${s.key}` }, body });
        const text = await r.text();
        return r.status === 200 && (s.stream ? text.includes("[DONE]") : text.includes("chat.completion"));
      };
      const drive = async (n: number) => {
        let ok = 0;
        let next = 0;
        await Promise.all(Array.from({ length: CLIENTS }, async () => {
          while (next < n) {
            next++;
            if (await send()) ok++;
          }
        }));
        return ok;
      };
      await drive(WARMUP);
      await Bun.sleep(1500); // the warm-up's usage flush (every second) and ledger turns

      let ok = 0;
      const load = await window("load", async () => { ok = await drive(REQUESTS); }, 1500);
      // The same length of time with no request: heartbeats, drains and timers of an idle gateway,
      // taken off so the figures are what the requests cost.
      const idle = await window("idle", () => Bun.sleep(load.workMs), 1500);
      const net = (a: Record<string, number>, b: Record<string, number>) => {
        const out: Record<string, number> = {};
        for (const k of new Set([...Object.keys(a), ...Object.keys(b)])) {
          const v = ((a[k] ?? 0) - (b[k] ?? 0)) / REQUESTS;
          if (Math.abs(v) >= 0.0005) out[k] = v;
        }
        return out;
      };
      const redisBy = net(load.redis, idle.redis);
      const pgBy = net(load.pg, idle.pg);
      const drainPerRequest = sum(Object.fromEntries(Object.entries(pgBy).filter(([q]) => isDrainWrite(q))));
      const sysBy = net(load.syscalls, idle.syscalls);
      rows.push({
        scenario: s.id,
        requests: REQUESTS,
        ok,
        redisCommands: sum(Object.fromEntries(Object.entries(redisBy).filter(([c]) => !DRAIN_READS.has(c)))),
        redisScriptCommands: (load.scripted - idle.scripted) / REQUESTS,
        redisRoundTrips: (load.reads - drainReads(load.redis) - (idle.reads - drainReads(idle.redis))) / REQUESTS,
        redisDrainReadsPerSecond: drainReads(load.redis) / (load.ms / 1000),
        pgStatements: sum(pgBy) - drainPerRequest,
        pgDrainWritesPerSecond: (drainPerRequest * REQUESTS) / (load.ms / 1000),
        syscalls: sum(sysBy),
        heapKb: (load.heapKb - idle.heapKb) / REQUESTS,
        heapObjects: (load.heapObjects - idle.heapObjects) / REQUESTS,
        redisByCommand: redisBy,
        pgByStatement: pgBy,
        syscallsByName: sysBy,
        heapObjectsByType: net(load.heapTypes, idle.heapTypes),
        timers: net(load.timers, idle.timers),
        elapsedMs: load.workMs,
      });
    }
    if (process.argv.includes("--trace-writes")) {
      // Profile detail: what each write-like syscall of a budgeted request writes to (fd targets).
      const body = agentChatBody({ chunks: 20 }, false);
      const out = join(work_, "writes.strace");
      const tracer = Bun.spawn([strace, "-f", "-y", "-e", "trace=write,writev,sendto,sendmsg", "-o", out, "-p", String(gw.pid)], { stdout: "ignore", stderr: "ignore" });
      await Bun.sleep(500);
      for (let i = 0; i < 50; i++) await fetch(`${url}/v1/chat/completions`, { method: "POST", headers: { "content-type": "application/json", authorization: `Bearer ${acct.routingKey}` }, body }).then((r) => r.text());
      await Bun.sleep(1200);
      tracer.kill("SIGINT");
      await tracer.exited;
      const by = new Map<string, number>();
      for (const line of readFileSync(out, "utf8").split("\n")) {
        const m = /(write|writev|sendto|sendmsg)\(\d+<([^>]*)>/.exec(line);
        if (!m) continue;
        const target = `${m[1]} ${m[2]!.replace(/:\[\d+\]/, "").replace(/\d+->/, "…->")}`;
        by.set(target, (by.get(target) ?? 0) + 1);
      }
      console.log("write-like syscalls per sequential budgeted request, by target:");
      for (const [t, n] of [...by].sort((a, b) => b[1] - a[1])) console.log(`  ${(n / 50).toFixed(2)}  ${t}`);
    }
    return report(rows, idleRow);
  } finally {
    if (gateway) await stopChild(gateway, 10_000);
    info?.disconnect();
    for (const m of monitors) m.close();
    await admin?.end({ timeout: 1 }).catch(() => {});
    await mock.stop();
    await redis.stop();
    await pg.destroy();
    if (process.argv.includes("--keep")) console.log(`gateway logs kept in ${work_}`);
    else rmSync(work_, { recursive: true, force: true });
  }
}

/**
 * Syscalls by name in an `strace -f -y` log, less the writes to `errPath` (this measurement's
 * own marker lines) and `sched_yield` (the runtime spinning while another thread holds a lock:
 * it counts how busy the machine is, not what a request asks of the kernel).
 */
export function syscallsOf(trace: string, errPath: string): Record<string, number> {
  const by: Record<string, number> = {};
  for (const line of trace.split("\n")) {
    // "<pid> name(…" starts a call; "<pid> <... name resumed>" finishes one already counted.
    const m = /^\d+\s+([a-z_0-9]+)\((.*)$/.exec(line);
    if (!m) continue;
    if (m[1] === "write" && m[2]!.startsWith(`2<${errPath}>`)) continue;
    if (m[1] === "sched_yield") continue;
    by[m[1]!] = (by[m[1]!] ?? 0) + 1;
  }
  return by;
}

/** Asks the gateway's preload for a full collection; returns the mark's sequence number once it is logged. */
let marks = 0;
async function heapMark(gw: Subprocess, errPath: string): Promise<number> {
  const n = ++marks;
  gw.kill("SIGUSR2");
  for (let i = 0; i < 200; i++) {
    if (readFileSync(errPath, "utf8").includes(`HEAP-MARK-END ${n}\n`)) return n;
    await Bun.sleep(25);
  }
  throw new Error("the gateway did not answer the heap mark (SIGUSR2): is bench/lib/heap-mark.ts preloaded?");
}

function report(rows: Row[], idle: Idle): number {
  const json = process.argv.includes("--json");
  const file = JSON.parse(readFileSync(BUDGETS, "utf8"));
  const budgets: Record<string, Partial<Record<Metric, number>>> = file.scenarios;
  const idleBudget: Partial<Record<"redisCommandsPerSecond" | "pgStatementsPerSecond", number>> = file.idle ?? {};
  const failures: string[] = [];
  for (const m of ["redisCommandsPerSecond", "pgStatementsPerSecond"] as const) {
    const limit = idleBudget[m];
    if (!Number.isFinite(idle[m])) failures.push(`idle: ${m} could not be measured`);
    else if (limit !== undefined && idle[m] > limit) failures.push(`idle: ${m} ${idle[m].toFixed(2)} exceeds the budget ${limit}`);
  }
  for (const r of rows) {
    if (r.ok !== r.requests) failures.push(`${r.scenario}: ${r.requests - r.ok} of ${r.requests} requests failed`);
    for (const m of METRICS) {
      const limit = budgets[r.scenario]?.[m];
      if (!Number.isFinite(r[m])) failures.push(`${r.scenario}: ${m} could not be measured`);
      else if (limit !== undefined && r[m] > limit) failures.push(`${r.scenario}: ${m} ${r[m].toFixed(3)}${PER_SECOND.includes(m) ? " per second" : " per request"} exceeds the budget ${limit}`);
    }
  }
  // Per chunk of a paced stream: the long paced stream less the short one, over the extra chunks.
  const short = rows.find((r) => r.scenario === `paced-${PACED_SHORT}`);
  const long = rows.find((r) => r.scenario === `paced-${PACED_LONG}`);
  const chunkBudget: Partial<Record<ChunkMetric, number>> = file.perChunk?.["paced-stream"] ?? {};
  const perChunk = Object.fromEntries(CHUNK_METRICS.map((m) => [m, short && long ? (long[m] - short[m]) / (PACED_LONG - PACED_SHORT) : NaN])) as Record<ChunkMetric, number>;
  for (const m of CHUNK_METRICS) {
    const limit = chunkBudget[m];
    if (!Number.isFinite(perChunk[m])) failures.push(`paced stream: ${m} per chunk could not be measured`);
    else if (limit !== undefined && perChunk[m] > limit) failures.push(`paced stream: ${m} ${perChunk[m].toFixed(3)} per chunk exceeds the budget ${limit}`);
  }
  if (json) console.log(JSON.stringify({ rows, idle, perChunk }, null, 2));
  else {
    console.log(`per request, ${REQUESTS} requests per scenario from ${CLIENTS} keep-alive client(s), an idle window of the same length subtracted, ~${(agentChatBody({}, false).length / 1024).toFixed(1)} kB agent body (budget in bench/budgets.json)`);
    console.log("| scenario | Redis commands sent | run by scripts | Redis round trips | usage drain reads per second | Postgres statements | usage drain writes per second | syscalls | JS heap allocated (kB) | JS objects allocated |");
    console.log("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const r of rows) {
      const cell = (m: Metric, digits: number) => `${r[m].toFixed(digits)} (≤ ${budgets[r.scenario]?.[m] ?? "–"})`;
      console.log(`| ${r.scenario} | ${cell("redisCommands", 3)} | ${cell("redisScriptCommands", 2)} | ${cell("redisRoundTrips", 3)} | ${cell("redisDrainReadsPerSecond", 1)} | ${cell("pgStatements", 3)} | ${cell("pgDrainWritesPerSecond", 1)} | ${cell("syscalls", 1)} | ${cell("heapKb", 1)} | ${cell("heapObjects", 0)} |`);
    }
    console.log(
      `idle instance, no request for ${(idle.ms / 1000).toFixed(1)} s: ${idle.redisCommandsPerSecond.toFixed(1)} Redis commands a second (≤ ${idleBudget.redisCommandsPerSecond ?? "–"}), ` +
        `${idle.pgStatementsPerSecond.toFixed(2)} Postgres statements a second (≤ ${idleBudget.pgStatementsPerSecond ?? "–"})`,
    );
    console.log(
      `per chunk of a paced stream (${PACED_LONG} against ${PACED_SHORT} chunks ${PACED_DELAY_MS} ms apart, ${PACED_REQUESTS} streams each from ${PACED_CLIENTS} clients): ` +
        CHUNK_METRICS.map((m) => `${m} ${perChunk[m].toFixed(m === "heapObjects" ? 1 : 2)} (≤ ${chunkBudget[m] ?? "–"})`).join(", "),
    );
    if (process.argv.includes("--detail")) {
      if (short && long) {
        const diff = (a: Record<string, number>, b: Record<string, number>) => Object.fromEntries([...new Set([...Object.keys(a), ...Object.keys(b)])].map((k) => [k, ((a[k] ?? 0) - (b[k] ?? 0)) / (PACED_LONG - PACED_SHORT)]).filter(([, v]) => Math.abs(v as number) >= 0.005));
        const fmt = (o: Record<string, number>) => Object.entries(o).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ");
        console.log(`per chunk: syscalls ${fmt(diff(long.syscallsByName, short.syscallsByName))}`);
        console.log(`per chunk: timers armed ${fmt(diff(long.timers, short.timers)) || "none"}`);
      }
      const fmt = (o: Record<string, number>) => Object.entries(o).sort((a, b) => b[1] - a[1]).map(([k, v]) => `${k} ${v.toFixed(3)}`).join(", ");
      console.log(`idle: per second ${fmt(Object.fromEntries(Object.entries(idle.detail).map(([k, v]) => [k, v / (idle.ms / 1000)])))}`);
      for (const r of rows) {
        console.log(`${r.scenario}: Redis ${fmt(r.redisByCommand) || "none"}`);
        console.log(`${r.scenario}: Postgres ${fmt(r.pgByStatement) || "none"}`);
        console.log(`${r.scenario}: syscalls ${fmt(r.syscallsByName)}`);
        console.log(`${r.scenario}: JS objects by type ${fmt(Object.fromEntries(Object.entries(r.heapObjectsByType).filter(([, v]) => v >= 1)))}`);
        console.log(`${r.scenario}: timers armed ${fmt(r.timers)}; ${r.requests} requests took ${Math.round(r.elapsedMs)} ms under strace`);
      }
    }
  }
  if (process.argv.includes("--no-check")) return 0;
  for (const f of failures) console.error(`count guard: ${f}`);
  if (!failures.length) console.log("count guards: every figure within its budget");
  return failures.length ? 1 : 0;
}

if (import.meta.main) process.exit(await main());
