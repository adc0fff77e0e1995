// Output tokens counted from the deltas a stream delivered, for an attempt that ends before the
// upstream's own count arrives (CONTRACT §7: an abandoned request pays every output token already
// received). Vendors bill what they generated; without their tokenizer the count errs high: one
// token per three bytes of delta text (English runs about four; CJK text is three bytes a
// character, about a token each), and at least one per non-empty delta (a delta never carries
// less than one token).
import type { Json } from "../../protocols/types.ts";

const QUOTE = 34, BACKSLASH = 92, COLON = 58, SPACE = 32, TAB = 9, CR = 13, LF = 10;

/** Tokens of one delta's text of `bytes` bytes. */
export const tokensOfDelta = (bytes: number): number => (bytes > 0 ? Math.max(1, Math.ceil(bytes / 3)) : 0);

/**
 * The JSON keys whose string values are generated text, per protocol of a pass-through stream, as
 * the bytes searched for: the key and its closing quote, the opening quote checked in place. A
 * needle that opens with `"` is found by stopping at every quote of the JSON, one byte in six:
 * over a 121 kB chat answer a key that is not there took 7–11 µs to rule out that way, 2.5–4 µs
 * from its first letter.
 */
const DELTA_KEYS: Record<string, Buffer[]> = {
  chat: ["content", "reasoning_content", "reasoning", "arguments", "refusal"].map(keyNeedle),
  // Responses: every *.delta event (output text, function-call arguments, reasoning text) carries `delta`;
  // the *.done events repeat the whole text under other keys and are not counted again.
  responses: [keyNeedle("delta")],
  anthropic: ["text", "thinking", "partial_json"].map(keyNeedle),
  // Gemini: text parts (thought summaries included); a functionCall's args are an object, not counted.
  gemini: [keyNeedle("text")],
};

function keyNeedle(key: string): Buffer {
  return Buffer.from(`${key}"`);
}

const isSpace = (b: number | undefined) => b === SPACE || b === TAB || b === CR || b === LF;

/**
 * Output tokens in the delta texts of a region of SSE bytes (whole events) of `protocol`: each key
 * followed by a string value counts its bytes (escaped as sent, which only errs high).
 */
export function countDeltaTokens(buf: Buffer, end: number, protocol: string): number {
  const keys = DELTA_KEYS[protocol];
  if (!keys) return 0;
  let tokens = 0;
  // Indexed, not for…of: this runs for every small region a stream forwards (no iterator per call).
  for (let k = 0; k < keys.length; k++) {
    const key = keys[k]!;
    // From 1: a key needs its opening quote before it (and buf[-1] would be a read out of bounds).
    let pos = buf.indexOf(key, 1);
    while (pos >= 0 && pos < end) {
      let j = pos + key.length;
      if (buf[pos - 1] !== QUOTE) {
        pos = buf.indexOf(key, j);
        continue;
      }
      while (j < end && isSpace(buf[j])) j++;
      if (buf[j] === COLON) {
        j++;
        while (j < end && isSpace(buf[j])) j++;
        if (buf[j] === QUOTE) {
          const start = ++j;
          while (j < end && buf[j] !== QUOTE) j += buf[j] === BACKSLASH ? 2 : 1;
          tokens += tokensOfDelta(j - start);
        }
      }
      pos = buf.indexOf(key, j);
    }
  }
  return tokens;
}

/** Output tokens in the deltas of one decoded chat chunk (the translating relay's chunks). */
export function chunkDeltaTokens(chunk: Json): number {
  const choices = chunk.choices;
  if (!Array.isArray(choices)) return 0;
  let tokens = 0;
  for (const c of choices) {
    const d = c?.delta;
    if (!d || typeof d !== "object") continue;
    for (const k of ["content", "reasoning_content", "reasoning", "refusal"]) {
      if (typeof d[k] === "string") tokens += tokensOfDelta(Buffer.byteLength(d[k]));
    }
    if (Array.isArray(d.tool_calls)) {
      for (const t of d.tool_calls) {
        const a = t?.function?.arguments;
        if (typeof a === "string") tokens += tokensOfDelta(Buffer.byteLength(a));
      }
    }
  }
  return tokens;
}
