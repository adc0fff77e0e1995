// The benchmark runner: `npm run bench` (full, ~12 min), `npm run bench -- --smoke` (CI, < 1 min),
// `npm run bench -- --soak` (10-minute memory soak). It starts the mock upstream, the gateway, the
// bare Bun proxy and Portkey as child processes (the proxies pinned to core 0, everything else to
// core 1), provisions an account, key and lane through the API, then runs each scenario DIRECT to
// the mock and THROUGH the gateway (and, for the ratio targets, through the bare proxy and
// Portkey), interleaved A B C D D C B A so drift cancels, and writes the table to bench/results/.
// Plain request/response scenarios are driven by wrk where it is installed (autocannon otherwise),
// and a generator check runs the gateway and the bare proxy under both, side by side. A second
// gateway whose Redis sits behind a 1 ms delay proxy measures what Redis off the host costs.
// It fails (exit 1) only on errors: the gateway not starting or dying, or any failed request.
// Timing targets are reported in the verdict column; `--strict` also fails on a missed target.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { cpus, release, totalmem, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { randomBytes } from "node:crypto";
import type { Subprocess } from "bun";
import { parseArgs, type RunOptions } from "./lib/args.ts";
import { runHttpLoad, type LoadResult } from "./lib/http-load.ts";
import { probe, runLoop, type Shot } from "./lib/loop-client.ts";
import {
  HAS_TASKSET, closeFd, cpuMicros, cpuSplit, machineBusyMicros, firstLine, freePort, isAlive, logFile, memory, pinned, stopChild, waitHealthy, jitSplit, threadSplit,
} from "./lib/processes.ts";
import { provision } from "./lib/provision.ts";
import {
  atLeast, atMost, figuresFor, markdown, type GeneratorRow, type MachineFacts, type RunReport, type ScenarioFigures, type Segment, type SoakFigures, type Verdict,
} from "./lib/report.ts";
import { median, summarize } from "./lib/stats.ts";
import { BLITZ_UPSTREAM_MS, SCENARIOS, SOAK_STREAMS, soakShot, type Endpoints, type Reference, type Scenario, type Side } from "./lib/scenarios.ts";
import { prepareStores } from "./lib/stores.ts";
import { measureAdmissionTrips } from "./admission-trips.ts";
import { measureBlitzJobs } from "./blitz-jobs.ts";
import { manyStreamsMarkdown, measureManyStreams } from "./many-streams.ts";
import { runWrk, WRK } from "./lib/wrk.ts";
import { pingRttMs } from "./lib/redis-rtt.ts";
import type { JsonShot } from "./lib/loop-client.ts";

const ROOT = resolve(import.meta.dir, "..");
const RESULTS = join(ROOT, "bench", "results");
const opts = parseArgs(process.argv.slice(2));
/** Bun's fetch ceiling for every process of the run that calls fetch: the gateway, the bare proxy, the runner (as the Dockerfile and `npm start` set it). */
const MAX_HTTP_REQUESTS = "65535";
/** Set once the timed rounds are about to start (settleJit). */
let jitWarmup: JitWarmup | null = null;
// Allocator studies (PROFILE.md, lever 2): MIMALLOC_PURGE_DELAY=-1 npm run bench runs the gateway and
// the bare proxy with that mimalloc setting (any MIMALLOC_* variable passes through); unset, both run
// with Bun's default, as shipped.
const ALLOCATOR_ENV: Record<string, string> = Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith("MIMALLOC_") && v !== undefined)) as Record<string, string>;

// The load generator runs in this process. Re-run it pinned to core 1, and with Bun's fetch allowed
// as many simultaneous requests as it takes (its default is 256, which would cap the 512 paced
// streams and the many-streams run in the client, not in the proxy measured).
if (!process.env.GW_BENCH_CHILD) {
  const child = Bun.spawn([...pinned(1), process.execPath, import.meta.path, ...process.argv.slice(2)], {
    env: { ...process.env, GW_BENCH_CHILD: "1", BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP_REQUESTS },
    stdio: ["inherit", "inherit", "inherit"],
  });
  for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => child.kill(sig));
  process.exit(await child.exited);
}

/** How long a gateway segment's CPU is still counted after its last request (covers the 1 s usage drain). */
const GATEWAY_TAIL_MS = 1200;
const IDLE_SAMPLE_MS = 2000;

