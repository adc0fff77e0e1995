// The pass-through tap: upstream SSE bytes go to the client as they are, while the tap finds
// event boundaries and the `"usage"` marker by scanning bytes (no per-chunk decode or JSON).
// Only an event carrying a non-null usage block is parsed, once. Complete events are forwarded;
// a trailing partial event waits for the rest, so the client stream is always at an event
// boundary (keep-alive comments can go in between, and an event hidden from the client, the
// include_usage chunk it did not ask for, can be cut out whole). A region holding an error event or
// the lane's secret itself goes through the same scrub as every other upstream text
// (secret-scrub.ts): an upstream that echoes its key mid-stream does not reach the client with it.
// The one event that carries the answer's usage for the client (the codec's usageHolder) is the
// only one rewritten: the gateway's `cost` goes into its usage (CONTRACT §9) in place, every other
// byte kept (usage-cost.ts); one whose usage already names a cost (the upstream's own) goes out
// re-serialised with ours instead.
import { chatStreamError } from "../../protocols/chat/index.ts";
import { eventTooLarge, MAX_SSE_EVENT_BYTES } from "../../protocols/sse.ts";
import { UpstreamStreamError, type ClientCodec, type Json, type UpstreamCodec, type Usage } from "../../protocols/types.ts";
import { asBuffer } from "../../lib/bytes.ts";
import { scrubSecrets } from "../secret-scrub.ts";
import { countDeltaTokens } from "./delta-count.ts";
import { costNumber, spliceCost } from "./usage-cost.ts";
import { FailedAfterOutput, type Tap, type TapBytes } from "./tap.ts";

const LF = 10, CR = 13, BACKSLASH = 92, COLON = 58, SPACE = 32, TAB = 9;
/** The usage block's key (`"usage"`; a codec may name another: Gemini's `"usageMetadata"`), as bytes. */
const USAGE = Buffer.from('"usage"');
const usageMarkers = new Map<string, Buffer>();
const usageMarkerOf = (key: string | undefined): Buffer => {
  if (key === undefined || key === "usage") return USAGE;
  let b = usageMarkers.get(key);
  if (!b) usageMarkers.set(key, (b = Buffer.from(`"${key}"`)));
  return b;
};
const DATA = Buffer.from("data:");
/** An error event's marker in every protocol here (`{"error": …}`, `"type":"error"`); escaped inside content it reads `\"error\"`. */
const ERROR = Buffer.from('"error"');
const enc = new TextEncoder();

/** End (exclusive) of the last complete event in b[0..n), or 0. Handles \n\n, \r\n\r\n and \n\r\n. */
export function lastEventEnd(b: Uint8Array, n = b.length): number {
  for (let i = n - 1; i >= 1; i--) {
    if (b[i] !== LF) continue;
    const p = b[i - 1];
    if (p === LF) return i + 1;
    if (p === CR && i >= 2 && b[i - 2] === LF) return i + 1;
  }
  return 0;
}

/** True when b[0..n) ends on an event boundary (what upstreams almost always send). */
function endsOnBoundary(b: Uint8Array, n: number): boolean {
  return n >= 2 && b[n - 1] === LF && (b[n - 2] === LF || (b[n - 2] === CR && n >= 3 && b[n - 3] === LF));
}

/**
 * End (exclusive, in `chunk`) of an event boundary that starts in the carried bytes before it and
 * ends in the chunk's first two bytes (`p1` and `p2`: the last and second-to-last carried byte), or 0.
 */
function junctionEnd(p2: number, p1: number, chunk: Uint8Array): number {
  if (chunk[0] === LF && (p1 === LF || (p1 === CR && p2 === LF))) return 1;
  if (chunk.length > 1 && chunk[1] === LF && chunk[0] === CR && p1 === LF) return 2;
  return 0;
}

/** One read's client bytes: `a` then `b`, as one list (`a`, when a list, is extended in place). */
function bothBytes(a: TapBytes, b: TapBytes): Uint8Array[] {
  const out = a instanceof Uint8Array ? [a] : a;
  if (b instanceof Uint8Array) out.push(b);
  else for (const x of b) out.push(x);
  return out;
}

