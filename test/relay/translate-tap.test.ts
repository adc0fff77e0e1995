// The translating tap on its own (relay/stream/translate.ts over the one SSE decoder,
// protocols/sse.ts): an Anthropic upstream stream turned into chat chunks gives the same client
// bytes however the upstream's bytes are cut: CRLF split between chunks, a UTF-8 character split
// between chunks, an event spread over 1-byte chunks, several events in one chunk, and a last
// event without its closing blank line.
import { describe, expect, test } from "bun:test";
import { anthropicCodec } from "../../src/protocols/anthropic/index.ts";
import { chatClientCodec } from "../../src/protocols/chat/index.ts";
import { TranslateTap } from "../../src/relay/stream/translate.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();

const events = [
  { type: "message_start", message: { id: "msg_1", type: "message", role: "assistant", model: "claude-x", content: [], stop_reason: null, usage: { input_tokens: 12, output_tokens: 1 } } },
  { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } },
  { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "héllo ✓ wörld 🚀" } },
  { type: "content_block_stop", index: 0 },
  { type: "message_delta", delta: { stop_reason: "end_turn" }, usage: { output_tokens: 9 } },
  { type: "message_stop" },
];
const frame = (e: { type: string }, nl = "\n") => `event: ${e.type}${nl}data: ${JSON.stringify(e)}${nl}${nl}`;
const LF = events.map((e) => frame(e)).join("");
const CRLF = events.map((e) => frame(e, "\r\n")).join("");

function translate(text: string, cut: (bytes: Uint8Array) => Uint8Array[]) {
  const tap = new TranslateTap(anthropicCodec.streamDecoder!({ model: "claude-x", id: "chatcmpl-t", created: 1 }), chatClientCodec.streamEncoder({ stream_options: { include_usage: true } }));
  let out = "";
  for (const piece of cut(enc.encode(text))) {
    const o = tap.push(piece);
    if (o) out += dec.decode(o);
  }
  const t = tap.end();
  if (t) out += dec.decode(t);
  return { out, usage: tap.usage };
}

const whole = (b: Uint8Array) => [b];
const at = (...points: number[]) => (b: Uint8Array) => {
  const out: Uint8Array[] = [];
  let from = 0;
  for (const p of [...points, b.length]) {
    out.push(b.slice(from, p));
    from = p;
  }
  return out;
};
const bytewise = (b: Uint8Array) => Array.from(b, (x) => Uint8Array.of(x));

describe("translating tap: awkward splits", () => {
  const reference = translate(LF, whole);

  test("the reference translation is a complete chat stream with the text and usage", () => {
    expect(reference.out).toContain("héllo ✓ wörld 🚀");
    expect(reference.out.trimEnd().endsWith("data: [DONE]")).toBe(true);
    expect(reference.usage).toMatchObject({ prompt_tokens: 12, completion_tokens: 9 });
  });

  test("several events in one chunk and one event over 1-byte chunks give the same bytes", () => {
    expect(translate(LF, bytewise).out).toBe(reference.out);
  });

  test("CRLF line endings, split between \\r and \\n at every point, give the same bytes", () => {
    expect(translate(CRLF, whole).out).toBe(reference.out);
    const bytes = enc.encode(CRLF);
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] !== 13) continue;
      expect(translate(CRLF, at(i + 1)).out).toBe(reference.out);
    }
  });

  test("a multi-byte UTF-8 character split between chunks is put back together", () => {
    const bytes = enc.encode(LF);
    const emoji = LF.indexOf("🚀");
    const start = enc.encode(LF.slice(0, emoji)).length;
    for (let k = 1; k < 4; k++) expect(translate(LF, at(start + k)).out).toBe(reference.out);
    expect(bytes.length).toBeGreaterThan(start + 4);
  });

  test("a last event whose final line ends without the blank line still counts; one cut mid-line is a broken stream", () => {
    expect(translate(LF.slice(0, -1), whole).out).toBe(reference.out);
    // message_stop cut inside its data line: dropped, so the stream ended without its terminator.
    expect(() => translate(LF.slice(0, LF.lastIndexOf("data:") + 8), whole)).toThrow(/without message_stop/);
  });
});
