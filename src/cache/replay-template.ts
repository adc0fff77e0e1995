// A hit's bytes, encoded once per entry, client protocol and mode, then copied per hit.
//
// Every hit of one entry in one protocol and mode writes the same bytes but for its fresh ids
// (`chatcmpl-…`, `msg_…`, `resp_…`, tool-call ids) and its timestamps (`created`, `created_at`).
// Running the protocol's encoders over every chunk on every hit was most of an SSE hit's CPU. So
// the first hit encodes the answer twice: the id-shaped tokens that differ between the two runs
// are the generated ones (text that merely looks like an id is the same in both and stays), and
// become slots at fixed byte offsets. A later hit copies the bytes and writes fresh values of the
// same length into the slots: one memcpy and a few dozen bytes, whatever the answer's length.
import { LRUCache } from "lru-cache";
import { randomToken } from "../lib/crypto.ts";

/** A timestamp in whole seconds the encoders write as `now` (a literal start: one pass over the text). */
const TIME = /"(?:created|created_at)":(\d{10})\b/g;

/** Where a slot's value goes, and which value (occurrences of one id share one). */
interface Slot {
  offset: number;
  length: number;
  value: number;
}

export interface Template {
  bytes: Uint8Array;
  slots: Slot[];
  /** Per value: the prefix of a generated id (its random part has the rest of `length`), or null for the time. */
  values: Array<{ prefix: string; length: number } | null>;
}

const enc = new TextEncoder();

const isLetter = (c: number) => (c >= 65 && c <= 90) || (c >= 97 && c <= 122);

/** A separator and the run of letters and digits after it, at least 20 long: the tail of an id. */
const TAIL = /[_-][A-Za-z0-9]{20,}/g;

/** An id-shaped token of the text: [start, end) and where its prefix ends (after the `_` or `-`). */
export interface IdToken {
  start: number;
  end: number;
  prefixEnd: number;
}

/**
 * The tokens an id this gateway generates looks like: letters, `_` or `-`, then at least 20
 * letters and digits (`chatcmpl-…`, `call_…`, `toolu_…`, `msg_…`, `resp_…`, `fc_…`), leftmost and
 * longest, exactly as /[A-Za-z]+[_-][A-Za-z0-9]{20,}/g finds them. Not with that regex: it tries
 * every letter of a run of letters as a start and runs to the run's end each time, quadratic on
 * an answer that is one long word (60,000 letters took seconds). Here the engine looks for the
 * tail alone (it cannot backtrack: nothing follows its greedy run), and the prefix is the letters
 * before the separator, walked back no further than the previous token's end: every character is
 * read a bounded number of times.
 */
export function* idTokens(s: string): Generator<IdToken> {
  const re = new RegExp(TAIL.source, "g");
  let lastEnd = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    const sep = m.index;
    let start = sep;
    while (start > lastEnd && isLetter(s.charCodeAt(start - 1))) start--;
    if (start === sep) continue; // no letters before the separator: not an id (its letters may start the next one)
    lastEnd = sep + m[0].length;
    yield { start, end: lastEnd, prefixEnd: sep + 1 };
  }
}

/** The template of `a`, given `b`, a second encoding of the same answer (its ids drawn afresh). */
export function compileTemplate(a: string, b: string): Template {
  const found: Array<{ start: number; end: number; value: number }> = [];
  const values: Template["values"] = [];
  const idValue = new Map<string, number>();
  // The id-shaped tokens of the second encoding, as a set: a token of `a` also found there is the
  // answer's own text (a lookup per token, where searching `b` for each token was quadratic on an
  // answer full of id-like words).
  const inB = new Set<string>();
  for (const t of idTokens(b)) inB.add(b.slice(t.start, t.end));
  for (const t of idTokens(a)) {
    const tok = a.slice(t.start, t.end);
    if (inB.has(tok)) continue; // in both encodings: the answer's own text, not a generated id
    let v = idValue.get(tok);
    if (v === undefined) {
      v = values.push({ prefix: tok.slice(0, t.prefixEnd - t.start), length: tok.length }) - 1;
      idValue.set(tok, v);
    }
    found.push({ start: t.start, end: t.end, value: v });
  }
  let time = -1;
  for (const m of a.matchAll(TIME)) {
    if (time < 0) time = values.push(null) - 1;
    const start = m.index! + m[0].length - m[1]!.length;
    found.push({ start, end: start + m[1]!.length, value: time });
  }
  found.sort((x, y) => x.start - y.start);
  // Byte offsets: the text before a slot may hold multi-byte characters; the slots themselves are ASCII.
  const slots: Slot[] = [];
  let chars = 0;
  let bytes = 0;
  for (const f of found) {
    bytes += enc.encode(a.slice(chars, f.start)).length;
    slots.push({ offset: bytes, length: f.end - f.start, value: f.value });
    bytes += f.end - f.start;
    chars = f.end;
  }
  return { bytes: enc.encode(a), slots, values };
}

/** The template's bytes with fresh ids and the current time. */
export function fillTemplate(t: Template): Uint8Array {
  const out = t.bytes.slice();
  const now = String(Math.floor(Date.now() / 1000));
  const fresh = t.values.map((v) => (v ? v.prefix + randomToken(v.length - v.prefix.length) : now));
  for (const s of t.slots) {
    const v = fresh[s.value]!;
    if (v.length !== s.length) continue; // a time of another digit count: keep the stored one
    for (let i = 0; i < s.length; i++) out[s.offset + i] = v.charCodeAt(i);
  }
  return out;
}

/** Templates by entry, protocol, mode and delivery fields, in at most `maxBytes` of memory. */
export class ReplayTemplates {
  private lru: LRUCache<string, Template>;
  constructor(maxBytes: number) {
    this.lru = new LRUCache<string, Template>({ maxSize: maxBytes, sizeCalculation: (t) => t.bytes.length + 16 * t.slots.length + 64 });
  }

  /** The hit's bytes; `encode` writes the answer afresh (its ids drawn anew) and runs twice on the first hit only. */
  bytes(key: string, encode: () => string): Uint8Array {
    let t = this.lru.get(key);
    if (!t) {
      t = compileTemplate(encode(), encode());
      this.lru.set(key, t);
    }
    return fillTemplate(t);
  }
}