/** Start of the event containing position pos (just after the previous blank line, or 0). */
function eventStart(b: Uint8Array, pos: number): number {
  for (let i = pos - 1; i >= 1; i--) {
    if (b[i] !== LF) continue;
    const p = b[i - 1];
    if (p === LF || (p === CR && i >= 2 && b[i - 2] === LF)) return i + 1;
  }
  return 0;
}

/** End (exclusive) of the event containing pos, bounded by limit (line ends found by native search). */
function eventEnd(b: Uint8Array, pos: number, limit: number): number {
  for (let i = b.indexOf(LF, pos + 1); i >= 0 && i < limit; i = b.indexOf(LF, i + 1)) {
    const p = b[i - 1];
    if (p === LF || (p === CR && i >= 2 && b[i - 2] === LF)) return i + 1;
  }
  return limit;
}

/** The `data` of one SSE event's bytes (data lines joined by \n). */
export function eventData(bytes: Uint8Array): string {
  const buf = asBuffer(bytes);
  // What upstreams send: one `data: …` line, then the blank line. Read without splitting lines.
  const lf = buf.indexOf(LF);
  const eol = lf < 0 ? buf.length : lf;
  if (eol > 5 && startsWithData(buf) && onlyLineEnds(buf, eol)) {
    let from = 5;
    if (buf[from] === SPACE) from++;
    const to = buf[eol - 1] === CR ? eol - 1 : eol;
    const cr = buf.indexOf(CR, from);
    if (cr < 0 || cr >= to) return buf.toString("utf8", from, to);
  }
  const text = buf.toString("utf8");
  let data = "";
  let first = true;
  for (const line of text.split(/\r\n|\n|\r/)) {
    if (!line.startsWith("data")) continue;
    if (line.length > 4 && line.charCodeAt(4) !== COLON) continue;
    let v = line.slice(5);
    if (v.charCodeAt(0) === SPACE) v = v.slice(1);
    data = first ? v : `${data}\n${v}`;
    first = false;
  }
  return data;
}

/** True when b opens with `data:` (compared in place: a search would scan the rest on a miss). */
function startsWithData(b: Uint8Array): boolean {
  return b[0] === 100 && b[1] === 97 && b[2] === 116 && b[3] === 97 && b[4] === COLON;
}

/** True when b[from..] holds nothing but line ends. */
function onlyLineEnds(b: Uint8Array, from: number): boolean {
  for (let i = from; i < b.length; i++) if (b[i] !== LF && b[i] !== CR) return false;
  return true;
}

const EVENT = Buffer.from("event:");

/** The `event` name of one SSE event's bytes, or null. */
function eventName(bytes: Uint8Array): string | null {
  const buf = asBuffer(bytes);
  if (buf.indexOf(EVENT) < 0) return null;
  const text = buf.toString("utf8");
  const m = /(?:^|[\r\n])event:[ ]?([^\r\n]*)/.exec(text);
  return m ? m[1]!.trim() : null;
}

/** True when the usage value starting after the usage key (`keyLength` bytes) at pos is JSON null. */
function isNullValue(b: Uint8Array, pos: number, n: number, keyLength: number): boolean {
  return nullAfter(b, pos + keyLength, n);
}

/** True when b[j..n) reads `: null` (a key whose value is null), or is not a key's colon at all. */
function nullAfter(b: Uint8Array, j: number, n: number): boolean {
  while (j < n && (b[j] === SPACE || b[j] === TAB)) j++;
  if (b[j] !== COLON) return true; // not a key: treat as no usage here
  j++;
  while (j < n && (b[j] === SPACE || b[j] === TAB)) j++;
  return b[j] === 110 && b[j + 1] === 117 && b[j + 2] === 108 && b[j + 3] === 108; // null
}

/** The `"error"` at pos is an error (a value such as `"type":"error"`, or a key with a non-null value). */
function isErrorMarker(b: Uint8Array, pos: number): boolean {
  let j = pos + ERROR.length;
  while (j < b.length && (b[j] === SPACE || b[j] === TAB)) j++;
  return b[j] !== COLON || !nullAfter(b, j, b.length);
}

