// Closed-loop HTTP load with autocannon (in-process): N connections each sending the same request
// back to back for a fixed time. Latencies come from autocannon's per-response event, kept at
// sub-millisecond resolution (its own histogram rounds to whole milliseconds).
import autocannon from "autocannon";
import { Samples } from "./stats.ts";

export interface HttpLoadSpec {
  url: string;
  headers: Record<string, string>;
  body: string;
  connections: number;
  durationS: number;
}

export interface LoadResult {
  /** Completed 2xx answers. */
  ok: number;
  /** Failed requests: non-2xx answers, socket errors, timeouts, unexpected bodies. */
  errors: number;
  /** First few error descriptions, for the log. */
  errorSamples: string[];
  elapsedS: number;
  /** Whole-request latency of each 2xx answer, ms. */
  latencyMs: Samples;
  /** Streams only: time to first body byte, ms. */
  ttfbMs?: Samples;
  /** Streams only: gaps between consecutive content events, ms. */
  gapMs?: Samples;
  /** Streams only: content events that arrived in the same read as the previous one. */
  coalesced?: number;
  events?: number;
}

export function runHttpLoad(spec: HttpLoadSpec): Promise<LoadResult> {
  const latencyMs = new Samples(65536);
  const errorSamples: string[] = [];
  const started = performance.now();
  return new Promise((resolve, reject) => {
    const inst = autocannon(
      {
        url: spec.url,
        method: "POST",
        headers: spec.headers,
        body: spec.body,
        connections: spec.connections,
        duration: spec.durationS,
        pipelining: 1,
        timeout: 30,
      },
      (err, res) => {
        if (err) return reject(err);
        const elapsedS = (performance.now() - started) / 1000;
        const errors = res.errors + res.timeouts + res.non2xx + res.mismatches;
        resolve({ ok: latencyMs.length, errors, errorSamples, elapsedS, latencyMs });
      },
    );
    inst.on("response", (_client: unknown, status: number, _bytes: number, ms: number) => {
      if (status >= 200 && status < 300) latencyMs.push(ms);
      else if (errorSamples.length < 5) errorSamples.push(`HTTP ${status}`);
    });
    inst.on("reqError", (e: Error) => {
      if (errorSamples.length < 5) errorSamples.push(e?.message ?? String(e));
    });
  });
}