const log = (msg: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${msg}`);

function machineFacts(stores: string): MachineFacts {
  let cpu = cpus()[0]?.model ?? "unknown CPU";
  try {
    cpu = /model name\s*:\s*(.+)/.exec(readFileSync("/proc/cpuinfo", "utf8"))?.[1]?.trim() ?? cpu;
  } catch {}
  return {
    cpu,
    cores: cpus().length,
    memoryGb: Math.round(totalmem() / 2 ** 30),
    kernel: release(),
    bun: Bun.version,
    pinning: HAS_TASKSET ? "gateway on core 0 (taskset -c 0); mock upstream and load generator on core 1" : "none (taskset missing or a single core)",
    stores,
    logLevel: opts.logLevel,
    allocator: Object.keys(ALLOCATOR_ENV).length ? Object.entries(ALLOCATOR_ENV).map(([k, v]) => `${k}=${v}`).join(" ") : "Bun's default",
  };
}

interface Children {
  mock: Subprocess;
  gateway: Subprocess;
  /** The reference proxies that started (a missing one leaves its rows out, with a log line). */
  refs: Partial<Record<Reference, { proc: Subprocess; base: string; logFd: number }>>;
  mockBase: string;
  gatewayUrl: string;
  gatewayLog: string;
  gatewayLogFd: number;
  /** The delay proxy in front of Redis for the `far` gateway, and the PING round trips measured through it and direct. */
  redisDelay?: { proc: Subprocess; rttLocalMs: number; rttFarMs: number };
}

async function startChildren(storeEnv: Record<string, string>, dataDir: string, webhookSecret: string): Promise<Children> {
  mkdirSync(RESULTS, { recursive: true });
  const mock = Bun.spawn([...pinned(1), process.execPath, join(ROOT, "bench", "mock-upstream.ts"), "--port", "0"], {
    cwd: ROOT, stdout: "pipe", stderr: "inherit", env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
  });
  const mockBase = await firstLine(mock, 20_000);
  log(`mock upstream at ${mockBase} (pid ${mock.pid})`);
  const port = freePort();
  const gatewayUrl = `http://127.0.0.1:${port}`;
  const gatewayLog = join(RESULTS, `tmp-gateway-${opts.mode}.log`);
  writeFileSync(gatewayLog, "");
  const fd = logFile(gatewayLog);
  const env: Record<string, string> = {
    PATH: process.env.PATH ?? "",
    HOME: process.env.HOME ?? "",
    NODE_ENV: "production",
    PORT: String(port),
    HOST: "127.0.0.1",
    BASE_URL: gatewayUrl,
    DATA_DIR: dataDir,
    LOG_LEVEL: opts.logLevel,
    GATEWAY_SECRET_KEY: randomBytes(32).toString("hex"),
    BILLING_WEBHOOK_SECRET: webhookSecret,
    PROVIDER_OPENAI_BASE_URL: mockBase,
    // Every run signs up once from 127.0.0.1; with a shared Redis the per-IP hourly limit would
    // refuse the 21st run of the hour. Nothing measured depends on it.
    SIGNUP_IP_LIMIT_PER_HOUR: "100000",
    // Bun's fetch runs 256 upstream requests at once unless told otherwise (the Dockerfile and `npm start` set this).
    BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP_REQUESTS,
    // What the access line costs: ACCESS_LOG=false npm run bench.
    ...(process.env.ACCESS_LOG ? { ACCESS_LOG: process.env.ACCESS_LOG } : {}),
    // JavaScriptCore switches for tail studies, e.g. BUN_JSC_logGC=1 (every collection and its pause, in the gateway's log).
    ...Object.fromEntries(Object.entries(process.env).filter(([k, v]) => k.startsWith("BUN_JSC_") && v !== undefined)) as Record<string, string>,
    ...storeEnv,
    ...ALLOCATOR_ENV,
  };
  const profiler = opts.profile ? ["--cpu-prof", "--cpu-prof-md", `--cpu-prof-dir=${join(RESULTS, "tmp-profile")}`] : [];
  const gateway = Bun.spawn([...pinned(0), process.execPath, ...profiler, join(ROOT, "src", "main.ts")], { cwd: ROOT, env, stdout: fd, stderr: fd });
  const tail = () => `--- last lines of ${gatewayLog} ---\n${readFileSync(gatewayLog, "utf8").split("\n").slice(-30).join("\n")}`;
  await waitHealthy(`${gatewayUrl}/healthz`, gateway, 60_000, tail);
  log(`gateway at ${gatewayUrl} (pid ${gateway.pid})`);
  const refs: Children["refs"] = {};
  const wanted = new Set(opts.manyStreams ? ["bare" as const] : SCENARIOS.filter((s) => !opts.only || opts.only.includes(s.id)).flatMap((s) => s.references ?? []));
  if (opts.baseRoot && opts.mode !== "soak") refs.base = await startSecondGateway(env, {}, resolve(opts.baseRoot), "base");
  let redisDelay: Children["redisDelay"];
  if (opts.mode !== "soak" && wanted.has("far")) {
    if (!storeEnv.REDIS_URL) log("Redis 1 ms away skipped: the run has no REDIS_URL (embedded stores)");
    else {
      const far = await startFarGateway(env, storeEnv.REDIS_URL);
      refs.far = far.gateway;
      redisDelay = far.delay;
    }
  }
  if (opts.mode !== "soak" && wanted.has("bare")) refs.bare = await startBare(mockBase);
  if (opts.mode === "full" && wanted.has("portkey") && opts.portkey) {
    const pk = await startPortkey();
    if (pk) refs.portkey = pk;
  }
  return { mock, gateway, refs, mockBase, gatewayUrl, gatewayLog, gatewayLogFd: fd, redisDelay };
}

/**
 * A second gateway on core 0 with the first one's settings and stores, except that its Redis is
 * behind bench/redis-delay-proxy.ts (1 ms each way, on core 1): the same key, Redis not on the host.
 */
async function startFarGateway(gatewayEnv: Record<string, string>, redisUrl: string): Promise<{ gateway: { proc: Subprocess; base: string; logFd: number }; delay: NonNullable<Children["redisDelay"]> }> {
  const u = new URL(redisUrl);
  const redisHost = u.hostname || "127.0.0.1";
  const redisPort = Number(u.port || 6379);
  const delayProc = Bun.spawn([...pinned(1), process.execPath, join(ROOT, "bench", "redis-delay-proxy.ts"), "--upstream", `${redisHost}:${redisPort}`, "--delay-ms", "1"], {
    cwd: ROOT, stdout: "pipe", stderr: "inherit", env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "" },
  });
  const addr = await firstLine(delayProc, 20_000);
  const farPort = Number(addr.split(":")[1]);
  const rttLocalMs = await pingRttMs(redisHost, redisPort);
  const rttFarMs = await pingRttMs("127.0.0.1", farPort);
  log(`Redis delay proxy at ${addr} (pid ${delayProc.pid}): PING round trip ${rttFarMs.toFixed(2)} ms through it, ${rttLocalMs.toFixed(2)} ms direct`);
  u.hostname = "127.0.0.1";
  u.port = String(farPort);
  const gateway = await startSecondGateway(gatewayEnv, { REDIS_URL: u.toString() }, ROOT, "far");
  return { gateway, delay: { proc: delayProc, rttLocalMs, rttFarMs } };
}