/** One event's bytes written again with `data` as its data (its event name kept; what upstreams send carries no other field). */
function withData(bytes: Uint8Array, data: Json): Uint8Array {
  const name = eventName(bytes);
  return enc.encode(`${name === null ? "" : `event: ${name}\n`}data: ${JSON.stringify(data)}\n\n`);
}

/**
 * A lane's secrets as bytes, kept across its streams (the same few credentials serve every
 * request). Small: a rotated key's bytes stay at most until 64 others have been seen, like the
 * decrypted key itself stays on the key cache's lanes until they are dropped.
 */
const secretBytesCache = new Map<string, Buffer>();
function secretBytesOf(secrets: string[]): Buffer[] {
  const out: Buffer[] = [];
  for (const s of secrets) {
    if (s.length === 0) continue;
    let b = secretBytesCache.get(s);
    if (!b) {
      if (secretBytesCache.size >= 64) secretBytesCache.clear();
      secretBytesCache.set(s, (b = Buffer.from(s)));
    }
    out.push(b);
  }
  return out;
}

/** Bytes of forwarded events a tap keeps for the delta count before counting them (see outputTokens). */
const UNCOUNTED_MAX = 64 * 1024;
/** A region up to this size is counted as it goes out instead of kept. */
const COUNT_AT_ONCE_BYTES = 2048;

export class PassThroughTap implements Tap {
  usage: Usage | null = null;
  /** A data event has been forwarded (after this, no fallback: the client has content). */
  delivered = false;
  /** Chunks forwarded. */
  forwarded = 0;
  /**
   * Output tokens counted from the deltas forwarded (delta-count.ts): what an answer cut short is
   * charged. A large region (a fast answer read in big pieces) is counted when asked for, which
   * only an answer ending without its usage does, so a finished stream never pays its scan: such
   * regions wait in `uncounted`, counted in batches once they pass UNCOUNTED_MAX bytes so a long
   * stream holds no more than that. A small one is counted at once (COUNT_AT_ONCE_BYTES).
   */
  get outputTokens(): number {
    this.countPending();
    return this.counted;
  }
  private counted = 0;
  private uncounted: Uint8Array[] = [];
  private uncountedBytes = 0;
  /** A partial event's bytes, in the pieces they came in (joined once, when the event ends). */
  private carry: Uint8Array[] = [];
  private carried = 0;
  /** The last region forwarded (it ends on an event boundary, so it holds the last event whole). */
  private last: Uint8Array | null = null;

  private secretBytes: Buffer[];
  private usageMarker: Buffer;

  /**
   * `client`: the client protocol's codec, for an error event that continues the stream (absent: a
   * chat error event). `secrets`: what the lane's call carried that its upstream could echo.
   */
  /**
   * `costOf`: the request's cost once this attempt is recorded with the given usage (MoneyCall.quote),
   * written into the usage the client gets; absent, the events go out as they came.
   */
  constructor(private codec: UpstreamCodec, private request: Json, private client?: ClientCodec, private secrets: string[] = [], private costOf?: (u: Usage) => number) {
    this.secretBytes = secretBytesOf(secrets);
    this.usageMarker = usageMarkerOf(codec.usageKey);
  }

  /** The error event continues the upstream's own event numbering (Responses sequence_number). */
  error(message: string, code: string): Uint8Array {
    const text = this.client ? this.client.streamEncoder(this.request, { nextSequence: this.nextSequence() }).error(message) : chatStreamError(message, code);
    return enc.encode(text);
  }

  /** The last event forwarded (its data and event name), or null. Read only at the end or on an error. */
  lastEvent(): { data: string; event: string | null } | null {
    const b = this.last;
    if (!b) return null;
    let p = b.length - 1;
    while (p >= 0 && (b[p] === LF || b[p] === CR)) p--;
    if (p < 0) return null;
    const bytes = b.subarray(eventStart(b, p), p + 1);
    return { data: eventData(bytes), event: eventName(bytes) };
  }

