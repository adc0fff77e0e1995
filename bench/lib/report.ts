// Turns measured segments into per-scenario figures (medians over rounds), target verdicts, and the
// markdown table + JSON the runner writes to bench/results/.
import type { BlitzJobRow } from "../blitz-jobs.ts";
import type { LoadResult } from "./http-load.ts";
import { median, percentile, Samples } from "./stats.ts";
import type { Reference, Side } from "./scenarios.ts";
import type { TripsRow } from "../admission-trips.ts";

export interface Segment {
  scenario: string;
  round: number;
  side: Side;
  result: LoadResult;
  /** CPU time of the whole process measured (gateway, bare proxy or Portkey; every thread) over the segment, µs; direct sides have none. The gateway's includes its tail (below). */
  cpuUs?: number;
  /** Gateway only: CPU in the GATEWAY_TAIL_MS after its last request (deferred settlements, usage drain, garbage) less its idle rate, µs. */
  tailCpuUs?: number;
  /** Of which kernel (system) time, µs. */
  sysUs?: number;
  /** Mock upstream CPU time over the segment, µs. */
  mockCpuUs?: number;
  rssKb?: number;
  hwmKb?: number;
  /** CPU used by everything else on the machine (not the gateway, the mock or the runner), µs. */
  otherCpuUs?: number;
  wallS?: number;
}

export interface SideFigures {
  ok: number;
  errors: number;
  rps: number;
  p50: number;
  p99: number;
  ttfbP50?: number;
  ttfbP99?: number;
  gapP50?: number;
  gapP99?: number;
  coalescedPct?: number;
}

/** A reference proxy (bare Bun proxy, Portkey) measured in the same rounds as the gateway. */
export interface ReferenceFigures {
  side: SideFigures;
  addedP50Ms: number;
  addedP99Ms: number;
  addedTtfbP50Ms?: number;
  cpuUsPerReq: number;
  sysUsPerReq: number;
  /** Gateway CPU per request ÷ this proxy's, median of the per-round ratios. */
  gatewayCpuRatio: number;
  /** Gateway added p50 − this proxy's added p50, median over rounds, ms. */
  gatewayAddedP50OverMs: number;
  /** Gateway added time to first byte − this proxy's, median over rounds, ms (streams). */
  gatewayAddedTtfbOverMs?: number;
}

export interface ScenarioFigures {
  id: string;
  title: string;
  note: string;
  rounds: number;
  direct: SideFigures;
  gateway: SideFigures;
  addedP50Ms: number;
  addedP99Ms: number;
  addedTtfbP50Ms?: number;
  addedGapP50Ms?: number;
  gatewayCpuUsPerReq: number;
  /** Of which kernel (system) time. */
  gatewaySysUsPerReq: number;
  mockCpuUsPerReq: number;
  rssEndMb: number;
  peakRssMb: number;
  errors: number;
  errorSamples: string[];
  references?: Partial<Record<Reference, ReferenceFigures>>;
}

function pooled(segs: Segment[]): SideFigures {
  const lat = new Samples();
  const ttfb = new Samples();
  const gap = new Samples();
  let ok = 0, errors = 0, elapsed = 0, coalesced = 0, events = 0;
  for (const s of segs) {
    const r = s.result;
    lat.merge(r.latencyMs);
    if (r.ttfbMs) ttfb.merge(r.ttfbMs);
    if (r.gapMs) gap.merge(r.gapMs);
    ok += r.ok;
    errors += r.errors;
    elapsed += r.elapsedS;
    coalesced += r.coalesced ?? 0;
    events += r.events ?? 0;
  }
  const l = lat.sorted();
  const out: SideFigures = { ok, errors, rps: elapsed ? ok / elapsed : 0, p50: percentile(l, 50), p99: percentile(l, 99) };
  if (ttfb.length) {
    const t = ttfb.sorted();
    out.ttfbP50 = percentile(t, 50);
    out.ttfbP99 = percentile(t, 99);
  }
  if (gap.length) {
    const g = gap.sorted();
    out.gapP50 = percentile(g, 50);
    out.gapP99 = percentile(g, 99);
    out.coalescedPct = events ? (100 * coalesced) / events : 0;
  }
  return out;
}