/** Another gateway process on core 0: the first one's settings with `overrides`, from the tree at `root`. */
async function startSecondGateway(gatewayEnv: Record<string, string>, overrides: Record<string, string>, root: string, name: "far" | "base"): Promise<{ proc: Subprocess; base: string; logFd: number }> {
  const port = freePort();
  const base = `http://127.0.0.1:${port}`;
  const logPath = join(RESULTS, `tmp-gateway-${name}-${opts.mode}.log`);
  writeFileSync(logPath, "");
  const fd = logFile(logPath);
  const proc = Bun.spawn([...pinned(0), process.execPath, join(root, "src", "main.ts")], {
    cwd: root, env: { ...gatewayEnv, ...overrides, PORT: String(port), BASE_URL: base }, stdout: fd, stderr: fd,
  });
  await waitHealthy(`${base}/healthz`, proc, 60_000, () => readFileSync(logPath, "utf8").split("\n").slice(-30).join("\n"));
  log(`${name === "far" ? "gateway with Redis 1 ms away" : `gateway of ${root}`} at ${base} (pid ${proc.pid})`);
  return { proc, base, logFd: fd };
}

/** The bare Bun pass-through proxy on the gateway's core: the floor the ratio targets compare with. */
async function startBare(mockBase: string): Promise<{ proc: Subprocess; base: string; logFd: number }> {
  const logPath = join(RESULTS, `tmp-bare-${opts.mode}.log`);
  writeFileSync(logPath, "");
  const fd = logFile(logPath);
  const origin = new URL(mockBase).origin;
  const proc = Bun.spawn([...pinned(0), process.execPath, join(ROOT, "bench", "bare-proxy.ts"), "--upstream", origin, "--port", "0"], {
    cwd: ROOT, stdout: "pipe", stderr: fd, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NODE_ENV: "production", BUN_CONFIG_MAX_HTTP_REQUESTS: MAX_HTTP_REQUESTS, ...ALLOCATOR_ENV },
  });
  const base = await firstLine(proc, 20_000);
  log(`bare Bun proxy at ${base} (pid ${proc.pid})`);
  return { proc, base, logFd: fd };
}

const PORTKEY_DIR = join(ROOT, "bench", "portkey");
const PORTKEY_MAIN = join(PORTKEY_DIR, "node_modules", "@portkey-ai", "gateway", "build", "start-server.js");

/**
 * Portkey 1.15.2 under Node with @hono/node-server 1.13.5 and hono 4.9.7 (bench/portkey/package.json
 * and its lock): installed with `npm ci --prefix bench/portkey` on first use, never a dependency of
 * the gateway. Full runs only; without Node or the registry the run goes on without it.
 */
