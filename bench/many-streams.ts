// Many slow streams through one instance (`npm run bench -- --many-streams [N]`): N concurrent
// streams (default 10,000) whose upstream sends 5 chunks a second, opened at 1,000 a second, held
// open together, then measured over a window in which all N are in flight: what a stream costs in
// resident memory (RSS in the window less RSS before the streams opened, ÷ N), CPU per chunk
// (process CPU over the window ÷ chunks the client received in it) and the gap between chunks at
// the client (p50/p99 of the gaps that ended in the window). Direct to the mock, through the bare
// Bun proxy (the floor) and through the gateway, in alternating order each round; medians over
// rounds. A file descriptor per socket: a proxy holds two a stream, so N is capped below half of
// the proxies' open-file limit (logged when it bites).
import { readFileSync } from "node:fs";
import type { Subprocess } from "bun";
import { cpuMicros, memory } from "./lib/processes.ts";
import { chatStream, type Endpoints, type Side } from "./lib/scenarios.ts";
import { median, percentile, Samples } from "./lib/stats.ts";

export const SLOW_CHUNK_MS = 200;
const OPEN_PER_S = 1000;

export interface ManyStreamsRow {
  side: Side;
  streams: number;
  /** Medians over rounds. */
  rssPerStreamKb: number;
  rssBeforeMb: number;
  rssDuringMb: number;
  cpuUsPerChunk: number;
  /** The mock's CPU per chunk in the same window (the direct side's only CPU figure). */
  mockCpuUsPerChunk: number;
  gapP50Ms: number;
  gapP99Ms: number;
  chunksPerS: number;
  errors: number;
  errorSamples: string[];
}

export interface ManyStreamsReport {
  streams: number;
  requested: number;
  chunksPerStream: number;
  windowS: number;
  rounds: number;
  rows: ManyStreamsRow[];
}

/** The soft open-file limit of a process, from /proc/<pid>/limits. */
function openFileLimit(pid: number): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync(`/proc/${pid}/limits`, "utf8"));
    return !m || m[1] === "unlimited" ? Infinity : Number(m[1]);
  } catch {
    return Infinity;
  }
}

interface Wave {
  ok: number;
  errors: number;
  errorSamples: string[];
  gaps: Samples;
  events: number;
}

/** Opens `n` streams at OPEN_PER_S, each reading to its end; events and gaps counted as they arrive. */
function openWave(url: string, headers: Record<string, string>, body: string, n: number, window: { from: number; to: number }): { wave: Wave; done: Promise<void> } {
  const wave: Wave = { ok: 0, errors: 0, errorSamples: [], gaps: new Samples(65536), events: 0 };
  const fail = (what: string) => {
    wave.errors++;
    if (wave.errorSamples.length < 5 && !wave.errorSamples.includes(what)) wave.errorSamples.push(what);
  };
  const one = async () => {
    try {
      const res = await fetch(url, { method: "POST", headers, body });
      if (!res.ok || !res.body) {
        fail(`HTTP ${res.status}: ${(await res.text()).slice(0, 160)}`);
        return;
      }
      const reader = res.body.getReader();
      let prevByte = 0;
      let last = 0;
      let tail = "";
      const dec = new TextDecoder();
      for (;;) {
        const r = await reader.read();
        if (r.done) break;
        const t = performance.now();
        const chunk = r.value;
        for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) {
          if ((i > 0 ? chunk[i - 1] : prevByte) !== 10) continue;
          if (t >= window.from && t < window.to) {
            wave.events++;
            if (last) wave.gaps.push(t - last);
          }
          last = t;
        }
        prevByte = chunk.length ? chunk[chunk.length - 1]! : prevByte;
        tail = (tail + dec.decode(chunk, { stream: true })).slice(-64);
      }
      if (!tail.includes("[DONE]")) fail(`stream ended without [DONE]: …${tail}`);
      else wave.ok++;
    } catch (e) {
      fail(e instanceof Error ? e.message : String(e));
    }
  };
  const done = (async () => {
    const all: Promise<void>[] = [];
    const batch = Math.max(1, Math.round(OPEN_PER_S / 10));
    for (let i = 0; i < n; i += batch) {
      for (let j = i; j < Math.min(n, i + batch); j++) all.push(one());
      if (i + batch < n) await Bun.sleep(100);
    }
    await Promise.all(all);
  })();
  return { wave, done };
}

