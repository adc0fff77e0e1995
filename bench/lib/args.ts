// Command-line options of the benchmark runner.
import { SCENARIOS } from "./scenarios.ts";

export interface RunOptions {
  mode: "full" | "smoke" | "soak";
  rounds: number;
  segmentS: number;
  warmupS: number;
  pattern: "ABBA" | "AB";
  soakS: number;
  only: string[] | null;
  strict: boolean;
  logLevel: string;
  /** Run the gateway under Bun's CPU profiler; profiles land in bench/results/tmp-profile/. */
  profile: boolean;
  /** Log each segment's CPU per request split by the proxy's threads (main, HTTP client, JIT, allocator). */
  threads: boolean;
  /** Run Portkey beside the gateway (full runs; installed into bench/portkey on first use). */
  portkey: boolean;
  /** What drives the plain request/response scenarios: wrk where installed (default), or autocannon. */
  generator: "wrk" | "autocannon";
  /** Another tree whose gateway runs beside this one in the ratio scenarios (an interleaved A/B). */
  baseRoot: string | null;
  /** Run the wrk / autocannon comparison (default; --no-generator-check leaves it out). */
  generatorCheck: boolean;
  /** --many-streams [N]: only the many-slow-streams measurement, N concurrent streams (default 10,000; 300 with --smoke). */
  manyStreams: number | null;
}

const HELP = `npm run bench [-- options]
  (default)         every scenario, 3 rounds of A B B A (A B C D D C B A where the bare Bun proxy
                    and Portkey run too), 4 s segments, a 60 s soak (~12 min)
  --smoke           every scenario once (A B, 1 s each; bare proxy, no Portkey) and a 3 s soak:
                    proves the runner works (CI)
  --soak            idle memory, then 500 concurrent streams for 10 minutes, watching RSS
  --rounds N        rounds of A B B A (default 3)
  --segment S       seconds per segment (default 4)
  --soak-seconds S  soak length (default 60; 600 with --soak; 0 = none)
  --only a,b        only these scenarios: ${SCENARIOS.map((s) => s.id).join(", ")}
  --log-level L     the gateway's LOG_LEVEL (default info, as deployed)
  --strict          exit 1 when a timing target is missed (default: only on errors)
  --profile         run the gateway under bun --cpu-prof (profile in bench/results/tmp-profile/)
  --threads         log every segment's CPU per request by thread of the proxy measured
                    (/proc/PID/task/*/schedstat: main, HTTP Client, JITWorker, JSCWarmUp, mi-scavenger)
  --no-portkey      leave Portkey out (it is installed into bench/portkey with npm ci on first use)
  --generator G     wrk (default where installed) or autocannon: what drives the plain
                    request/response scenarios; the other one still runs in the generator check
  --base-root DIR   also run the gateway of the tree at DIR (its own src/, this tree's node_modules
                    if it has none) in the same rounds, same stores and key: an A/B of two trees
  --no-generator-check  leave out the wrk / autocannon comparison
  --many-streams [N]  only this: N concurrent slow streams (5 chunks/s; default 10,000, 300 with
                    --smoke) direct, through the bare proxy and the gateway: RSS per stream, CPU per
                    chunk, gap p50/p99 (--rounds rounds, default 3; a 10 s window, 3 s with --smoke)`;

export function parseArgs(argv: string[]): RunOptions {
  const o: RunOptions = { mode: "full", rounds: 3, segmentS: 4, warmupS: 2, pattern: "ABBA", soakS: 60, only: null, strict: false, logLevel: "info", profile: false, threads: false, portkey: true, generator: "wrk", baseRoot: null, generatorCheck: true, manyStreams: null };
  let manyAsked = false;
  const num = (i: number, name: string) => {
    const v = Number(argv[i + 1]);
    if (!Number.isFinite(v) || v < 0) throw new Error(`${name} needs a number`);
    return v;
  };
  let soakS: number | null = null;
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--smoke") Object.assign(o, { mode: "smoke", rounds: 1, segmentS: 1, warmupS: 0.5, pattern: "AB", soakS: 3 });
    else if (a === "--soak") Object.assign(o, { mode: "soak", soakS: 600 });
    else if (a === "--rounds") o.rounds = Math.max(1, Math.round(num(i++, a)));
    else if (a === "--segment") o.segmentS = num(i++, a);
    else if (a === "--soak-seconds") soakS = num(i++, a);
    else if (a === "--only") o.only = (argv[++i] ?? "").split(",").filter(Boolean);
    else if (a === "--log-level") o.logLevel = argv[++i] ?? "info";
    else if (a === "--strict") o.strict = true;
    else if (a === "--profile") o.profile = true;
    else if (a === "--threads") o.threads = true;
    else if (a === "--no-portkey") o.portkey = false;
    else if (a === "--base-root") o.baseRoot = argv[++i] ?? null;
    else if (a === "--no-generator-check") o.generatorCheck = false;
    else if (a === "--many-streams") {
      manyAsked = true;
      const v = Number(argv[i + 1]);
      if (argv[i + 1] !== undefined && Number.isFinite(v) && v > 0) o.manyStreams = Math.round(v), i++;
    }
    else if (a === "--generator") {
      const g = argv[++i];
      if (g !== "wrk" && g !== "autocannon") throw new Error("--generator takes wrk or autocannon");
      o.generator = g;
    }
    else if (a === "--help" || a === "-h") {
      console.log(HELP);
      process.exit(0);
    } else throw new Error(`unknown option ${a}\n${HELP}`);
  }
  if (soakS !== null) o.soakS = soakS;
  if (manyAsked) o.manyStreams ??= o.mode === "smoke" ? 300 : 10_000;
  const unknown = o.only?.filter((id) => !SCENARIOS.some((s) => s.id === id)) ?? [];
  if (unknown.length) throw new Error(`unknown scenario(s): ${unknown.join(", ")}`);
  return o;
}