async function startPortkey(): Promise<{ proc: Subprocess; base: string; logFd: number } | null> {
  const node = Bun.which("node");
  if (!node) {
    log("Portkey skipped: no node on PATH");
    return null;
  }
  if (!existsSync(PORTKEY_MAIN)) {
    log("installing Portkey into bench/portkey (npm ci)");
    const r = Bun.spawnSync(["npm", "ci", "--prefix", PORTKEY_DIR, "--no-audit", "--no-fund", "--ignore-scripts"], { cwd: ROOT, stdout: "inherit", stderr: "inherit" });
    if (r.exitCode !== 0 || !existsSync(PORTKEY_MAIN)) {
      log(`Portkey skipped: npm ci failed (exit ${r.exitCode})`);
      return null;
    }
  }
  const port = freePort();
  const logPath = join(RESULTS, `tmp-portkey-${opts.mode}.log`);
  writeFileSync(logPath, "");
  const fd = logFile(logPath);
  const proc = Bun.spawn([...pinned(0), node, PORTKEY_MAIN, `--port=${port}`, "--headless"], {
    cwd: PORTKEY_DIR, stdout: fd, stderr: fd, env: { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", NODE_ENV: "production" },
  });
  const base = `http://127.0.0.1:${port}`;
  try {
    await waitHealthy(`${base}/`, proc, 30_000, () => readFileSync(logPath, "utf8").slice(-2000));
  } catch (e) {
    log(`Portkey skipped: ${e instanceof Error ? e.message.split("\n")[0] : String(e)}`);
    await stopChild(proc, 2000);
    closeFd(fd);
    return null;
  }
  log(`Portkey 1.15.2 at ${base} (pid ${proc.pid})`);
  return { proc, base, logFd: fd };
}

/** The sides a scenario runs in this run: direct, its reference proxies that started, the gateway. */
function sidesOf(sc: Scenario, children: Children): Side[] {
  // The base tree's gateway (--base-root) runs in every scenario that has the bare proxy beside it.
  const refs: Reference[] = [...(sc.references ?? []), ...(sc.references?.includes("bare") ? ["base" as const] : [])];
  return ["direct", ...refs.filter((r) => children.refs[r]), "gateway"];
}

function shotsFor(sc: Scenario, ep: Endpoints, sides: Side[]): Partial<Record<Side, () => Shot>> {
  return Object.fromEntries(sides.map((side) => [side, sc.shots(side, ep)]));
}

/**
 * Runs one segment. Plain request/response scenarios go through wrk where it is installed (the
 * independent closed-loop generator users run) and through autocannon otherwise or when asked.
 */
async function drive(sc: Scenario, next: () => Shot, durationS: number, generator: "wrk" | "autocannon" = WRK && opts.generator === "wrk" ? "wrk" : "autocannon"): Promise<LoadResult> {
  if (sc.driver === "autocannon" && generator === "wrk") {
    const shot = next();
    if (shot.type !== "json") throw new Error(`${sc.id}: wrk scenarios send plain JSON requests`);
    return runWrk(pinned(1), shot.url, shot.headers, shot.body, sc.concurrency, durationS);
  }
  if (sc.driver === "autocannon") {
    const shot = next();
    if (shot.type !== "json") throw new Error(`${sc.id}: autocannon scenarios send plain JSON requests`);
    return runHttpLoad({ url: shot.url, headers: shot.headers, body: shot.body, connections: sc.concurrency, durationS });
  }
  return runLoop({ concurrency: sc.concurrency, durationS, next });
}

async function main(): Promise<number> {
  const startedAt = new Date().toISOString();
  const stores = await prepareStores(process.env);
  const dataDir = mkdtempSync(join(tmpdir(), "gw-bench-"));
  const webhookSecret = `whsec_${randomBytes(24).toString("hex")}`;
  log(`${opts.mode} run; stores: ${stores.label}; ${HAS_TASKSET ? "pinned" : "not pinned"}`);
  let children: Children | null = null;
  let exitCode = 0;
  try {
    children = await startChildren(stores.env, dataDir, webhookSecret);
    const gw = children.gateway;
    const mock = children.mock;
    // Idle as an operator first sees it: booted, connected to its stores, no request served yet.
    await Bun.sleep(2000);
    const idleBootRssMb = memory(gw.pid).rssKb / 1024;
    const p = await provision({
      gatewayUrl: children.gatewayUrl, dataDir, webhookSecret,
      runAdmin: async () => ({ code: 1, output: "the runner always sets BILLING_WEBHOOK_SECRET" }),
    });
    log(`provisioned account ${p.accountId} (activated by ${p.activatedBy}), routing key ${p.routingKey.slice(0, 10)}…`);
    const ep: Endpoints = {
      mockBase: children.mockBase, gatewayBase: children.gatewayUrl, routingKey: p.routingKey,
      bareBase: children.refs.bare?.base, portkeyBase: children.refs.portkey?.base, farBase: children.refs.far?.base, baseBase: children.refs.base?.base,
    };
    const procOf = (side: Side): Subprocess | null => (side === "gateway" ? gw : side === "direct" ? null : children!.refs[side]?.proc ?? null);
    await Bun.sleep(1000);
    const idleRssMb = memory(gw.pid).rssKb / 1024;
    log(`idle RSS ${idleBootRssMb.toFixed(1)} MB after boot, ${idleRssMb.toFixed(1)} MB after provisioning`);

    if (opts.manyStreams) {
      const report = await measureManyStreams({ ep, requested: opts.manyStreams, rounds: opts.rounds, windowS: opts.mode === "smoke" ? 3 : 10, procOf, mock, log });
      const md = manyStreamsMarkdown(report);
      console.log(`\n${md}\n`);
      const stamp = opts.mode === "smoke" ? "tmp-smoke" : startedAt.slice(0, 19).replace(/:/g, "-");
      writeFileSync(join(RESULTS, `${stamp}-many-streams.md`), `# Many slow streams, ${startedAt}\n\n${md}\n`);
      writeFileSync(join(RESULTS, `${stamp}-many-streams.json`), JSON.stringify({ startedAt, machine: machineFacts(stores.label), ...report }, null, 2));
      log(`wrote bench/results/${stamp}-many-streams.{md,json}`);
      await stopChild(gw, 75_000);
      return report.rows.some((r) => r.errors) ? 1 : 0;
    }
    const scenarios = opts.mode === "soak" ? [] : SCENARIOS.filter((s) => !opts.only || opts.only.includes(s.id));
    const sidesBy = new Map(scenarios.map((s) => [s.id, sidesOf(s, children!)]));
    const shots = new Map(scenarios.map((s) => [s.id, shotsFor(s, ep, sidesBy.get(s.id)!)]));
    const segments: Segment[] = [];
    const probeErrors: Record<string, string[]> = {};

    // Correctness first: one request each way per scenario must be right before anything is timed.
    for (const sc of scenarios) {
      for (const side of sidesBy.get(sc.id)!) {
        const err = await probe(shots.get(sc.id)![side]!());
        if (err) (probeErrors[sc.id] ??= []).push(`${side} probe: ${err}`);
      }
      if (probeErrors[sc.id]) log(`${sc.id}: ${probeErrors[sc.id]!.join("; ")}`);
    }
    const runnable = scenarios.filter((s) => !probeErrors[s.id]);

    for (const sc of runnable) {
      for (const side of sidesBy.get(sc.id)!) await drive(sc, shots.get(sc.id)![side]!, side === "direct" ? opts.warmupS / 2 : opts.warmupS);
    }
    jitWarmup = await settleJit(runnable, sidesBy, shots, gw, children.refs.base?.proc ?? null);
    // The gateway's work a request leaves behind (settlements and ledger writes of the last turns,
    // the usage drain and flush once a second, the garbage it made) is CPU the request costs too:
    // after each gateway segment its CPU keeps being counted for GATEWAY_TAIL_MS, less what the
    // gateway burns idle (heartbeats, timers) in that time, measured here once.
    await Bun.sleep(1500);
    const idle0 = cpuMicros(gw.pid);
    await Bun.sleep(IDLE_SAMPLE_MS);
    const idleUsPerMs = Math.max(0, cpuMicros(gw.pid) - idle0) / IDLE_SAMPLE_MS;
    log(`gateway idle CPU ${(idleUsPerMs * 1000).toFixed(0)} µs/s (taken off each ${GATEWAY_TAIL_MS} ms tail)`);
    for (let round = 1; round <= opts.rounds; round++) {
      for (const sc of runnable) {
        // A B … then the same backwards (A B C D D C B A), unless --smoke asks for one pass.
        // Order within a round: direct, bare proxy, Portkey, gateway — A C D B in the report's letters.
        const sides = sidesBy.get(sc.id)!;
        const pattern: Side[] = opts.pattern === "AB" ? sides : [...sides, ...[...sides].reverse()];
        for (const side of pattern) {
          if (!isAlive(gw)) throw new Error(`the gateway exited (code ${gw.exitCode}) during ${sc.id}`);
          const proc = procOf(side);
          if (proc && !isAlive(proc)) throw new Error(`the ${side} proxy exited (code ${proc.exitCode}) during ${sc.id}`);
          // CPU of every proxy on core 0 (an idle one costs ~0), so "other" stays the rest of the machine.
          const core0 = [gw, ...Object.values(children.refs).map((r) => r!.proc)];
          const c0 = core0.map((p) => cpuSplit(p.pid));
          const m0 = cpuMicros(mock.pid);
          const r0 = cpuMicros(process.pid);
          const all0 = machineBusyMicros();
          const t0 = opts.threads && proc ? threadSplit(proc.pid) : null;
          const result = await drive(sc, shots.get(sc.id)![side]!, opts.segmentS);
          if (t0 && proc) {
            const t1 = threadSplit(proc.pid);
            const n = result.ok || 1;
            log(`threads ${sc.id} ${side}: ${Object.keys(t1).map((k) => `${k} ${(((t1[k] ?? 0) - (t0[k] ?? 0)) / 1000 / n).toFixed(1)}`).join(", ")} µs/req`);
          }
          const all1 = machineBusyMicros();
          const c1 = core0.map((p) => cpuSplit(p.pid));
          const m1 = cpuMicros(mock.pid);
          const r1 = cpuMicros(process.pid);
          const mem = memory(gw.pid);
          const used = c1.map((c, i) => c.userUs + c.sysUs - c0[i]!.userUs - c0[i]!.sysUs);
          const core0Us = used.reduce((a, b) => a + b, 0);
          const seg: Segment = {
            scenario: sc.id, round, side, result, rssKb: mem.rssKb, hwmKb: mem.hwmKb, mockCpuUs: m1 - m0,
            otherCpuUs: Math.max(0, all1 - all0 - core0Us - (m1 - m0) - (r1 - r0)), wallS: result.elapsedS,
          };
          const i = proc ? core0.indexOf(proc) : -1;
          if (i >= 0) {
            seg.cpuUs = used[i];
            seg.sysUs = c1[i]!.sysUs - c0[i]!.sysUs;
          }
          if ((side === "gateway" || side === "base") && i >= 0) {
            await Bun.sleep(GATEWAY_TAIL_MS);
            const c2 = cpuSplit(gw.pid);
            const tail = c2.userUs + c2.sysUs - c1[i]!.userUs - c1[i]!.sysUs - idleUsPerMs * GATEWAY_TAIL_MS;
            seg.cpuUs = (seg.cpuUs ?? 0) + Math.max(0, tail);
            seg.tailCpuUs = Math.max(0, tail);
          }
          segments.push(seg);
          if (result.errors) log(`${sc.id} ${side}: ${result.errors} errors, e.g. ${result.errorSamples[0]}`);
        }
        const last = segments.filter((s) => s.scenario === sc.id && s.round === round);
        const g = last.filter((s) => s.side === "gateway");
        const ok = g.reduce((a, s) => a + s.result.ok, 0);
        const cpu = g.reduce((a, s) => a + (s.cpuUs ?? 0), 0);
        const refs = sides.filter((s) => s === "bare" || s === "portkey").map((side) => {
          const r = last.filter((s) => s.side === side);
          const rok = r.reduce((a, s) => a + s.result.ok, 0);
          return `${side} ${rok ? (r.reduce((a, s) => a + (s.cpuUs ?? 0), 0) / rok).toFixed(0) : "–"} µs`;
        });
        log(`round ${round}/${opts.rounds} ${sc.id}: ${ok} through the gateway, ${ok ? (cpu / ok).toFixed(0) : "–"} µs CPU each${refs.length ? ` (${refs.join(", ")})` : ""}`);
      }
    }

    const figures: ScenarioFigures[] = runnable.map((sc) => figuresFor(sc.id, sc.title, sc.note, segments.filter((s) => s.scenario === sc.id)));
    for (const sc of scenarios.filter((s) => probeErrors[s.id])) {
      const empty = { ok: 0, errors: probeErrors[sc.id]!.length, rps: 0, p50: NaN, p99: NaN };
      figures.push({
        id: sc.id, title: sc.title, note: sc.note, rounds: 0, direct: empty, gateway: empty, addedP50Ms: NaN, addedP99Ms: NaN,
        gatewayCpuUsPerReq: NaN, gatewaySysUsPerReq: NaN, mockCpuUsPerReq: NaN, rssEndMb: NaN, peakRssMb: NaN, errors: probeErrors[sc.id]!.length, errorSamples: probeErrors[sc.id]!,
      });
    }

    // The bench's own generator against an independent one (wrk), side by side: CPU per request of
    // the gateway and of the bare proxy in `chat` and `chat-1`, alternating autocannon and wrk segments.
    const generatorCheck: GeneratorRow[] = [];
    if (WRK && opts.mode !== "soak" && opts.generatorCheck) {
      for (const id of ["chat", "chat-1"]) {
        const sc = runnable.find((s) => s.id === id);
        if (!sc) continue;
        for (const side of ["gateway", "bare"] as const) {
          const proc = procOf(side);
          const shot = shots.get(id)![side];
          if (!proc || !shot) continue;
          const row = await compareGenerators(sc, side, shot, proc, side === "gateway" ? idleUsPerMs : null, opts.mode === "smoke" ? 1 : opts.rounds, opts.segmentS);
          generatorCheck.push(row);
          log(`generators (${sc.title}, ${side}): ${row.wrkUs.toFixed(0)} µs CPU per request under wrk, ${row.autocannonUs.toFixed(0)} µs under autocannon (${row.wrkRps.toFixed(0)} vs ${row.autocannonRps.toFixed(0)} req/s)`);
        }
      }
    } else if (!WRK) log("generator check skipped: wrk is not installed (Debian: apt-get install wrk)");

    let soak: SoakFigures | undefined;
    if (opts.soakS > 0) {
      const err = await probe(soakShot(ep)());
      if (err) {
        soak = {
          durationS: 0, streams: 0, completed: 0, errors: 1, errorSamples: [`probe: ${err}`], rssStartMb: NaN, rssAfterWarmMb: NaN,
          rssEndMb: NaN, rssPeakMb: NaN, samples: [], gatewayCpuUsPerStream: NaN,
        };
        log(`soak skipped: ${err}`);
      } else {
        soak = await runSoak(ep, gw, opts.soakS);
      }
    }

    // A 1,000-prompt /blitz job beside the /blitz scenario (smoke: a hundred), on the same gateway.
    let blitzJobs: RunReport["blitzJobs"];
    if (opts.mode !== "soak" && (!opts.only || opts.only.includes("blitz"))) {
      try {
        blitzJobs = await measureBlitzJobs(ep.gatewayBase, ep.routingKey, gw.pid, opts.mode === "smoke", BLITZ_UPSTREAM_MS);
        for (const j of blitzJobs) log(`blitz job: ${j.prompts} prompts, ${j.upstreamMs} ms upstream: ${j.itemsPerS.toFixed(1)} items/s, ${j.overheadMsPerItem.toFixed(2)} ms overhead/item, ${j.gatewayCpuUsPerItem.toFixed(0)} µs CPU/item`);
      } catch (e) {
        blitzJobs = [{ upstreamMs: 0, prompts: 0, concurrency: 0, wallMs: NaN, itemsPerS: NaN, boundPerS: NaN, overheadMsPerItem: NaN, gatewayCpuUsPerItem: NaN, succeeded: 0, errors: [e instanceof Error ? e.message : String(e)] }];
        log(`blitz job failed: ${blitzJobs[0]!.errors[0]}`);
      }
    }

    await Bun.sleep(opts.mode === "smoke" ? 1000 : 5000);
    const idleRssAfterMb = isAlive(gw) ? memory(gw.pid).rssKb / 1024 : NaN;

    const stopStarted = Date.now();
    // Longer than the gateway's own SHUTDOWN_TIMEOUT_SECONDS (60 s): its drain of what the run left in the usage stream is part of the result.
    await stopChild(gw, 75_000);
    const gatewayExit = gw.exitCode === 0 ? `clean (SIGTERM drain in ${Date.now() - stopStarted} ms)` : `code ${gw.exitCode} signal ${gw.signalCode}`;

    // After the gateway under test is gone: an in-process gateway of its own counts the commands.
    const admissionTrips = opts.mode === "soak" ? undefined : await measureAdmissionTrips(opts.mode === "smoke" ? 80 : 600);
    if (admissionTrips) log(`admission calls per request: ${admissionTrips.map((t) => `${t.key} ${t.admissionsPerRequest.toFixed(3)}`).join(", ")}`);
    const verdicts = targets(figures, idleBootRssMb, soak, children.redisDelay);
    for (const g of generatorCheck.filter((r) => r.side === "gateway")) {
      verdicts.push(atMost(`gateway CPU per request, autocannon vs wrk (${g.title}): difference`, (100 * Math.abs(g.autocannonUs - g.wrkUs)) / g.wrkUs, 15, "%", 1));
    }
    if (admissionTrips) {
      const worst = Math.max(...admissionTrips.map((t) => t.admissionsPerRequest));
      verdicts.push(atMost("admission (budget, rate limits, concurrency): Redis script calls per request, worst kind of key", worst, 1, "calls", 3));
    }
    const errors = figures.reduce((a, f) => a + f.errors, 0) + (soak?.errors ?? 0) + (blitzJobs?.reduce((a, j) => a + j.errors.length, 0) ?? 0);
    const report: RunReport = {
      mode: opts.mode, startedAt, finishedAt: new Date().toISOString(),
      machine: { ...machineFacts(stores.label), ...otherLoad(segments) },
      settings: { rounds: opts.rounds, segmentS: opts.segmentS, pattern: opts.pattern === "AB" ? "A B (C)" : "A B B A (A C D B B D C A with the bare proxy C and Portkey D)", warmupS: opts.warmupS },
      jitWarmup,
      idleBootRssMb, idleRssMb, idleRssAfterMb, scenarios: figures, verdicts, errors, gatewayExit, admissionTrips, blitzJobs,
      generator: WRK && opts.generator === "wrk" ? "wrk" : "autocannon", generatorCheck,
      ...(opts.baseRoot ? { baseRoot: opts.baseRoot } : {}),
    };
    if (children.redisDelay) report.redisRtt = { localMs: children.redisDelay.rttLocalMs, farMs: children.redisDelay.rttFarMs };
    if (soak) report.soak = soak;
    const md = markdown(report);
    console.log("\n" + md);
    writeResults(report, md);
    if (errors > 0) {
      log(`${errors} failed request(s): failing the run`);
      exitCode = 1;
    }
    if (gw.exitCode !== 0) {
      log(`the gateway did not shut down cleanly (${gatewayExit})`);
      exitCode = 1;
    }
    if (opts.strict && verdicts.some((v) => !v.met)) {
      log("--strict: a target was missed");
      exitCode = 1;
    }
  } catch (e) {
    console.error(`[bench] ${e instanceof Error ? e.message : String(e)}`);
    exitCode = 1;
  } finally {
    if (children) {
      for (const r of Object.values(children.refs)) {
        await stopChild(r!.proc, 5_000);
        closeFd(r!.logFd);
      }
      await stopChild(children.gateway, 10_000);
      if (children.redisDelay) await stopChild(children.redisDelay.proc, 5_000);
      await stopChild(children.mock, 5_000);
      closeFd(children.gatewayLogFd);
    }
    await stores.cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  }
  return exitCode;
}

async function runSoak(ep: Endpoints, gw: Subprocess, durationS: number): Promise<SoakFigures> {
  const streams = opts.mode === "smoke" ? 50 : SOAK_STREAMS;
  log(`soak: ${streams} concurrent streams for ${durationS} s`);
  const samples: Array<{ t: number; rssMb: number }> = [];
  const t0 = performance.now();
  const sample = () => {
    if (isAlive(gw)) samples.push({ t: (performance.now() - t0) / 1000, rssMb: memory(gw.pid).rssKb / 1024 });
  };
  sample();
  const every = Math.max(1, Math.min(10, durationS / 30));
  const timer = setInterval(sample, every * 1000);
  const cpu0 = cpuMicros(gw.pid);
  const result = await runLoop({ concurrency: streams, durationS, next: soakShot(ep) });
  const cpu1 = cpuMicros(gw.pid);
  clearInterval(timer);
  sample();
  // RSS saws up and down with garbage collection; compare medians of windows, not two points.
  const window = (from: number, to: number) => {
    const w = samples.filter((s) => s.t >= durationS * from && s.t <= durationS * to).map((s) => s.rssMb);
    return w.length ? median(w) : NaN;
  };
  const soak: SoakFigures = {
    durationS, streams,
    completed: result.ok, errors: result.errors, errorSamples: result.errorSamples,
    rssStartMb: samples[0]?.rssMb ?? NaN,
    rssAfterWarmMb: window(0.2, 0.45),
    rssEndMb: window(0.75, 1.01),
    rssPeakMb: Math.max(...samples.map((s) => s.rssMb)),
    samples,
    gatewayCpuUsPerStream: result.ok ? (cpu1 - cpu0) / result.ok : NaN,
  };
  log(`soak: ${soak.completed} streams, RSS ${soak.rssStartMb.toFixed(1)} → ${soak.rssEndMb.toFixed(1)} MB (peak ${soak.rssPeakMb.toFixed(1)})`);
  return soak;
}

/** How busy the rest of the machine was while we measured (others' work skews latency, not CPU/request). */
function otherLoad(segments: Segment[]): { otherLoadPct?: number } {
  const wall = segments.reduce((a, s) => a + (s.wallS ?? 0), 0);
  if (!wall) return {};
  const other = segments.reduce((a, s) => a + (s.otherCpuUs ?? 0), 0);
  return { otherLoadPct: (100 * other) / (wall * 1e6 * cpus().length) };
}

/** The targets, each a ratio to a proxy measured in the same rounds where the target is relative. */
function targets(f: ScenarioFigures[], idleBootRssMb: number, soak?: SoakFigures, redisDelay?: Children["redisDelay"]): Verdict[] {
  const by = (id: string) => f.find((s) => s.id === id && s.rounds > 0);
  const v: Verdict[] = [];
  const chat = by("chat");
  const chat1 = by("chat-1");
  const stream = by("stream");
  if (chat) v.push(atMost("CPU per non-streamed request, gateway ÷ bare Bun proxy (32 connections)", chat.references?.bare?.gatewayCpuRatio, 2, "×", 2));
  if (stream) v.push(atMost("CPU per 20-chunk stream, gateway ÷ bare Bun proxy (32 streams)", stream.references?.bare?.gatewayCpuRatio, 3, "×", 2));
  const long = by("stream-500");
  if (long) v.push(atMost("CPU per 500-chunk stream, gateway ÷ bare Bun proxy (32 streams)", long.references?.bare?.gatewayCpuRatio, 1.6, "×", 2));
  const rhythm = by("paced-64");
  const floor = rhythm?.references?.bare?.side;
  if (rhythm && floor) v.push(atMost("64 paced streams: p99 time to last byte over the bare proxy's", rhythm.gateway.p99 - floor.p99, 5, "ms", 1));
  if (chat1) {
    v.push(atMost("CPU per request at one client, gateway ÷ bare Bun proxy", chat1.references?.bare?.gatewayCpuRatio, 2.5, "×", 2));
    v.push(atMost("one client: added p50 over the bare proxy's added p50", chat1.references?.bare?.gatewayAddedP50OverMs, 0.15, "ms", 3));
    v.push(atMost("one client: added p99 (gateway − direct)", chat1.addedP99Ms, 1, "ms", 3));
  }
  if (stream) v.push(atMost("32 streams: added time to first byte over the bare proxy's", stream.references?.bare?.gatewayAddedTtfbOverMs, 1, "ms", 3));
  const far = by("chat-1-redis-far")?.references?.far;
  if (far && redisDelay) {
    v.push(atMost(`one client, hot budgeted key: added p50 with Redis ${redisDelay.rttFarMs.toFixed(1)} ms round trip away − with Redis local`, -far.gatewayAddedP50OverMs, 0.2, "ms", 3));
  }
  if (chat) {
    const r = chat.references?.portkey?.gatewayCpuRatio;
    v.push(atLeast("CPU per request, Portkey 1.15.2 ÷ gateway (32 connections)", r !== undefined && r > 0 ? 1 / r : undefined, 15, "×", 1));
  }
  const paced = by("stream-paced");
  if (paced) {
    v.push(atMost("paced stream: chunks glued together by the gateway (no batching)", paced.gateway.coalescedPct, Math.max(1, (paced.direct.coalescedPct ?? 0) + 1), "%", 2));
    v.push(atMost("paced stream: added gap between chunks (p50)", paced.addedGapP50Ms, 1, "ms", 3));
  }
  const blitz = by("blitz");
  if (blitz) v.push(atMost("/blitz 50 prompts, 300 ms upstream: batch latency (p50)", blitz.gateway.p50, 350, "ms", 1));
  v.push(atMost("memory: idle RSS after boot", idleBootRssMb, 100, "MB", 1));
  if (soak) {
    const growth = soak.rssEndMb - soak.rssAfterWarmMb;
    v.push(atMost(`memory: RSS growth over the ${soak.durationS} s soak (median of the last quarter − median of 20–45%)`, growth, Math.max(10, soak.rssAfterWarmMb * 0.1), "MB", 1));
  }
  return v;
}

function writeResults(report: RunReport, md: string): void {
  mkdirSync(RESULTS, { recursive: true });
  const stamp = report.startedAt.replace(/[:.]/g, "-").slice(0, 19);
  if (report.mode === "smoke") {
    // CI smoke runs leave nothing tracked behind (tmp-* is ignored by git).
    writeFileSync(join(RESULTS, "tmp-smoke.json"), JSON.stringify(report, null, 2));
    writeFileSync(join(RESULTS, "tmp-smoke.md"), md);
    log(`wrote bench/results/tmp-smoke.{json,md}`);
    return;
  }
  // A run of some scenarios only is kept apart (ignored by git) and never replaces latest.md.
  if (opts.only) {
    const name = `tmp-${stamp}-${opts.only.join("+")}`;
    writeFileSync(join(RESULTS, `${name}.json`), JSON.stringify(report, null, 2));
    writeFileSync(join(RESULTS, `${name}.md`), md);
    log(`wrote bench/results/${name}.{json,md}`);
    return;
  }
  const name = report.mode === "soak" ? `${stamp}-soak` : stamp;
  const latest = report.mode === "soak" ? "latest-soak.md" : "latest.md";
  writeFileSync(join(RESULTS, `${name}.json`), JSON.stringify(report, null, 2));
  writeFileSync(join(RESULTS, `${name}.md`), md);
  writeFileSync(join(RESULTS, latest), md);
  log(`wrote bench/results/${name}.{json,md} and ${latest}`);
}

process.exit(await main());

/** How long the gateway's JIT compiled before the timed rounds, and how much CPU it took. */
interface JitWarmup {
  loadS: number;
  compileMs: number;
  settled: boolean;
  /** Compiler threads' share of the gateway's CPU in the last warm-up slice. */
  lastShare: number;
}
/**
 * The gateway carries far more code than the bare proxy, and JavaScriptCore compiles it on its
 * compiler threads (`JITWorker`) for the first ~20,000 requests: about a second of CPU, once per
 * process. The figures are of a warm instance, as one serving a fleet is: the scenarios keep
 * driving the gateway (and the base tree's, in an A/B) in 2 s slices until its compiler threads
 * take under 3 % of its CPU, at most 40 s; the warm-up's compile CPU is reported beside the figures.
 */
async function settleJit(runnable: Scenario[], sidesBy: Map<string, Side[]>, shots: Map<string, Partial<Record<Side, () => Shot>>>, gw: Subprocess, base: Subprocess | null): Promise<JitWarmup> {
  const SLICE_S = opts.mode === "smoke" ? 0.5 : 2;
  const MAX_S = opts.mode === "smoke" ? 1 : 40;
  const first = jitSplit(gw.pid);
  let loadS = 0;
  let lastShare = 1;
  while (loadS < MAX_S) {
    const before = jitSplit(gw.pid);
    for (const sc of runnable) {
      const sides = sidesBy.get(sc.id)!.filter((s) => s === "gateway" || (s === "base" && base));
      for (const side of sides) await drive(sc, shots.get(sc.id)![side]!, SLICE_S / runnable.length);
    }
    loadS += SLICE_S;
    const after = jitSplit(gw.pid);
    lastShare = (after.jitUs - before.jitUs) / Math.max(1, after.allUs - before.allUs);
    if (lastShare < 0.03) break;
  }
  const end = jitSplit(gw.pid);
  const w = { loadS, compileMs: (end.jitUs - first.jitUs) / 1000, settled: lastShare < 0.03, lastShare };
  log(`JIT warm-up: ${w.loadS} s more load, ${w.compileMs.toFixed(0)} ms on the compiler threads; last slice ${(100 * lastShare).toFixed(1)} % of the gateway's CPU${w.settled ? "" : " (not settled)"}`);
  return w;
}

/**
 * CPU per request of one process (whole process, every thread; the gateway's tail included and its
 * idle rate taken off) under wrk and under autocannon, in alternating segments (A B B A per round):
 * same request, same connections kept alive, both generators on core 1.
 */
async function compareGenerators(sc: Scenario, side: "gateway" | "bare", shot: () => Shot, proc: Subprocess, idleUsPerMs: number | null, rounds: number, segmentS: number): Promise<GeneratorRow> {
  const per = { autocannon: [] as number[], wrk: [] as number[], autocannonRps: [] as number[], wrkRps: [] as number[], autocannonP50: [] as number[], wrkP50: [] as number[] };
  const segment = async (gen: "autocannon" | "wrk") => {
    const c0 = cpuMicros(proc.pid);
    const r = await drive(sc, shot, segmentS, gen);
    if (r.errors) throw new Error(`${gen} against the ${side} (${sc.id}): ${r.errors} errors, e.g. ${r.errorSamples[0]}`);
    let used = cpuMicros(proc.pid) - c0;
    if (idleUsPerMs !== null) {
      await Bun.sleep(GATEWAY_TAIL_MS);
      used = cpuMicros(proc.pid) - c0 - idleUsPerMs * GATEWAY_TAIL_MS;
    }
    per[gen].push(used / r.ok);
    per[`${gen}Rps`].push(r.ok / r.elapsedS);
    per[`${gen}P50`].push(summarize(r.latencyMs).p50);
  };
  for (let round = 0; round < rounds; round++) {
    for (const gen of ["wrk", "autocannon", "autocannon", "wrk"] as const) await segment(gen);
  }
  return {
    scenario: sc.id, title: sc.title, side, rounds,
    wrkUs: median(per.wrk), autocannonUs: median(per.autocannon), wrkRps: median(per.wrkRps), autocannonRps: median(per.autocannonRps),
    wrkP50Ms: median(per.wrkP50), autocannonP50Ms: median(per.autocannonP50),
  };
}