export async function measureManyStreams(opts: {
  ep: Endpoints; requested: number; rounds: number; windowS: number;
  procOf: (side: Side) => Subprocess | null; mock: Subprocess; log: (msg: string) => void;
}): Promise<ManyStreamsReport> {
  const { ep, rounds, windowS, procOf, mock, log } = opts;
  // With --base-root, the other tree's gateway too (an A/B of two trees in the same rounds).
  const sides: Side[] = (["direct", "bare", "gateway", "base"] as Side[]).filter((s) => s === "direct" || procOf(s));
  // Two sockets a stream in a proxy (client and upstream), one in the mock and the runner; room for the rest.
  const limits = [process.pid, mock.pid, ...sides.map((s) => procOf(s)?.pid).filter((p): p is number => p !== undefined)].map((pid, i) => (openFileLimit(pid) - 400) / (i >= 2 ? 2 : 1));
  const streams = Math.max(1, Math.min(opts.requested, Math.floor(Math.min(...limits))));
  if (streams < opts.requested) log(`many streams: ${opts.requested} asked, ${streams} run (open-file limit ${Math.min(...[process.pid, mock.pid].map(openFileLimit))}: two sockets a stream in each proxy)`);
  const rampS = streams / OPEN_PER_S;
  const settleS = 2;
  const chunks = Math.ceil((rampS + settleS + windowS + 2) * (1000 / SLOW_CHUNK_MS));
  const per: Record<string, Array<Omit<ManyStreamsRow, "side" | "streams" | "errorSamples">>> = {};
  const errs: Record<string, string[]> = {};
  for (let round = 1; round <= rounds; round++) {
    const order = round % 2 ? sides : [...sides].reverse();
    for (const side of order) {
      const shot = chatStream(side, ep, { chunks, chunk_delay_ms: SLOW_CHUNK_MS }, 0);
      const proc = procOf(side);
      await Bun.sleep(1500);
      const rss0 = proc ? memory(proc.pid).rssKb : NaN;
      const start = performance.now();
      const window = { from: start + (rampS + settleS) * 1000, to: start + (rampS + settleS + windowS) * 1000 };
      const { wave, done } = openWave(shot.url, shot.headers, shot.body, streams, window);
      await Bun.sleep(Math.max(0, window.from - performance.now()));
      const c0 = proc ? cpuMicros(proc.pid) : 0;
      const m0 = cpuMicros(mock.pid);
      const rss: number[] = [];
      while (performance.now() < window.to) {
        await Bun.sleep(Math.min(500, Math.max(0, window.to - performance.now())));
        if (proc) rss.push(memory(proc.pid).rssKb);
      }
      const c1 = proc ? cpuMicros(proc.pid) : 0;
      const m1 = cpuMicros(mock.pid);
      const events = wave.events || 1;
      await done;
      const g = wave.gaps.sorted();
      const row = {
        rssPerStreamKb: proc ? (median(rss) - rss0) / streams : NaN,
        rssBeforeMb: rss0 / 1024,
        rssDuringMb: proc ? median(rss) / 1024 : NaN,
        cpuUsPerChunk: proc ? (c1 - c0) / events : NaN,
        mockCpuUsPerChunk: (m1 - m0) / events,
        gapP50Ms: percentile(g, 50),
        gapP99Ms: percentile(g, 99),
        chunksPerS: wave.events / windowS,
        errors: wave.errors,
      };
      (per[side] ??= []).push(row);
      if (wave.errorSamples.length) (errs[side] ??= []).push(...wave.errorSamples);
      log(`many streams round ${round}/${rounds} ${side}: ${streams} streams, ${row.chunksPerS.toFixed(0)} chunks/s, gap p50 ${row.gapP50Ms.toFixed(1)} p99 ${row.gapP99Ms.toFixed(1)} ms` +
        (proc ? `, ${row.cpuUsPerChunk.toFixed(1)} µs CPU/chunk, ${row.rssPerStreamKb.toFixed(1)} kB RSS/stream (${row.rssBeforeMb.toFixed(0)} → ${row.rssDuringMb.toFixed(0)} MB)` : "") +
        `, ${wave.ok} ok, ${wave.errors} errors${wave.errorSamples[0] ? ` (${wave.errorSamples[0]})` : ""}`);
    }
  }
  const med = (rows: Array<Record<string, number>>, k: string) => median(rows.map((r) => r[k]!).filter(Number.isFinite));
  const rows: ManyStreamsRow[] = sides.map((side) => {
    const r = per[side]! as unknown as Array<Record<string, number>>;
    return {
      side, streams,
      rssPerStreamKb: med(r, "rssPerStreamKb"), rssBeforeMb: med(r, "rssBeforeMb"), rssDuringMb: med(r, "rssDuringMb"),
      cpuUsPerChunk: med(r, "cpuUsPerChunk"), mockCpuUsPerChunk: med(r, "mockCpuUsPerChunk"),
      gapP50Ms: med(r, "gapP50Ms"), gapP99Ms: med(r, "gapP99Ms"), chunksPerS: med(r, "chunksPerS"),
      errors: r.reduce((a, x) => a + (x.errors ?? 0), 0),
      errorSamples: [...new Set(errs[side] ?? [])].slice(0, 3),
    };
  });
  return { streams, requested: opts.requested, chunksPerStream: chunks, windowS, rounds, rows };
}