const med = <T>(rows: T[], f: (r: T) => number | undefined) => {
  const v = rows.map(f).filter((x): x is number => x !== undefined && Number.isFinite(x));
  return v.length ? median(v) : undefined;
};

function medianSide(rows: SideFigures[]): SideFigures {
  const out: SideFigures = {
    ok: rows.reduce((a, r) => a + r.ok, 0),
    errors: rows.reduce((a, r) => a + r.errors, 0),
    rps: med(rows, (r) => r.rps) ?? 0,
    p50: med(rows, (r) => r.p50) ?? NaN,
    p99: med(rows, (r) => r.p99) ?? NaN,
  };
  for (const k of ["ttfbP50", "ttfbP99", "gapP50", "gapP99", "coalescedPct"] as const) {
    const v = med(rows, (r) => r[k]);
    if (v !== undefined) out[k] = v;
  }
  return out;
}

interface RoundSide {
  fig: SideFigures;
  addedP50: number;
  addedP99: number;
  addedTtfb: number | undefined;
  addedGap: number | undefined;
  cpu: number;
  sys: number;
}

/** One side of one round, against that round's direct segments. */
function roundSide(segs: Segment[], direct: SideFigures): RoundSide {
  const fig = pooled(segs);
  const ok = fig.ok || 1;
  return {
    fig,
    addedP50: fig.p50 - direct.p50,
    addedP99: fig.p99 - direct.p99,
    addedTtfb: fig.ttfbP50 !== undefined && direct.ttfbP50 !== undefined ? fig.ttfbP50 - direct.ttfbP50 : undefined,
    addedGap: fig.gapP50 !== undefined && direct.gapP50 !== undefined ? fig.gapP50 - direct.gapP50 : undefined,
    cpu: segs.reduce((x, s) => x + (s.cpuUs ?? 0), 0) / ok,
    sys: segs.reduce((x, s) => x + (s.sysUs ?? 0), 0) / ok,
  };
}

export function figuresFor(id: string, title: string, note: string, segs: Segment[]): ScenarioFigures {
  const rounds = [...new Set(segs.map((s) => s.round))].sort((a, b) => a - b);
  const refs = [...new Set(segs.map((s) => s.side))].filter((s): s is Reference => s === "bare" || s === "portkey" || s === "far" || s === "base");
  const perRound = rounds.map((round) => {
    const a = segs.filter((s) => s.round === round && s.side === "direct");
    const direct = pooled(a);
    const of = (side: Side) => roundSide(segs.filter((s) => s.round === round && s.side === side), direct);
    const mockCpu = a.reduce((x, s) => x + (s.mockCpuUs ?? 0), 0) / (direct.ok || 1);
    return { direct, gateway: of("gateway"), refs: Object.fromEntries(refs.map((r) => [r, of(r)])) as Record<Reference, RoundSide>, mockCpu };
  });
  const gwSegs = segs.filter((s) => s.side === "gateway");
  const last = gwSegs[gwSegs.length - 1];
  const errorSamples = [...new Set(segs.flatMap((s) => s.result.errorSamples.map((e) => `${s.side}: ${e}`)))].slice(0, 5);
  const f: ScenarioFigures = {
    id, title, note,
    rounds: rounds.length,
    direct: medianSide(perRound.map((r) => r.direct)),
    gateway: medianSide(perRound.map((r) => r.gateway.fig)),
    addedP50Ms: med(perRound, (r) => r.gateway.addedP50) ?? NaN,
    addedP99Ms: med(perRound, (r) => r.gateway.addedP99) ?? NaN,
    gatewayCpuUsPerReq: med(perRound, (r) => r.gateway.cpu) ?? NaN,
    gatewaySysUsPerReq: med(perRound, (r) => r.gateway.sys) ?? NaN,
    mockCpuUsPerReq: med(perRound, (r) => r.mockCpu) ?? NaN,
    rssEndMb: (last?.rssKb ?? NaN) / 1024,
    peakRssMb: Math.max(...gwSegs.map((s) => s.hwmKb ?? NaN)) / 1024,
    errors: segs.reduce((a, s) => a + s.result.errors, 0),
    errorSamples,
  };
  const t = med(perRound, (r) => r.gateway.addedTtfb);
  if (t !== undefined) f.addedTtfbP50Ms = t;
  const g = med(perRound, (r) => r.gateway.addedGap);
  if (g !== undefined) f.addedGapP50Ms = g;
  if (refs.length) {
    f.references = {};
    for (const ref of refs) {
      const rf: ReferenceFigures = {
        side: medianSide(perRound.map((r) => r.refs[ref].fig)),
        addedP50Ms: med(perRound, (r) => r.refs[ref].addedP50) ?? NaN,
        addedP99Ms: med(perRound, (r) => r.refs[ref].addedP99) ?? NaN,
        cpuUsPerReq: med(perRound, (r) => r.refs[ref].cpu) ?? NaN,
        sysUsPerReq: med(perRound, (r) => r.refs[ref].sys) ?? NaN,
        gatewayCpuRatio: med(perRound, (r) => r.gateway.cpu / r.refs[ref].cpu) ?? NaN,
        gatewayAddedP50OverMs: med(perRound, (r) => r.gateway.addedP50 - r.refs[ref].addedP50) ?? NaN,
      };
      const rt = med(perRound, (r) => r.refs[ref].addedTtfb);
      if (rt !== undefined) rf.addedTtfbP50Ms = rt;
      const over = med(perRound, (r) => (r.gateway.addedTtfb !== undefined && r.refs[ref].addedTtfb !== undefined ? r.gateway.addedTtfb - r.refs[ref].addedTtfb! : undefined));
      if (over !== undefined) rf.gatewayAddedTtfbOverMs = over;
      f.references[ref] = rf;
    }
  }
  return f;
}

