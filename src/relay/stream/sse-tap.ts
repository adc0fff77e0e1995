// The pass-through tap: upstream SSE bytes go to the client as they are, while the tap finds
// event boundaries and the `"usage"` marker by scanning bytes (no per-chunk decode or JSON).
// Only an event carrying a non-null usage block is parsed, once. Complete events are forwarded;
// a trailing partial event waits for the rest, so the client stream is always at an event
// boundary (keep-alive comments can go in between, and an event hidden from the client, the
// include_usage chunk it did not ask for, can be cut out whole).
import type { Json, UpstreamCodec, Usage } from "../../protocols/types.ts";

const LF = 10, CR = 13, BACKSLASH = 92, COLON = 58, SPACE = 32, TAB = 9;
const USAGE = Buffer.from('"usage"');
const DATA = Buffer.from("data:");

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

/** Start of the event containing position pos (just after the previous blank line, or 0). */
function eventStart(b: Uint8Array, pos: number): number {
  for (let i = pos - 1; i >= 1; i--) {
    if (b[i] !== LF) continue;
    const p = b[i - 1];
    if (p === LF || (p === CR && i >= 2 && b[i - 2] === LF)) return i + 1;
  }
  return 0;
}

/** End (exclusive) of the event containing pos, bounded by limit. */
function eventEnd(b: Uint8Array, pos: number, limit: number): number {
  for (let i = pos + 1; i < limit; i++) {
    if (b[i] !== LF) continue;
    const p = b[i - 1];
    if (p === LF || (p === CR && i >= 2 && b[i - 2] === LF)) return i + 1;
  }
  return limit;
}

/** The `data` of one SSE event's bytes (data lines joined by \n). */
export function eventData(bytes: Uint8Array): string {
  const text = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8");
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

/** True when the usage value starting after `"usage"` at pos is JSON null. */
function isNullValue(b: Uint8Array, pos: number, n: number): boolean {
  let j = pos + USAGE.length;
  while (j < n && (b[j] === SPACE || b[j] === TAB)) j++;
  if (b[j] !== COLON) return true; // not a key: treat as no usage here
  j++;
  while (j < n && (b[j] === SPACE || b[j] === TAB)) j++;
  return b[j] === 110 && b[j + 1] === 117 && b[j + 2] === 108 && b[j + 3] === 108; // null
}

export class PassThroughTap {
  usage: Usage | null = null;
  /** A data event has been forwarded (after this, no fallback: the client has content). */
  delivered = false;
  /** Chunks forwarded (a rough completion-token count when the upstream never reports usage). */
  forwarded = 0;
  private carry: Uint8Array | null = null;

  constructor(private codec: UpstreamCodec, private request: Json) {}

  /** Upstream bytes in → bytes for the client (null when no event is complete yet). */
  push(chunk: Uint8Array): Uint8Array | null {
    let b = chunk;
    if (this.carry) {
      const joined = new Uint8Array(this.carry.length + chunk.length);
      joined.set(this.carry, 0);
      joined.set(chunk, this.carry.length);
      b = joined;
      this.carry = null;
    }
    const n = b.length;
    // Fast path: the chunk ends on an event boundary (what upstreams almost always send).
    let end: number;
    if (n >= 2 && b[n - 1] === LF && (b[n - 2] === LF || (b[n - 2] === CR && n >= 3 && b[n - 3] === LF))) end = n;
    else {
      end = lastEventEnd(b, n);
      if (end < n) this.carry = end === 0 ? b : b.subarray(end);
      if (end === 0) return null;
    }
    return this.emit(b, end);
  }

  /** End of upstream: whatever partial event is left goes out as it is (and is tapped). */
  end(): Uint8Array | null {
    const c = this.carry;
    this.carry = null;
    if (!c || c.length === 0) return null;
    return this.emit(c, c.length);
  }

  private emit(b: Uint8Array, end: number): Uint8Array {
    const buf = Buffer.from(b.buffer, b.byteOffset, end);
    let cuts: Array<[number, number]> | null = null;
    let pos = buf.indexOf(USAGE);
    while (pos >= 0) {
      if (buf[pos - 1] !== BACKSLASH && !isNullValue(buf, pos, end)) {
        const s = eventStart(buf, pos);
        const e = eventEnd(buf, pos, end);
        let ev: Json | null = null;
        try {
          ev = JSON.parse(eventData(buf.subarray(s, e)));
        } catch {}
        if (ev && typeof ev === "object") {
          const u = this.codec.streamUsage ? this.codec.streamUsage(this.usage, ev) : this.codec.usageOf(ev);
          if (u) this.usage = u;
          if (this.codec.hideFromClient?.(ev, this.request)) (cuts ??= []).push([s, e]);
        }
        pos = buf.indexOf(USAGE, e);
      } else {
        pos = buf.indexOf(USAGE, pos + USAGE.length);
      }
    }
    if (!this.delivered && buf.indexOf(DATA) >= 0) this.delivered = true;
    this.forwarded++;
    const region = end === b.length ? b : b.subarray(0, end);
    if (!cuts) return region;
    const parts: Uint8Array[] = [];
    let at = 0;
    for (const [s, e] of cuts) {
      if (s > at) parts.push(region.subarray(at, s));
      at = e;
    }
    if (at < end) parts.push(region.subarray(at, end));
    return Buffer.concat(parts);
  }
}
