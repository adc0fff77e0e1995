// One record per request, filled while the request runs and written once when it ends: one JSON
// log line (ACCESS_LOG, on by default) and, when tracing is on, the request's spans. mount()
// opens the record; the relay adds what only it knows (key prefix, model, lanes tried, the lane
// that served, tokens, cost). A streamed answer holds the record open until its last byte.
// Cost on the hot path: one small object per request and one pino call at its end.
import pino, { type DestinationStream, type Logger } from "pino";
import type { Ctx } from "../context.ts";

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

/** The access log line's fields (snake_case, like the API). */
export function accessLine(e: AccessEntry): Record<string, unknown> {
  const line: Record<string, unknown> = {
    request_id: e.requestId,
    method: e.method,
    route: e.route,
    status: e.status,
    duration_ms: round(e.endedAt - e.startedAt),
  };
  if (e.ttfbMs !== null) line.ttfb_ms = e.ttfbMs;
  if (e.keyPrefix !== null) line.key_prefix = e.keyPrefix;
  if (e.model !== null) line.model = e.model;
  if (e.lanes !== null) {
    line.lanes = e.lanes.map((l) => (l.code ? { provider: l.provider, lane: l.lane, status: l.status, code: l.code } : { provider: l.provider, lane: l.lane, status: l.status }));
    line.served_by = e.served;
    line.input_tokens = e.inputTokens;
    line.output_tokens = e.outputTokens;
    line.cost_usd = e.costUsd;
  }
  if (e.outcome !== null) line.outcome = e.outcome;
  return line;
}

/** Writes one `access` log line per request unless ACCESS_LOG=false. */
export function installAccessLog(ctx: Ctx): void {
  if (!ctx.config.ACCESS_LOG) return;
  // The line is built from known fields only (accessLine: no header, no secret), so it skips the
  // root logger's redaction, which re-walks its wildcard paths on every call: ~5 % of a request's
  // JS time at one line per request. Same destination, level and format as every other line.
  const root = ctx.log as Logger & Record<symbol, DestinationStream>;
  const log = pino({ level: root.level, base: undefined }, root[pino.symbols.streamSym]).child({ log: "access" });
  ctx.services.requestTracker.addSink((e) => log.info(accessLine(e), "request"));
}