export interface Verdict {
  target: string;
  limit: string;
  measured: string;
  met: boolean;
  margin: string;
}

/** `value` against an upper `limit`: met or missed, and by how much. */
export function atMost(target: string, value: number | undefined, limit: number, unit: string, digits = 1): Verdict {
  const v = value ?? NaN;
  const fmt = (x: number) => `${x.toFixed(digits)}${unit === "×" ? "" : " "}${unit}`;
  if (!Number.isFinite(v)) return { target, limit: `≤ ${fmt(limit)}`, measured: "n/a", met: false, margin: "not measured" };
  const met = v <= limit;
  const margin = met
    ? v <= 0 ? `met, ${fmt(limit - v)} of headroom` : `met, ${fmt(limit - v)} under (${(limit / v).toFixed(1)}× headroom)`
    : `missed by ${fmt(v - limit)} (${(v / limit).toFixed(2)}× the limit)`;
  return { target, limit: `≤ ${fmt(limit)}`, measured: fmt(v), met, margin };
}

/** `value` against a lower `limit` (e.g. "≥ 20× less CPU"): met or missed, and by how much. */
export function atLeast(target: string, value: number | undefined, limit: number, unit: string, digits = 1): Verdict {
  const v = value ?? NaN;
  const fmt = (x: number) => `${x.toFixed(digits)}${unit === "×" ? "" : " "}${unit}`;
  if (!Number.isFinite(v)) return { target, limit: `≥ ${fmt(limit)}`, measured: "n/a", met: false, margin: "not measured" };
  const met = v >= limit;
  return { target, limit: `≥ ${fmt(limit)}`, measured: fmt(v), met, margin: met ? `met, ${(v / limit).toFixed(2)}× the limit` : `missed: ${(v / limit).toFixed(2)}× the limit` };
}

export interface SoakFigures {
  durationS: number;
  streams: number;
  completed: number;
  errors: number;
  errorSamples: string[];
  rssStartMb: number;
  rssAfterWarmMb: number;
  rssEndMb: number;
  rssPeakMb: number;
  samples: Array<{ t: number; rssMb: number }>;
  gatewayCpuUsPerStream: number;
}

