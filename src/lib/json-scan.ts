// One linear pass over a JSON text before it is parsed: how deep it nests (the body reader refuses
// more than MAX_JSON_DEPTH before JSON.parse and every recursive walk after it could freeze the
// event loop or overflow the stack), and, when asked, where each top-level value of an object
// starts and ends (a pass-through lane reuses the client's own text for values it leaves as they
// are: protocols/wire-json.ts). Both need every bracket outside strings, so an inference body is
// walked once for both. Iterative, no recursion; strings are skipped with native indexOf.

/**
 * Where each top-level member of an object sits in the text, in text order: three numbers per
 * member, [keyStart, valueStart, valueEnd) (keyStart is its key's opening quote, so `"key": value`
 * runs from keyStart to valueEnd). Keys are not read here: the caller pairs the members with the
 * parsed object's keys (protocols/wire-json.ts), which costs no string per member.
 */
export type Members = number[];

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

/**
 * Walks `text` once. NESTS_TOO_DEEP when it nests deeper than `max`; otherwise, with `wantMembers`,
 * the positions of its top-level members (null when the text is not one object), without, null.
 * The positions are right for text that JSON.parse accepts (the caller parses next and uses them
 * only then).
 */
export function scanJson(text: string, max: number, wantMembers: boolean): Members | null | typeof NESTS_TOO_DEEP {
  const n = text.length;
  let members: Members | null = null;
  if (wantMembers) {
    let i = 0;
    while (i < n && isSpace(text.charCodeAt(i))) i++;
    if (text.charCodeAt(i) === 123 /* { */) members = [];
  }
  let depth = 0;
  // At depth 1 of a top-level object: where the key whose value comes next opened (-1: none), and where a nested value began.
  let keyStart = -1;
  let start = -1;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === 34 /* " */) {
      const j = closingQuote(text, i);
      if (j < 0) return members;
      if (members !== null && depth === 1) {
        if (keyStart < 0) keyStart = i;
        else {
          members.push(keyStart, i, j + 1);
          keyStart = -1;
        }
      }
      i = j;
    } else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > max) return NESTS_TOO_DEEP;
      if (depth === 2) start = i;
    } else if (c === 125 /* } */ || c === 93 /* ] */) {
      if (members !== null && depth === 2 && keyStart >= 0) {
        members.push(keyStart, start, i + 1);
        keyStart = -1;
      }
      depth--;
    } else if (members !== null && depth === 1 && keyStart >= 0 && c !== 58 /* : */ && !isSpace(c)) {
      // A number, true, false or null: it runs to the next comma, brace or space.
      let j = i + 1;
      for (; j < n; j++) {
        const d = text.charCodeAt(j);
        if (d === 44 /* , */ || d === 125 /* } */ || isSpace(d)) break;
      }
      members.push(keyStart, i, j);
      keyStart = -1;
      i = j - 1;
    }
  }
  return members;
}