  /** The last forwarded event is the protocol's terminal event and no error (read when the client leaves). */
  get served(): boolean {
    if (!this.codec.isTerminal || !this.last) return false;
    const ev = this.lastEvent();
    if (!ev || !this.codec.isTerminal(ev.data, ev.event)) return false;
    const data = Buffer.from(ev.data);
    for (let pos = data.indexOf(ERROR); pos >= 0; pos = data.indexOf(ERROR, pos + ERROR.length)) if (isErrorMarker(data, pos)) return false;
    return true;
  }

  /** The `sequence_number` after the last forwarded event's (Responses streams), or undefined. */
  nextSequence(): number | undefined {
    const ev = this.lastEvent();
    if (!ev) return undefined;
    try {
      const n = JSON.parse(ev.data)?.sequence_number;
      return typeof n === "number" ? n + 1 : undefined;
    } catch {
      return undefined;
    }
  }

  /** Upstream bytes in → bytes for the client (null when no event is complete yet). */
  push(chunk: Uint8Array): TapBytes | null {
    const n = chunk.length;
    if (this.carried === 0) {
      if (endsOnBoundary(chunk, n)) return this.emit(chunk, n);
      const end = lastEventEnd(chunk, n);
      if (end === 0) return this.hold(chunk, null);
      return end < n ? this.hold(chunk.subarray(end), this.emit(chunk, end)) : this.emit(chunk, end);
    }
    // A partial event is carried: only the new bytes, and a boundary across the two, can end it.
    // Scanning and joining once per event keeps a long event linear, not quadratic. Only the
    // carried event is joined (with the chunk's bytes up to its end); the events after it go out
    // as a view of the chunk: a long answer read in 16 kB pieces is not copied once more per read.
    let first = junctionEnd(this.carriedByte(2), this.carriedByte(1), chunk);
    if (first === 0) {
      first = eventEnd(chunk, 0, n);
      if (first === n && !endsOnBoundary(chunk, n)) return this.hold(chunk, null);
    }
    this.carry.push(chunk.subarray(0, first));
    const head = Buffer.concat(this.carry, this.carried + first);
    this.carry = [];
    this.carried = 0;
    const out = this.emit(head, head.length);
    if (first === n) return out;
    let rest: TapBytes | null;
    try {
      rest = this.push(chunk.subarray(first));
    } catch (e) {
      // The carried event went out whole before the failure that followed it in this read.
      if (e instanceof FailedAfterOutput) throw new FailedAfterOutput(bothBytes(out, e.output), e.failure);
      throw new FailedAfterOutput(out, e);
    }
    return rest === null ? out : bothBytes(out, rest);
  }

  /**
   * Keeps a partial event's bytes and returns `out` (what this read completed). An event past
   * MAX_SSE_EVENT_BYTES breaks the stream, `out` still going to the client first.
   */
  private hold(part: Uint8Array, out: TapBytes | null): TapBytes | null {
    this.carry.push(part);
    if ((this.carried += part.length) <= MAX_SSE_EVENT_BYTES) return out;
    this.carry = [];
    this.carried = 0;
    if (out && out.length) throw new FailedAfterOutput(out, eventTooLarge());
    throw eventTooLarge();
  }

  /** The carried byte `back` places from the end (1: the last), or -1. */
  private carriedByte(back: number): number {
    for (let i = this.carry.length - 1; i >= 0; i--) {
      const part = this.carry[i]!;
      if (back <= part.length) return part[part.length - back]!;
      back -= part.length;
    }
    return -1;
  }

  /**
   * End of upstream: whatever partial event is left goes out as it is (and is tapped). A stream
   * whose last event is not its protocol's terminator was cut off (CONTRACT §8): this throws, the
   * left-over bytes riding along in a FailedAfterOutput so they still reach the client first.
   */
  end(): TapBytes | null {
    const c = this.carried ? Buffer.concat(this.carry, this.carried) : null;
    this.carry = [];
    this.carried = 0;
    const out = c && c.length ? this.emit(c, c.length) : null;
    const ev = this.codec.isTerminal ? this.lastEvent() : null;
    if (this.codec.isTerminal && !(ev && this.codec.isTerminal(ev.data, ev.event))) {
      const failure = new UpstreamStreamError(`the upstream ended the ${this.codec.protocol} stream without its end marker`);
      if (out && out.length) throw new FailedAfterOutput(out, failure);
      throw failure;
    }
    return out;
  }

