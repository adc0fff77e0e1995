// The loopback client for what autocannon cannot measure: streams (time to first body byte, the
// gaps between SSE events, whether events that the upstream sent apart arrive glued together),
// fan-outs (the direct equivalent of one /blitz batch) and weighted mixes of request kinds.
// Closed loop: `concurrency` workers, each sending its next request when the previous one ends.
import { Samples } from "./stats.ts";
import type { LoadResult } from "./http-load.ts";

export interface JsonShot {
  type: "json";
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Returns a description of what is wrong with a 2xx body, or null when it is right. */
  check?: (text: string) => string | null;
}

export interface StreamShot {
  type: "stream";
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Text the end of a complete stream contains (`[DONE]`, `response.completed`). */
  doneMarker: string;
  /** Measure gaps between the first `gapEvents` SSE events (0 = do not). */
  gapEvents: number;
}

export interface FanoutShot {
  type: "fanout";
  shots: JsonShot[];
}

export type Shot = JsonShot | StreamShot | FanoutShot;

export interface LoopSpec {
  concurrency: number;
  durationS: number;
  /** The next request a worker sends. */
  next: () => Shot;
}

const LF = 10;

class Recorder {
  ok = 0;
  errors = 0;
  errorSamples: string[] = [];
  latencyMs = new Samples(8192);
  ttfbMs = new Samples(8192);
  gapMs = new Samples(8192);
  coalesced = 0;
  events = 0;
  fail(what: string) {
    this.errors++;
    if (this.errorSamples.length < 5 && !this.errorSamples.includes(what)) this.errorSamples.push(what);
  }
}

async function sendJson(shot: JsonShot, rec: Recorder, record: boolean): Promise<boolean> {
  const t0 = performance.now();
  try {
    const res = await fetch(shot.url, { method: "POST", headers: shot.headers, body: shot.body });
    const text = await res.text();
    if (!res.ok) {
      rec.fail(`HTTP ${res.status}: ${text.slice(0, 200)}`);
      return false;
    }
    const bad = shot.check?.(text) ?? null;
    if (bad) {
      rec.fail(bad);
      return false;
    }
    if (record) {
      rec.latencyMs.push(performance.now() - t0);
      rec.ok++;
    }
    return true;
  } catch (e) {
    rec.fail(e instanceof Error ? e.message : String(e));
    return false;
  }
}

async function sendStream(shot: StreamShot, rec: Recorder): Promise<void> {
  const t0 = performance.now();
  try {
    const res = await fetch(shot.url, { method: "POST", headers: shot.headers, body: shot.body });
    if (!res.ok || !res.body) {
      rec.fail(`HTTP ${res.status}: ${(await res.text()).slice(0, 200)}`);
      return;
    }
    const reader = res.body.getReader();
    const dec = new TextDecoder();
    let first = true;
    let prevByte = 0;
    let events = 0;
    let lastEventAt = 0;
    let tail = "";
    let finished = false;
    for (;;) {
      const r = await reader.read();
      if (r.done) break;
      const t = performance.now();
      const chunk = r.value;
      if (first) {
        rec.ttfbMs.push(t - t0);
        first = false;
      }
      // Count SSE event ends ("\n\n") in this read; one read may carry several events.
      let inThisRead = 0;
      for (let i = chunk.indexOf(LF); i !== -1; i = chunk.indexOf(LF, i + 1)) {
        const prev = i > 0 ? chunk[i - 1] : prevByte;
        if (prev !== LF) continue;
        if (events < shot.gapEvents) {
          if (events > 0) {
            rec.gapMs.push(t - lastEventAt);
            if (inThisRead > 0) rec.coalesced++;
            rec.events++;
          }
          lastEventAt = t;
        }
        events++;
        inThisRead++;
      }
      prevByte = chunk.length ? chunk[chunk.length - 1]! : prevByte;
      // The end marker may straddle two reads: look in what is left of the last one plus this one.
      const text = tail + dec.decode(chunk, { stream: true });
      if (!finished && text.includes(shot.doneMarker)) finished = true;
      tail = text.slice(-256);
    }
    if (!finished) {
      rec.fail(`stream ended without ${shot.doneMarker}: …${tail.slice(-160)}`);
      return;
    }
    rec.latencyMs.push(performance.now() - t0);
    rec.ok++;
  } catch (e) {
    rec.fail(e instanceof Error ? e.message : String(e));
  }
}

async function sendFanout(shot: FanoutShot, rec: Recorder): Promise<void> {
  const t0 = performance.now();
  const results = await Promise.all(shot.shots.map((s) => sendJson(s, rec, false)));
  if (results.every(Boolean)) {
    rec.latencyMs.push(performance.now() - t0);
    rec.ok++;
  }
}

function send(shot: Shot, rec: Recorder): Promise<unknown> {
  if (shot.type === "stream") return sendStream(shot, rec);
  if (shot.type === "fanout") return sendFanout(shot, rec);
  return sendJson(shot, rec, true);
}

export async function runLoop(spec: LoopSpec): Promise<LoadResult> {
  const rec = new Recorder();
  const started = performance.now();
  const deadline = started + spec.durationS * 1000;
  const worker = async () => {
    while (performance.now() < deadline) await send(spec.next(), rec);
  };
  await Promise.all(Array.from({ length: spec.concurrency }, worker));
  return {
    ok: rec.ok,
    errors: rec.errors,
    errorSamples: rec.errorSamples,
    elapsedS: (performance.now() - started) / 1000,
    latencyMs: rec.latencyMs,
    ttfbMs: rec.ttfbMs,
    gapMs: rec.gapMs,
    coalesced: rec.coalesced,
    events: rec.events,
  };
}

/** One request, for correctness probes before measuring. */
export async function probe(shot: Shot): Promise<string | null> {
  const rec = new Recorder();
  await send(shot, rec);
  return rec.errors ? rec.errorSamples[0] ?? "failed" : null;
}
