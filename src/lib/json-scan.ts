// One linear pass over a JSON text before it is parsed: how deep it nests (the body reader refuses
// more than MAX_JSON_DEPTH before JSON.parse and every recursive walk after it could freeze the
// event loop or overflow the stack), and, when asked, where each top-level value of an object
// starts and ends (a pass-through lane reuses the client's own text for values it leaves as they
// are: protocols/wire-json.ts). Both need every bracket outside strings, so an inference body is
// walked once for both. Iterative, no recursion; strings are skipped with native indexOf.

/** Each top-level key's value as [start, end) in the text, and where the key's opening quote is (its `"key":` runs from there to start). */
export type Spans = Map<string, [start: number, end: number, keyStart: number]>;

const isSpace = (c: number) => c === 32 || c === 9 || c === 10 || c === 13;

/** Closing quote of the string opening at i (an odd run of backslashes before a quote escapes it), or -1. */
function closingQuote(text: string, i: number): number {
  let j = i;
  for (;;) {
    j = text.indexOf('"', j + 1);
    if (j < 0) return -1;
    let k = j - 1;
    while (text.charCodeAt(k) === 92 /* \ */) k--;
    if (((j - 1 - k) & 1) === 0) return j;
  }
}

/** True when `text` holds at most `limit` `{` and `[` characters, strings included. */
function bracketsAtMost(text: string, limit: number): boolean {
  let count = 0;
  for (let i = text.indexOf("{"); i >= 0; i = text.indexOf("{", i + 1)) if (++count > limit) return false;
  for (let i = text.indexOf("["); i >= 0; i = text.indexOf("[", i + 1)) if (++count > limit) return false;
  return true;
}

/**
 * True when `text`, read as JSON, opens more than `max` objects/arrays inside one another.
 * Malformed text is not judged here; JSON.parse refuses it afterwards.
 */
export function nestsDeeperThan(text: string, max: number): boolean {
  // Most bodies hold fewer brackets in all than the limit, which no nesting of them can pass:
  // counted with native indexOf, that settles them without the character loop.
  if (bracketsAtMost(text, max)) return false;
  return scanJson(text, max, false) === NESTS_TOO_DEEP;
}

export const NESTS_TOO_DEEP = Symbol("nests too deep");

/** Adds a top-level member's span; a key seen before gives up the spans (null). */
function member(spans: Spans, key: string, start: number, end: number, keyStart: number): Spans | null {
  if (spans.has(key)) return null;
  return spans.set(key, [start, end, keyStart]);
}

/**
 * Walks `text` once. NESTS_TOO_DEEP when it nests deeper than `max`; otherwise, with `wantSpans`, the
 * spans of its top-level values (null when the text is not one object, a key holds an escape or
 * a key comes twice: then nothing is reused), without, null. The spans are right for text that
 * JSON.parse accepts (the caller parses next and uses them only then). With spans, the text holds
 * exactly one member per key, so a body whose every member is unchanged is the text itself.
 */
export function scanJson(text: string, max: number, wantSpans: boolean): Spans | null | typeof NESTS_TOO_DEEP {
  const n = text.length;
  let spans: Spans | null = null;
  if (wantSpans) {
    let i = 0;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    if (text.charCodeAt(i) === 123 /* { */) spans = new Map();
  }
  let depth = 0;
  // At depth 1 of a top-level object: the key whose value comes next, and where a nested value began.
  let key: string | null = null;
  let keyStart = -1;
  let start = -1;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      const j = closingQuote(text, i);
      if (j < 0) return spans;
      if (spans !== null && depth === 1) {
        if (key === null) {
          key = text.slice(i + 1, j);
          keyStart = i;
          if (key.includes("\\")) spans = null;
        } else {
          spans = member(spans, key, i, j + 1, keyStart);
          key = null;
        }
      }
      i = j;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return NESTS_TOO_DEEP;
      if (depth === 2) start = i;
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      if (spans !== null && depth === 2 && key !== null) {
        spans = member(spans, key, start, i + 1, keyStart);
        key = null;
      }
      depth--;
    } else if (spans !== null && depth === 1 && key !== null && c !== 58 /* : */ && !isSpace(c)) {
      // A number, true, false or null: it runs to the next comma, brace or space.
      let j = i + 1;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 44 /* , */ || d === 125 /* } */ || isSpace(d)) break;
      }
      spans = member(spans, key, i, j, keyStart);
      key = null;
      i = j - 1;
    }
  }
  return spans;
}