  private countPending(): void {
    for (const region of this.uncounted) this.counted += countDeltaTokens(region as Buffer, region.length, this.codec.protocol);
    this.uncounted = [];
    this.uncountedBytes = 0;
  }

  private emit(b: Uint8Array, end: number): TapBytes {
    const region = end === b.length ? b : b.subarray(0, end);
    const buf = asBuffer(region);
    // Events cut out (null) or replaced (their new bytes), in order.
    let cuts: Array<[number, number, Uint8Array | null]> | null = null;
    const marker = this.usageMarker;
    let pos = buf.indexOf(marker);
    while (pos >= 0) {
      if (buf[pos - 1] !== BACKSLASH && !isNullValue(buf, pos, end, marker.length)) {
        const s = eventStart(buf, pos);
        const e = eventEnd(buf, pos, end);
        let ev: Json | null = null;
        try {
          ev = JSON.parse(eventData(buf.subarray(s, e)));
        } catch {}
        if (ev && typeof ev === "object") {
          const u = this.codec.streamUsage ? this.codec.streamUsage(this.usage, ev) : this.codec.usageOf(ev);
          if (u) this.usage = u;
          if (this.codec.hideFromClient?.(ev, this.request)) (cuts ??= []).push([s, e, null]);
          else if (this.costOf && this.usage) {
            const holder = this.codec.usageHolder?.(ev);
            if (holder) {
              const usd = this.costOf(this.usage);
              let bytes = spliceCost(buf.subarray(s, e), ev, holder, usd);
              if (!bytes) {
                holder.cost = costNumber(usd);
                delete holder.cost_details; // an upstream's own breakdown of its own price
                bytes = withData(buf.subarray(s, e), ev);
              }
              (cuts ??= []).push([s, e, bytes]);
            }
          }
        }
        pos = buf.indexOf(marker, e);
      } else {
        pos = buf.indexOf(marker, pos + marker.length);
      }
    }
    if (!this.delivered && buf.indexOf(DATA) >= 0) this.delivered = true;
    // A small region (a slow stream's one event) is counted now: a few native searches, where
    // keeping it would hold every chunk of a slow stream until it ends.
    if (end <= COUNT_AT_ONCE_BYTES) this.counted += countDeltaTokens(buf, end, this.codec.protocol);
    else {
      this.uncounted.push(buf);
      if ((this.uncountedBytes += end) > UNCOUNTED_MAX) this.countPending();
    }
    this.forwarded++;
    this.last = region;
    const scrub = this.secretBytes.length > 0 && this.mayEcho(buf);
    if (!cuts) return scrub ? this.scrubbed(region) : region;
    // The region around what was cut or replaced goes out as views of it, not copied into one.
    const parts: Uint8Array[] = [];
    let at = 0;
    for (const [s, e, bytes] of cuts) {
      if (s > at) parts.push(region.subarray(at, s));
      if (bytes) parts.push(bytes);
      at = e;
    }
    if (at < end) parts.push(region.subarray(at, end));
    return scrub ? this.scrubbed(Buffer.concat(parts)) : parts;
  }

  /**
   * Native searches per region: an error event, or a whole secret. `"error":null`, which every
   * Responses object carries, is no error: those regions (response.created and response.completed
   * echo the request's tools and the whole answer) go out as they are.
   */
  private mayEcho(buf: Buffer): boolean {
    for (let pos = buf.indexOf(ERROR); pos >= 0; pos = buf.indexOf(ERROR, pos + ERROR.length)) {
      if (isErrorMarker(buf, pos)) return true;
    }
    for (const s of this.secretBytes) if (buf.indexOf(s) >= 0) return true;
    return false;
  }

  private scrubbed(out: Uint8Array): Uint8Array {
    const text = asBuffer(out).toString("utf8");
    const clean = scrubSecrets(text, this.secrets);
    return clean === text ? out : enc.encode(clean);
  }
}
