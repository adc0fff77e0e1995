// One record per request, filled while the request runs and written once when it ends: one JSON
// log line (ACCESS_LOG, on by default) and, when tracing is on, the request's spans. mount()
// opens the record; the relay adds what only it knows (key prefix, model, lanes tried, the lane
// that served, tokens, cost). A streamed answer holds the record open until its last byte.
// Cost on the hot path: one small object per request and one hand-built line at its end.
import pino, { type DestinationStream, type Logger } from "pino";
import type { Config } from "../config.ts";
import { lineBatcher } from "./line-batch.ts";

/** One lane the request tried, in order. `code` is set when the lane failed over. */
export interface LaneTry {
  provider: string;
  lane: number;
  status: number;
  code?: string;
  /** performance.now() at the start and end of the upstream attempt (for traces). */
  startedAt: number;
  endedAt?: number;
  ttfbMs?: number | null;
  model?: string;
  inputTokens?: number;
  outputTokens?: number;
}

export type AccessSink = (entry: AccessEntry) => void;

/** Per gateway: what to do with a finished record, and the in-flight counts the metrics read. */
export class RequestTracker {
  inFlight = 0;
  streams = 0;
  private sinks: AccessSink[] = [];

  addSink(sink: AccessSink): void {
    this.sinks.push(sink);
  }

  open(requestId: string, method: string, route: string): AccessEntry {
    this.inFlight++;
    return new AccessEntry(this, requestId, method, route);
  }

  /** @internal called once per entry. */
  close(entry: AccessEntry): void {
    this.inFlight--;
    for (const s of this.sinks) {
      try {
        s(entry);
      } catch {
        // An observability sink never fails a request.
      }
    }
  }
}

export class AccessEntry {
  readonly startedAt = performance.now();
  readonly startedAtEpochMs = Date.now();
  endedAt = 0;
  status = 0;
  keyPrefix: string | null = null;
  model: string | null = null;
  lanes: LaneTry[] | null = null;
  served: string | null = null;
  ttfbMs: number | null = null;
  inputTokens = 0;
  outputTokens = 0;
  costUsd = 0;
  outcome: string | null = null;
  private holds = 1;
  private streaming = false;

  constructor(private readonly tracker: RequestTracker, readonly requestId: string, readonly method: string, readonly route: string) {}

  /** The answer streams on after the handler returned: the record stays open until streamEnded(). */
  holdForStream(): void {
    if (this.streaming) return;
    this.streaming = true;
    this.holds++;
    this.tracker.streams++;
  }

  streamEnded(): void {
    if (!this.streaming) return;
    this.streaming = false;
    this.tracker.streams--;
    this.release();
  }

  /** mount() calls this once its response exists; the record closes when nothing holds it. */
  release(): void {
    if (--this.holds !== 0) return;
    this.endedAt = performance.now();
    this.tracker.close(this);
  }

  /** A lane is being tried (attempt start). */
  laneStarted(provider: string, lane: number): LaneTry {
    const t: LaneTry = { provider, lane, status: 0, startedAt: performance.now() };
    (this.lanes ??= []).push(t);
    return t;
  }
}


const round = (ms: number) => Math.round(ms * 100) / 100;
const q = JSON.stringify;
/** A number as JSON writes it (a non-finite one as null). */
const num = (n: number) => (Number.isFinite(n) ? String(n) : "null");

/**
 * The access log line of a finished request, as pino writes an info line of the `access` child
 * logger (level, time, the binding, the fields in snake_case like the API, msg), built by hand:
 * every field is known, so there is nothing to walk, redact or look up per request. Values only
 * the gateway makes (key prefixes, provider ids, outcomes) hold no character JSON escapes and are
 * written as they are; the rest is escaped.
 */
export function accessJson(e: AccessEntry, time: number): string {
  let s = `{"level":30,"time":${time},"log":"access","request_id":${q(e.requestId)},"method":${q(e.method)},"route":${q(e.route)},"status":${e.status},"duration_ms":${num(round(e.endedAt - e.startedAt))}`;
  if (e.ttfbMs !== null) s += `,"ttfb_ms":${num(e.ttfbMs)}`;
  if (e.keyPrefix !== null) s += `,"key_prefix":"${e.keyPrefix}"`;
  if (e.model !== null) s += `,"model":${q(e.model)}`;
  if (e.lanes !== null) {
    s += `,"lanes":[`;
    for (let i = 0; i < e.lanes.length; i++) {
      const l = e.lanes[i]!;
      s += `${i ? "," : ""}{"provider":"${l.provider}","lane":${l.lane},"status":${l.status}${l.code ? `,"code":${q(l.code)}` : ""}}`;
    }
    s += `],"served_by":${e.served === null ? "null" : `"${e.served}"`},"input_tokens":${num(e.inputTokens)},"output_tokens":${num(e.outputTokens)},"cost_usd":${num(e.costUsd)}`;
  }
  if (e.outcome !== null) s += `,"outcome":"${e.outcome}"`;
  return s + `,"msg":"request"}\n`;
}

/** Writes one `access` log line per request unless ACCESS_LOG=false (or the log level is above info). */
export function installAccessLog(config: Pick<Config, "ACCESS_LOG">, log: Logger, tracker: RequestTracker): void {
  if (!config.ACCESS_LOG || !log.isLevelEnabled("info")) return;
  // Straight to the root logger's destination (the same stream every other line goes to): the
  // line is built from known fields only (no header, no secret), so it needs neither pino's
  // serialisation nor the root logger's redaction, which re-walks its wildcard paths on every
  // call.
  const stream = (log as Logger & Record<symbol, DestinationStream>)[pino.symbols.streamSym]!;
  const write = lineBatcher(stream);
  tracker.addSink((e) => write(accessJson(e, Date.now())));
}
