// The body sent to a pass-through lane reuses the client's own bytes: a wire body is the client's
// body with a few top-level fields set (model, stream_options, the output limit, the lane's
// settings), so every other top-level value goes out as the exact text the client sent instead of
// being serialized again (JSON.stringify of a multi-kB agent body was the largest single cost of a
// request). A value is reused only when it is the very value parsed from that text: whatever was
// replaced, added or removed at the top level is written fresh. Nothing on a pass-through path
// changes a nested value in place (the protocols' request builders and the output-limit fitting
// only set top-level fields), which is what makes the reuse exact.
import type { Json } from "./types.ts";

interface Source {
  text: string;
  /** Each top-level key's value as parsed (later changes to the parsed object do not count). */
  parsed: Map<string, unknown>;
  /** Each top-level key's value as [start, end) in text; null when the text could not be mapped. */
  spans?: Map<string, [number, number]> | null;
}

/** Below this, serializing again costs less than mapping the text. */
const MIN_REUSE_CHARS = 1024;

const sources = new WeakMap<object, Source>();
const wireSources = new WeakMap<object, object>();

/** Remembers the text a client body was parsed from (the inference routes' bodies). */
export function rememberSource(body: Json, text: string): void {
  if (text.length < MIN_REUSE_CHARS) return;
  sources.set(body, { text, parsed: new Map(Object.entries(body)) });
}

/** Marks `wire` (a new object) as built from the client body `from`, whose text it may reuse. */
export function builtFrom(wire: Json, from: Json): void {
  if (wire !== from && sources.has(from)) wireSources.set(wire, from);
}

/** `body` as JSON: the client's text for every top-level value unchanged since it was parsed. */
export function wireJson(body: Json): string {
  const from = wireSources.get(body);
  const src = from ? sources.get(from) : undefined;
  if (!src) return JSON.stringify(body);
  if (src.spans === undefined) src.spans = topLevelSpans(src.text);
  const spans = src.spans;
  if (!spans) return JSON.stringify(body);
  let out = "{";
  for (const k in body) {
    const v = body[k];
    if (v === undefined || typeof v === "function" || typeof v === "symbol") continue;
    const span = spans.get(k);
    const text = span && src.parsed.get(k) === v && src.parsed.has(k) ? src.text.slice(span[0], span[1]) : JSON.stringify(v);
    out += (out.length > 1 ? "," : "") + JSON.stringify(k) + ":" + text;
  }
  return out + "}";
}

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;

/**
 * Where each top-level value of a JSON object's text starts and ends. Null when the text is not
 * one object or a key needs unescaping (then nothing is reused). A duplicated key maps to its last
 * value, as JSON.parse keeps the last.
 */
export function topLevelSpans(text: string): Map<string, [number, number]> | null {
  const n = text.length;
  let i = 0;
  while (i < n && isSpace(text.charCodeAt(i))) i++;
  if (text.charCodeAt(i) !== 123 /* { */) return null;
  i++;
  const spans = new Map<string, [number, number]>();
  for (;;) {
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    if (text.charCodeAt(i) === 125 /* } */) return spans;
    if (text.charCodeAt(i) !== 34 /* " */) return null;
    const keyEnd = stringEnd(text, i);
    if (keyEnd < 0) return null;
    const key = text.slice(i + 1, keyEnd - 1);
    if (key.includes("\\")) return null;
    i = keyEnd;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    if (text.charCodeAt(i) !== 58 /* : */) return null;
    i++;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    const start = i;
    const end = valueEnd(text, i);
    if (end < 0) return null;
    spans.set(key, [start, end]);
    i = end;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    const c = text.charCodeAt(i);
    if (c === 44 /* , */) i++;
    else if (c === 125 /* } */) return spans;
    else return null;
  }
}

/** End (exclusive) of the string starting at the quote at i, or -1. */
function stringEnd(text: string, i: number): number {
  let j = i;
  for (;;) {
    j = text.indexOf('"', j + 1);
    if (j < 0) return -1;
    let k = j - 1;
    while (text.charCodeAt(k) === 92 /* \ */) k--;
    if (((j - 1 - k) & 1) === 0) return j + 1;
  }
}

/** End (exclusive) of the value starting at i: a string, an object or array (brackets matched, strings skipped), or a literal. */
function valueEnd(text: string, i: number): number {
  const c = text.charCodeAt(i);
  if (c === 34) return stringEnd(text, i);
  const n = text.length;
  if (c === 123 || c === 91) {
    let depth = 0;
    for (let j = i; j < n; j++) {
      const d = text.charCodeAt(j);
      if (d === 34) {
        j = stringEnd(text, j) - 1;
        if (j < 0) return -1;
      } else if (d === 123 || d === 91) depth++;
      else if (d === 125 || d === 93) {
        if (--depth === 0) return j + 1;
      }
    }
    return -1;
  }
  let j = i;
  while (j < n) {
    const d = text.charCodeAt(j);
    if (d === 44 || d === 125 || isSpace(d)) break;
    j++;
  }
  return j > i ? j : -1;
}
