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
import { randomToken } from "../../lib/crypto.ts";

/** An id this gateway generates: a prefix (`chatcmpl-`, `call_`, `toolu_`, `msg_`, `resp_`, `fc_`, …) and a random token. */
const ID = /[A-Za-z]+[_-][A-Za-z0-9]{20,}/g;
/** A timestamp in whole seconds the encoders write as `now`. */
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

/** The template of `a`, given `b`, a second encoding of the same answer (its ids drawn afresh). */
export function compileTemplate(a: string, b: string): Template {
  const found: Array<{ start: number; end: number; value: number }> = [];
  const values: Template["values"] = [];
  const idValue = new Map<string, number>();
  const fixed = new Set<string>();
  for (const m of a.matchAll(ID)) {
    const tok = m[0];
    if (fixed.has(tok)) continue;
    let v = idValue.get(tok);
    if (v === undefined) {
      if (b.includes(tok)) {
        fixed.add(tok); // in both encodings: the answer's own text, not a generated id
        continue;
      }
      const prefix = /^[A-Za-z]+[_-]/.exec(tok)![0];
      v = values.push({ prefix, length: tok.length }) - 1;
      idValue.set(tok, v);
    }
    found.push({ start: m.index!, end: m.index! + tok.length, value: v });
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