export interface MachineFacts {
  cpu: string;
  cores: number;
  memoryGb: number;
  kernel: string;
  bun: string;
  pinning: string;
  stores: string;
  logLevel: string;
  /** The MIMALLOC_* settings of the gateway and the bare proxy, or Bun's default. */
  allocator?: string;
  /** Share of the machine's CPU (all cores) used by other processes during the measured segments, %. */
  otherLoadPct?: number;
}

/** One process's CPU per request under wrk and under autocannon, alternating segments, medians. */
export interface GeneratorRow {
  scenario: string;
  title: string;
  side: "gateway" | "bare";
  rounds: number;
  wrkUs: number;
  autocannonUs: number;
  wrkRps: number;
  autocannonRps: number;
  wrkP50Ms: number;
  autocannonP50Ms: number;
}

export interface RunReport {
  mode: "full" | "smoke" | "soak";
  startedAt: string;
  finishedAt: string;
  machine: MachineFacts;
  settings: { rounds: number; segmentS: number; pattern: string; warmupS: number };
  /** Load after the warm-up until the gateway's JIT compiler threads went quiet (bench/run.ts settleJit), and their CPU meanwhile. */
  jitWarmup?: { loadS: number; compileMs: number; settled: boolean; lastShare: number } | null;
  /** Booted and connected, before the first request. */
  idleBootRssMb: number;
  /** After signup, activation, credential and key creation (the signup path loads its own modules). */
  idleRssMb: number;
  idleRssAfterMb: number;
  scenarios: ScenarioFigures[];
  soak?: SoakFigures;
  verdicts: Verdict[];
  errors: number;
  gatewayExit: string;
  /** Redis round trips of admission per request by kind of key (bench/admission-trips.ts); null embedded. */
  admissionTrips?: TripsRow[] | null;
  /** A /blitz job of 1,000 prompts (smoke: fewer) beside the /blitz scenario (bench/blitz-jobs.ts). */
  blitzJobs?: BlitzJobRow[];
  /** The tree the `base` gateway ran from (--base-root). */
  baseRoot?: string;
  /** What drove the plain request/response scenarios. */
  generator?: "wrk" | "autocannon";
  /** The same processes under both generators, side by side. */
  generatorCheck?: GeneratorRow[];
  /** Redis PING round trip, median, direct and through the delay proxy (the `far` gateway's Redis). */
  redisRtt?: { localMs: number; farMs: number };
}

export const REFERENCE_NAMES: Record<Reference, string> = { bare: "the bare Bun proxy", portkey: "Portkey 1.15.2", far: "the gateway with Redis 1 ms away", base: "the gateway of the base tree (--base-root)" };

const n = (x: number | undefined, d = 2) => (x === undefined || !Number.isFinite(x) ? "–" : x.toFixed(d));
const signed = (x: number | undefined, d = 2) => (x === undefined || !Number.isFinite(x) ? "–" : `${x >= 0 ? "+" : ""}${x.toFixed(d)}`);


