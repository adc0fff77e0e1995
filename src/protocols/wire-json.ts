// The body sent to a pass-through lane reuses the client's own bytes: a wire body is the client's
// body with a few top-level fields set (model, stream_options, the output limit, the lane's
// settings), so every other top-level value goes out as the exact text the client sent instead of
// being serialized again (JSON.stringify of a multi-kB agent body was the largest single cost of a
// request). A value is reused only when it is the very value parsed from that text: whatever was
// replaced, added or removed at the top level is written fresh. Nothing on a pass-through path
// changes a nested value in place (the protocols' request builders and the output-limit fitting
// only set top-level fields), which is what makes the reuse exact.
import type { Members } from "../lib/json-scan.ts";
import type { Json } from "./types.ts";

interface Source {
  text: string;
  /** The top-level keys in text order; member i of `members` is keys[i]'s. */
  keys: string[];
  /** The top-level values as parsed, a shallow copy (later changes to the parsed object do not count). */
  parsed: Record<string, unknown>;
  /** Each member's [keyStart, valueStart, valueEnd) in text (json-scan.ts), three numbers per key. */
  members: Members;
}

/** Below this, serializing again costs less than mapping the text: the body reader maps only longer texts. */
export const MIN_REUSE_CHARS = 1024;

/** More top-level keys than this and the text is not mapped (a key's lookup is a linear search). */
const MAX_MAPPED_KEYS = 64;

const sources = new WeakMap<object, Source>();
const wireSources = new WeakMap<object, object>();

/**
 * Remembers the text a client body was parsed from and where its top-level members sit in it (the
 * inference routes' bodies). The text is mapped only when its members pair one to one, in order,
 * with the parsed object's keys, each key written in the text exactly as it reads: a key written
 * twice (JSON.parse keeps the last, an upstream might read the first), a key with an escape, or
 * keys JavaScript orders differently from the text (integer-like ones) leave nothing to reuse.
 */
export function rememberSource(body: Json, text: string, members: Members | null): void {
  if (mapsMembers(body, text, members)) sources.set(body, { text, keys: Object.keys(body), parsed: { ...body }, members: members! });
}

/** True when `members` (json-scan.ts) are `body`'s keys in order, each key's text exactly the key. */
export function mapsMembers(body: Json, text: string, members: Members | null): boolean {
  if (members === null || text.length < MIN_REUSE_CHARS) return false;
  let i = 0;
  for (const k in body) {
    if (i >= members.length || i >= MAX_MAPPED_KEYS * 3) return false;
    const q = members[i]! + 1;
    if (!text.startsWith(k, q) || text.charCodeAt(q + k.length) !== 34 /* " */) return false;
    i += 3;
  }
  return i === members.length;
}
/** Marks `wire` (a new object) as built from the client body `from`, whose text it may reuse. */
export function builtFrom(wire: Json, from: Json): void {
  if (wire !== from && sources.has(from)) wireSources.set(wire, from);
}

/**
 * `body` as JSON: the client's text for every top-level value unchanged since it was parsed. When
 * every member is unchanged and none was added or removed (a pass-through whose lane keeps the
 * model and whose client already asked for usage), that is the client's text itself: no new string.
 */
export function wireJson(body: Json): string {
  const from = wireSources.get(body);
  const src = from ? sources.get(from) : undefined;
  if (!src) return JSON.stringify(body);
  if (unchanged(body, src)) return src.text;
  const { keys, members, parsed } = src;
  let out = "{";
  for (const k in body) {
    const v = body[k];
    if (omitted(v)) continue;
    if (out.length > 1) out += ",";
    const i = asParsed(parsed, k, v) ? keys.indexOf(k) * 3 : -1;
    // Unchanged: the client's own `"key": value` text, as it came.
    if (i >= 0) out += src.text.slice(members[i], members[i + 2]);
    else out += JSON.stringify(k) + ":" + JSON.stringify(v);
  }
  return out + "}";
}

/** What JSON.stringify leaves out of an object. */
const omitted = (v: unknown) => v === undefined || typeof v === "function" || typeof v === "symbol";

/** `v` is the very value parsed for `k` (not replaced since, nor added). */
const asParsed = (parsed: Record<string, unknown>, k: string, v: unknown) => parsed[k] === v && Object.hasOwn(parsed, k);

/** Every member of `body` is as parsed, and the text has no other (a mapped text holds each key once). */
function unchanged(body: Json, { keys, parsed }: Source): boolean {
  let n = 0;
  for (const k in body) {
    const v = body[k];
    if (omitted(v)) continue;
    if (!asParsed(parsed, k, v)) return false;
    n++;
  }
  return n === keys.length;
}
