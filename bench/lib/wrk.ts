// wrk (Debian's `wrk`), the independent closed-loop generator: where it is installed it drives the
// plain request/response scenarios (the same request, connections kept alive, one thread pinned to
// the load generator's core), and the bench's own generator (autocannon) is run beside it in
// alternating segments so both figures show side by side.
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { LoadResult } from "./http-load.ts";
import { Samples } from "./stats.ts";

export const WRK = ["/usr/bin/wrk", "/usr/local/bin/wrk"].find((p) => Bun.file(p).size > 0) ?? null;

export interface WrkResult extends LoadResult {
  /** Every answer wrk read, whatever its status. */
  requests: number;
  non2xx: number;
  socketErrors: number;
}

/** Quantiles wrk prints at the end (its histogram has microsecond resolution): the samples the report's percentiles read. */
const QUANTILES = 1000;

/**
 * Runs wrk for `durationS` (whole seconds, at least 1: wrk takes no fractions) with `connections` keep-alive connections on one thread, POSTing `body`
 * (read from a file by its Lua script, so a multi-kB agent body goes as is) with `headers`.
 */
export async function runWrk(prefix: string[], url: string, headers: Record<string, string>, body: string, connections: number, durationS: number): Promise<WrkResult> {
  if (!WRK) throw new Error("wrk is not installed (Debian: apt-get install wrk)");
  const dir = mkdtempSync(join(tmpdir(), "gw-wrk-"));
  try {
    writeFileSync(join(dir, "body.json"), body);
    const lua = [
      `local f = io.open(${JSON.stringify(join(dir, "body.json"))}, "rb")`,
      `wrk.method = "POST"`,
      `wrk.body = f:read("*a")`,
      `f:close()`,
      ...Object.entries(headers).map(([k, v]) => `wrk.headers[${JSON.stringify(k)}] = ${JSON.stringify(v)}`),
      // Fine quantiles of the latency histogram (µs) and the error counts, one per line.
      `done = function(summary, latency, requests)`,
      `  local e = summary.errors`,
      `  io.write(string.format("GWBENCH requests %d status %d socket %d duration %d\\n", summary.requests, e.status, e.connect + e.read + e.write + e.timeout, summary.duration))`,
      `  for i = 1, ${QUANTILES} do io.write(string.format("GWBENCH q %d\\n", latency:percentile(100 * (i - 0.5) / ${QUANTILES}))) end`,
      `end`,
    ].join("\n");
    writeFileSync(join(dir, "post.lua"), lua);
    const started = performance.now();
    const p = Bun.spawn([...prefix, WRK, "-t1", `-c${connections}`, `-d${Math.max(1, Math.round(durationS))}s`, "--timeout", "30s", "-s", join(dir, "post.lua"), url], { stdout: "pipe", stderr: "pipe" });
    const [out, err, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
    if (code !== 0) throw new Error(`wrk failed (${code}): ${(err || out).slice(0, 300)}`);
    const head = /GWBENCH requests (\d+) status (\d+) socket (\d+) duration (\d+)/.exec(out);
    if (!head) throw new Error(`wrk printed no summary: ${out.slice(0, 300)}`);
    const [requests, non2xx, socketErrors, durationUs] = head.slice(1).map(Number) as [number, number, number, number];
    const ok = requests - non2xx;
    const elapsedS = durationUs > 0 ? durationUs / 1e6 : (performance.now() - started) / 1000;
    const latencyMs = new Samples(QUANTILES);
    if (ok > 0) for (const m of out.matchAll(/GWBENCH q (\d+)/g)) latencyMs.push(Number(m[1]) / 1000);
    const errorSamples = [
      ...(non2xx ? [`${non2xx} non-2xx answers`] : []),
      ...(socketErrors ? [`${socketErrors} socket errors`] : []),
    ];
    return { requests, non2xx, socketErrors, ok, errors: non2xx + socketErrors, errorSamples, elapsedS, latencyMs };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