export function markdown(r: RunReport): string {
  const out: string[] = [];
  out.push(`# Gateway benchmark (${r.mode}) — ${r.startedAt}`);
  out.push("");
  out.push(`Machine: ${r.machine.cpu}, ${r.machine.cores} cores, ${r.machine.memoryGb} GB, Linux ${r.machine.kernel}, Bun ${r.machine.bun}. ` +
    `Pinning: ${r.machine.pinning}. Stores: ${r.machine.stores}; budgets and usage accounting on. Gateway LOG_LEVEL=${r.machine.logLevel}, allocator ${r.machine.allocator ?? "Bun's default"} (gateway and bare proxy).` +
    (r.machine.otherLoadPct !== undefined ? ` Other processes (Redis and Postgres included) used ${r.machine.otherLoadPct.toFixed(0)}% of the machine's CPU during the measured segments.` : ""));
  if (r.scenarios.length) {
    out.push(`Method: ${r.settings.rounds} round(s); in each, every scenario runs ${r.settings.pattern} (direct to the mock = A, through the gateway = B, the bare Bun proxy = C, Portkey = D), ` +
      `${r.settings.segmentS} s per segment after a ${r.settings.warmupS} s warm-up` +
      (r.jitWarmup ? ` and ${r.jitWarmup.loadS} s more of load on the gateway until its JIT compiler threads took under 3 % of its CPU (${r.jitWarmup.compileMs.toFixed(0)} ms of compile CPU meanwhile, once per process${r.jitWarmup.settled ? "" : "; not settled"})` : "") +
      `; figures are medians over rounds. ` +
      `Added = gateway − direct. CPU = utime+stime of the whole process (every thread, /proc/PID/stat) over its segments ÷ requests served; the gateway's counted on for 1.2 s after its last request, less its idle rate. ` +
      `Plain request/response scenarios are driven by ${r.generator === "wrk" ? "wrk (one thread, keep-alive, a Lua script POSTing the same body; latencies from its histogram)" : "autocannon (in process, keep-alive)"}, streams by the runner's own fetch loop.`);
    out.push("");
    out.push("| scenario | req/s direct | req/s gateway | p50 ms direct → gw | p99 ms direct → gw | added p50 ms | added p99 ms | TTFB added p50 ms | gw CPU µs/req (sys) | RSS end / peak MB | errors |");
    out.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const s of r.scenarios) {
      out.push(`| ${s.title} | ${n(s.direct.rps, 0)} | ${n(s.gateway.rps, 0)} | ${n(s.direct.p50)} → ${n(s.gateway.p50)} | ${n(s.direct.p99)} → ${n(s.gateway.p99)} | ` +
        `${signed(s.addedP50Ms)} | ${signed(s.addedP99Ms)} | ${signed(s.addedTtfbP50Ms)} | ${n(s.gatewayCpuUsPerReq, 0)} (${n(s.gatewaySysUsPerReq, 0)}) | ${n(s.rssEndMb, 0)} / ${n(s.peakRssMb, 0)} | ${s.errors} |`);
      for (const [ref, x] of Object.entries(s.references ?? {})) {
        out.push(`| ↳ same through ${REFERENCE_NAMES[ref as Reference]} | | ${n(x.side.rps, 0)} | ${n(s.direct.p50)} → ${n(x.side.p50)} | ${n(s.direct.p99)} → ${n(x.side.p99)} | ` +
          `${signed(x.addedP50Ms)} | ${signed(x.addedP99Ms)} | ${signed(x.addedTtfbP50Ms)} | ${n(x.cpuUsPerReq, 0)} (${n(x.sysUsPerReq, 0)}) | | |`);
      }
    }
    const withRefs = r.scenarios.filter((s) => s.references?.bare || s.references?.portkey);
    if (withRefs.length) {
      out.push("");
      out.push("Ratios within the same rounds (medians of per-round figures): the gateway against the bare Bun proxy (`Bun.serve` + `fetch`, the floor) and against Portkey.");
      out.push("");
      out.push("| scenario | gw CPU µs/req | bare µs/req | gw ÷ bare | Portkey µs/req | Portkey ÷ gw | gw added p50 − bare's, ms | gw added TTFB − bare's, ms |");
      out.push("|---|---:|---:|---:|---:|---:|---:|---:|");
      for (const s of withRefs) {
        const b = s.references!.bare;
        const k = s.references!.portkey;
        out.push(`| ${s.title} | ${n(s.gatewayCpuUsPerReq, 0)} | ${n(b?.cpuUsPerReq, 0)} | ${b ? `${n(b.gatewayCpuRatio)}×` : "–"} | ${n(k?.cpuUsPerReq, 0)} | ` +
          `${k && k.gatewayCpuRatio > 0 ? `${n(1 / k.gatewayCpuRatio, 1)}×` : "–"} | ${signed(b?.gatewayAddedP50OverMs, 3)} | ${signed(b?.gatewayAddedTtfbOverMs, 3)} |`);
      }
    }
  }
  const far = r.scenarios.find((s) => s.references?.far);
  if (far && r.redisRtt) {
    const x = far.references!.far!;
    out.push("");
    out.push(`Redis ${n(r.redisRtt.farMs)} ms away (PING round trip through the delay proxy; ${n(r.redisRtt.localMs, 3)} ms direct), one client, hot budgeted key: ` +
      `added p50 ${signed(x.addedP50Ms, 3)} ms against ${signed(far.addedP50Ms, 3)} ms with Redis local (${signed(-x.gatewayAddedP50OverMs, 3)} ms, median of per-round differences); ` +
      `CPU ${n(x.cpuUsPerReq, 0)} against ${n(far.gatewayCpuUsPerReq, 0)} µs per request.`);
  }
  const ab = r.scenarios.filter((s) => s.references?.base);
  if (ab.length) {
    out.push("");
    out.push(`A/B of two trees in the same rounds: this tree's gateway against the base tree's${r.baseRoot ? ` (${r.baseRoot})` : ""}, medians of per-round figures.`);
    out.push("");
    out.push("| scenario | this tree µs/req | base µs/req | this ÷ base | this added p50 − base's, ms | this added TTFB − base's, ms |");
    out.push("|---|---:|---:|---:|---:|---:|");
    for (const s of ab) {
      const x = s.references!.base!;
      out.push(`| ${s.title} | ${n(s.gatewayCpuUsPerReq, 0)} | ${n(x.cpuUsPerReq, 0)} | ${n(x.gatewayCpuRatio, 3)}× | ${signed(x.gatewayAddedP50OverMs, 3)} | ${signed(x.gatewayAddedTtfbOverMs, 3)} |`);
    }
  }
  if (r.generatorCheck?.length) {
    out.push("");
    out.push("Generators side by side (same process, same request, alternating wrk / autocannon segments, medians): CPU per request (whole process), req/s and p50.");
    out.push("");
    out.push("| scenario | process | wrk µs/req | autocannon µs/req | difference | wrk req/s | autocannon req/s | wrk p50 ms | autocannon p50 ms |");
    out.push("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const g of r.generatorCheck) {
      out.push(`| ${g.title} | ${g.side === "gateway" ? "gateway" : "bare Bun proxy"} | ${n(g.wrkUs, 0)} | ${n(g.autocannonUs, 0)} | ${signed((100 * (g.autocannonUs - g.wrkUs)) / g.wrkUs, 0)}% | ` +
        `${n(g.wrkRps, 0)} | ${n(g.autocannonRps, 0)} | ${n(g.wrkP50Ms)} | ${n(g.autocannonP50Ms)} |`);
    }
  }
  const paced = r.scenarios.filter((s) => s.gateway.gapP50 !== undefined);
  if (paced.length) {
    out.push("");
    out.push("| stream gaps | gap p50 ms direct → gw | gap p99 ms direct → gw | events glued to the previous one, direct → gw |");
    out.push("|---|---:|---:|---:|");
    for (const s of paced) {
      out.push(`| ${s.title} | ${n(s.direct.gapP50)} → ${n(s.gateway.gapP50)} | ${n(s.direct.gapP99)} → ${n(s.gateway.gapP99)} | ${n(s.direct.coalescedPct)}% → ${n(s.gateway.coalescedPct)}% |`);
    }
  }
  const rhythm = r.scenarios.filter((s) => s.id.startsWith("paced-"));
  if (rhythm.length) {
    out.push("");
    out.push("Rhythm under load (medians over rounds): time to last byte and the gap between chunks at the client; the bare Bun proxy is the floor.");
    out.push("");
    out.push("| scenario | side | streams/s | TTLB p50 ms | TTLB p99 ms | gap p50 ms | gap p99 ms | CPU µs/stream | errors |");
    out.push("|---|---|---:|---:|---:|---:|---:|---:|---:|");
    for (const s of rhythm) {
      const b = s.references?.bare;
      const row = (side: string, f: SideFigures, cpu?: number) => out.push(`| ${s.title} | ${side} | ${n(f.rps, 0)} | ${n(f.p50)} | ${n(f.p99)} | ${n(f.gapP50)} | ${n(f.gapP99)} | ${n(cpu, 0)} | ${f.errors} |`);
      row("direct", s.direct);
      if (b) row("bare Bun proxy", b.side, b.cpuUsPerReq);
      row("gateway", s.gateway, s.gatewayCpuUsPerReq);
    }
  }
  out.push("");
  out.push(`Idle RSS: ${n(r.idleBootRssMb, 1)} MB after boot; ${n(r.idleRssMb, 1)} MB after provisioning (signup, activation, key); ${n(r.idleRssAfterMb, 1)} MB idle after the run (the allocator keeps what load made it take).`);
  if (r.soak) {
    const k = r.soak;
    out.push(`Soak: ${k.streams} concurrent paced streams for ${k.durationS} s, ${k.completed} streams completed, ${k.errors} errors; ` +
      `RSS ${n(k.rssStartMb, 1)} MB at start, median ${n(k.rssAfterWarmMb, 1)} MB over 20–45% of the soak, median ${n(k.rssEndMb, 1)} MB over its last quarter, peak ${n(k.rssPeakMb, 1)} MB; ` +
      `${n(k.gatewayCpuUsPerStream, 0)} µs gateway CPU per stream.`);
  }
  if (r.admissionTrips !== undefined) {
    out.push("");
    if (r.admissionTrips === null) {
      out.push("Admission round trips: embedded stores (no Redis), so admission makes no network round trip.");
    } else {
      out.push("Admission round trips per request, by kind of routing key (8 sequential clients on one key; admission = the budget/limits script call; Redis commands = every command the gateway sent, the per-turn ledger writes, releases and background jobs included):");
      out.push("");
      out.push("| routing key | requests | answered | admission calls / request | Redis commands / request |");
      out.push("|---|---:|---:|---:|---:|");
      for (const t of r.admissionTrips) out.push(`| ${t.key} | ${t.requests} | ${t.ok} | ${t.admissionsPerRequest.toFixed(3)} | ${t.redisCommandsPerRequest.toFixed(2)} |`);
    }
  }
  if (r.blitzJobs?.length) {
    const b = r.scenarios.find((x) => x.id === "blitz");
    out.push("");
    out.push(`/blitz jobs beside /blitz: one job through the gateway, POST to its last item (polled every 50 ms), ${r.blitzJobs[0]!.concurrency} prompts at a time (BLITZ_JOB_CONCURRENCY); overhead per item = wall × concurrency / prompts − upstream latency. ` +
      (b ? `/blitz (50 prompts at once, ${n(b.gateway.p50, 0)} ms p50 per batch) costs ${n(b.gatewayCpuUsPerReq / 50, 0)} µs gateway CPU per prompt.` : ""));
    out.push("");
    out.push("| prompts | upstream | wall | items/s | bound (concurrency / latency) | overhead / item | gateway CPU / item | succeeded |");
    out.push("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (const j of r.blitzJobs) {
      out.push(`| ${j.prompts} | ${j.upstreamMs} ms | ${n(j.wallMs / 1000, 2)} s | ${n(j.itemsPerS, 1)} | ${Number.isFinite(j.boundPerS) ? n(j.boundPerS, 1) : "–"} | ${n(j.overheadMsPerItem, 2)} ms | ${n(j.gatewayCpuUsPerItem, 0)} µs | ${j.succeeded}${j.errors.length ? ` (${j.errors.join("; ")})` : ""} |`);
    }
  }
  out.push("");
  out.push("| target | limit | measured | verdict |");
  out.push("|---|---|---|---|");
  for (const v of r.verdicts) out.push(`| ${v.target} | ${v.limit} | ${v.measured} | ${v.met ? "✅" : "❌"} ${v.margin} |`);
  out.push("");
  for (const s of r.scenarios) out.push(`- **${s.title}**: ${s.note}`);
  const failed = r.scenarios.filter((s) => s.errors > 0);
  if (failed.length || (r.soak && r.soak.errors)) {
    out.push("");
    out.push("Errors:");
    for (const s of failed) for (const e of s.errorSamples) out.push(`- ${s.id}: ${e}`);
    if (r.soak) for (const e of new Set(r.soak.errorSamples)) out.push(`- soak: ${e}`);
  }
  out.push("");
  out.push(`Gateway exit: ${r.gatewayExit}.`);
  return out.join("\n") + "\n";
}
