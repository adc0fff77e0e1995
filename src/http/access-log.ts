// One record per request, filled while the request runs and released once when it ends: the relay
// writes what happened here (endpoint, outcome, the lane that served, every lane and attempt with
// its status, code, latency and time to first byte, fallbacks, a budget refusal, tokens, cost, a
// cache hit) and nowhere else. The record's sinks read it once, at release: the access log line
// (ACCESS_LOG, on by default), the Prometheus metrics (metrics/gateway-metrics.ts) and, when
// tracing is on, the request's spans (metrics/tracing.ts). mount() opens the record; a streamed
// answer holds it open until its last byte. A /blitz prompt has a record of its own (a part of its
// batch's request) that only the metrics read: prompts count in metrics one by one, while the
// access line and the trace are the batch's.
// Cost on the hot path: one small object per request and per lane tried, one hand-built line at its end.
import pino, { type DestinationStream, type Logger } from "pino";
import type { Config } from "../config.ts";
import { GatewayError } from "../errors.ts";
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
  /** The attempt's outcome (ok, error, aborted, broken); unset when no attempt reached the upstream call. */
  outcome?: string | null;
  /** The attempt's duration, from sending to its last byte. */
  latencyMs?: number;
  /** The upstream answered with an error, timed out or could not be reached: its status (0 = no answer) and code. */
  upstreamStatus?: number;
  upstreamCode?: string | null;
  /** The request moved on to the next lane after this one failed. */
  fellBack?: boolean;
}

/** Reads a finished record (once per record, at its release). */
export type AccessSink = (entry: AccessEntry) => void;

/** Per gateway: what to do with a finished record, and the in-flight counts the metrics read. */
export class RequestTracker {
  inFlight = 0;
  streams = 0;
  /** HTTP requests received since start (the shutdown tells a busy connection from a silent one). */
  opened = 0;
  private sinks: AccessSink[] = [];
  private partSinks: AccessSink[] = [];

  /**
   * `parts`: the sink also reads the records of /blitz prompts (the metrics); otherwise it reads
   * one record per HTTP request (the access log, traces). Returns the call that removes it.
   */
  addSink(sink: AccessSink, opts: { parts?: boolean } = {}): () => void {
    this.sinks.push(sink);
    if (opts.parts) this.partSinks.push(sink);
    return () => {
      this.sinks = this.sinks.filter((s) => s !== sink);
      this.partSinks = this.partSinks.filter((s) => s !== sink);
    };
  }

  open(requestId: string, method: string, route: string): AccessEntry {
    this.inFlight++;
    this.opened++;
    return new AccessEntry(this, requestId, method, route, false);
  }

  /** The record of one /blitz prompt (no HTTP request of its own: not in flight, no access line, no span). */
  openPart(requestId: string, endpoint: string): AccessEntry {
    const e = new AccessEntry(this, requestId, "", "", true);
    e.endpoint = endpoint;
    return e;
  }