export function manyStreamsMarkdown(r: ManyStreamsReport): string {
  const n = (x: number, d = 1) => (Number.isFinite(x) ? x.toFixed(d) : "–");
  const gw = r.rows.find((x) => x.side === "gateway");
  const bare = r.rows.find((x) => x.side === "bare");
  const out = [
    `Many slow streams: ${r.streams} concurrent streams${r.streams < r.requested ? ` (${r.requested} asked; capped by the open-file limit)` : ""}, ${1000 / SLOW_CHUNK_MS} chunks a second each (${r.chunksPerStream} chunks), ` +
      `measured over ${r.windowS} s with all of them in flight; medians over ${r.rounds} round(s).`,
    "",
    "| side | chunks/s at the client | gap p50 ms | gap p99 ms | CPU µs/chunk | RSS before → during, MB | RSS kB/stream | mock CPU µs/chunk | errors |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ...r.rows.map((x) => `| ${x.side === "bare" ? "bare Bun proxy" : x.side === "base" ? "gateway of the base tree" : x.side} | ${n(x.chunksPerS, 0)} | ${n(x.gapP50Ms)} | ${n(x.gapP99Ms)} | ${n(x.cpuUsPerChunk)} | ` +
      `${x.side === "direct" ? "–" : `${n(x.rssBeforeMb, 0)} → ${n(x.rssDuringMb, 0)}`} | ${n(x.rssPerStreamKb)} | ${n(x.mockCpuUsPerChunk)} | ${x.errors} |`),
  ];
  if (gw && bare) out.push("", `Gateway ÷ bare proxy: CPU per chunk ${n(gw.cpuUsPerChunk / bare.cpuUsPerChunk, 2)}×, RSS per stream ${n(gw.rssPerStreamKb / bare.rssPerStreamKb, 2)}×.`);
  for (const x of r.rows) if (x.errorSamples.length) out.push("", `${x.side} errors: ${x.errorSamples.join("; ")}`);
  return out.join("\n");
}