  /** @internal called once per entry. */
  close(entry: AccessEntry): void {
    if (!entry.part) this.inFlight--;
    for (const s of entry.part ? this.partSinks : this.sinks) {
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
  /** The lanes tried, one entry per lane, in order (the access line's `lanes`, one span each). */
  lanes: LaneTry[] | null = null;
  /** Attempts outside `lanes` (the classifier's, and a lane's attempt retried with its default model): metrics only. */
  asides: LaneTry[] | null = null;
  /** Lanes passed over because they were cooling (relay/routing/cooldowns.ts), in order; null when none. */
  skipped: Array<{ provider: string; lane: number }> | null = null;
  /** Session affinity (relay/routing/affinity.ts): followed, moved or new; null when it did not apply. */
  affinity: string | null = null;
  /** The lane (or aside) started last: the one an attempt being made belongs to. */
  current: LaneTry | null = null;
  served: string | null = null;
  /** The request fields the answering lane got mapped, dropped or moved (CONTRACT §9), null when none. */
  adapted: string | null = null;
  ttfbMs: number | null = null;
  inputTokens = 0;
  outputTokens = 0;
  costUsd = 0;
  /** How the request ended; set when it counts as an inference request (gateway_requests_total). */
  outcome: string | null = null;
  /** The inference endpoint (chat, responses, messages, embeddings, transcriptions, blitz); null elsewhere. */
  endpoint: string | null = null;
  /** The provider that served, or the one last tried when none did; null when none was reached. */
  provider: string | null = null;
  /** The endpoint of a call refused with 402 budget_exceeded (the request's, a batch's or its classifier's). */
  budgetRefused: string | null = null;
  private holds = 1;
  private streaming = false;

  constructor(private readonly tracker: RequestTracker, readonly requestId: string, readonly method: string, readonly route: string, readonly part: boolean) {}

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
    const t = newTry(provider, lane);
    (this.lanes ??= []).push(t);
    return (this.current = t);
  }

  /** A lane was passed over: it is cooling down. */
  laneSkipped(provider: string, lane: number): void {
    (this.skipped ??= []).push({ provider, lane });
  }

  /** An upstream call made for the request outside its lanes (the classifier's): counted, not listed. */
  asideStarted(provider: string, lane: number): LaneTry {
    const t = newTry(provider, lane);
    (this.asides ??= []).push(t);
    return (this.current = t);
  }

  /**
   * One upstream attempt on `t` ended. A lane's second attempt (the retry with its default model)
   * keeps the first one's facts as an aside. Tokens and cost add to the request's, except the
   * classifier's (lane -1), which is not one of the request's lanes.
   */
  attemptEnded(t: LaneTry, model: string, outcome: string, latencyMs: number, ttfbMs: number | null, inputTokens: number | null, outputTokens: number, cost: number): void {
    if (t.outcome) {
      const prev = newTry(t.provider, t.lane);
      prev.outcome = t.outcome;
      prev.latencyMs = t.latencyMs;
      prev.ttfbMs = t.ttfbMs;
      prev.upstreamStatus = t.upstreamStatus;
      prev.upstreamCode = t.upstreamCode;
      (this.asides ??= []).push(prev);
      t.upstreamStatus = 0;
      t.upstreamCode = null;
    }
    t.outcome = outcome;
    t.latencyMs = latencyMs;
    t.endedAt = performance.now();
    t.ttfbMs = ttfbMs;
    t.model = model;
    if (inputTokens !== null) {
      t.inputTokens = inputTokens;
      t.outputTokens = outputTokens;
    }
    if (t.lane < 0) return;
    if (inputTokens !== null) {
      this.inputTokens += inputTokens;
      this.outputTokens += outputTokens;
    }
    this.costUsd += cost;
  }

  /** The upstream of the attempt on `t` answered with an error, timed out or could not be reached: its status (0 = no answer) and code. */
  upstreamFailed(t: LaneTry, status: number, code: string): void {
    t.upstreamStatus = status;
    t.upstreamCode = code;
  }

  /** The lane `laneIndex` failed with `status`/`code`; `fellBack`: the next lane takes over. */
  laneFailed(laneIndex: number, status: number, code: string, fellBack: boolean): void {
    const t = this.lanes?.findLast((l) => l.lane === laneIndex);
    if (!t) return;
    t.status = status;
    t.code = code;
    if (fellBack) t.fellBack = true;
  }

  /** Notes a 402 budget_exceeded refusal of a call to `endpoint`, when `e` is one. */
  noteRefusal(endpoint: string, e: unknown): void {
    if (e instanceof GatewayError && e.status === 402 && e.code === "budget_exceeded") this.budgetRefused = endpoint;
  }
}

/** Every field set at once: one object shape for every lane tried. */
const newTry = (provider: string, lane: number): LaneTry => ({
  provider, lane, status: 0, code: undefined, startedAt: performance.now(), endedAt: undefined, ttfbMs: null, model: undefined,
  inputTokens: undefined, outputTokens: undefined, outcome: null, latencyMs: 0, upstreamStatus: 0, upstreamCode: null, fellBack: false,
});


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
  if (e.skipped !== null) {
    s += `,"cooling_lanes":[`;
    for (let i = 0; i < e.skipped.length; i++) s += `${i ? "," : ""}${e.skipped[i]!.lane}`;
    s += "]";
  }
  if (e.affinity !== null) s += `,"affinity":"${e.affinity}"`;
  if (e.outcome !== null) s += `,"outcome":"${e.outcome}"`;
  if (e.adapted !== null) s += `,"adapted":${q(e.adapted)}`;
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
