import { describe, expect, test } from "bun:test";
import { createSseDecoder, MAX_SSE_EVENT_BYTES, writeSse, writeSseJson } from "../../src/protocols/sse.ts";
import { UpstreamStreamError, type SseEvent } from "../../src/protocols/types.ts";
import { fixtureBytes } from "../fixtures/index.ts";
import { parseSse, splitAt } from "./helpers.ts";

function decodeChunks(chunks: (Uint8Array | string)[]): SseEvent[] {
  const d = createSseDecoder();
  const out: SseEvent[] = [];
  for (const c of chunks) out.push(...d.push(c));
  out.push(...d.end());
  return out;
}

const enc = new TextEncoder();

describe("SSE parser", () => {
  test("CRLF-framed stream with multi-byte text decodes identically when split at every byte offset (inside UTF-8 characters and inside \\r\\n\\r\\n)", () => {
    const bytes = fixtureBytes("sse", "crlf-multibyte.sse");
    const whole = decodeChunks([bytes]);
    expect(whole).toHaveLength(2);
    expect(JSON.parse(whole[0]!.data).candidates[0].content.parts[0].text).toBe("Grüße — 晴れ");
    expect(JSON.parse(whole[1]!.data).candidates[0].content.parts[0].text).toBe(" ☀️🎉 ok");
    for (let i = 1; i < bytes.length; i++) {
      expect(decodeChunks(splitAt(bytes, [i]))).toEqual(whole);
    }
  });

  test("a chunk split inside a UTF-8 character keeps the character whole", () => {
    const bytes = fixtureBytes("sse", "crlf-multibyte.sse");
    const emoji = enc.encode("🎉");
    // Offset of the emoji's first byte, then cut after its first, second and third byte.
    let at = -1;
    for (let i = 0; i < bytes.length - 3; i++) if (emoji.every((b, k) => bytes[i + k] === b)) { at = i; break; }
    expect(at).toBeGreaterThan(0);
    const events = decodeChunks(splitAt(bytes, [at + 1, at + 2, at + 3]));
    expect(JSON.parse(events[1]!.data).candidates[0].content.parts[0].text).toBe(" ☀️🎉 ok");
  });

  test("a chunk split inside the blank line between events (\\r | \\n\\r\\n, \\r\\n | \\r\\n, \\r\\n\\r | \\n) yields each event once", () => {
    const bytes = fixtureBytes("sse", "crlf-multibyte.sse");
    const text = new TextDecoder().decode(bytes);
    const sep = enc.encode(text.slice(0, text.indexOf("\r\n\r\n"))).length;
    for (const k of [1, 2, 3]) {
      const events = decodeChunks(splitAt(bytes, [sep + k]));
      expect(events).toHaveLength(2);
    }
    // Every byte delivered alone.
    expect(decodeChunks([...bytes].map((b) => new Uint8Array([b])))).toHaveLength(2);
  });

  test("event names, ids, comments and multi-line data follow the SSE rules", () => {
    const events = decodeChunks([fixtureBytes("sse", "lf-named-events.sse")]);
    expect(events).toEqual([
      { event: "message_start", data: '{"type":"message_start","note":"é"}' },
      { event: "content_block_delta", id: "7", data: '{"type":"content_block_delta",\n"text":"日本語🎌"}' },
      { event: "ping", data: '{"type":"ping"}' },
    ]);
  });

  test("bare CR line endings are line endings", () => {
    expect(decodeChunks([fixtureBytes("sse", "cr-only.sse")]).map((e) => JSON.parse(e.data))).toEqual([{ a: "ü" }, { b: "ß" }]);
  });

  test("a complete last line without the closing blank line still makes an event", () => {
    expect(decodeChunks([fixtureBytes("sse", "no-final-blank-line.sse")]).map((e) => JSON.parse(e.data))).toEqual([{ first: 1 }, { last: "ñ" }]);
  });

  test("a line cut off by the end of the stream is dropped, not parsed", () => {
    expect(decodeChunks([fixtureBytes("sse", "truncated-mid-line.sse")]).map((e) => e.data)).toEqual(['{"first":1}']);
  });
});

describe("SSE writer", () => {
  test("refuses CR or LF in the event name", () => {
    expect(() => writeSse({ event: "a\nb", data: "x" })).toThrow(/CR or LF/);
    expect(() => writeSse({ event: "a\rdata: injected", data: "x" })).toThrow(/CR or LF/);
  });

  test("refuses CR or LF in the id", () => {
    expect(() => writeSse({ id: "1\n", data: "x" })).toThrow(/CR or LF/);
  });

  test("multi-line data is written as several data lines and parses back to the same text", () => {
    const text = writeSse({ event: "note", id: "3", data: "line one\nline two\r\nline three" });
    expect(text).toBe("event: note\nid: 3\ndata: line one\ndata: line two\ndata: line three\n\n");
    expect(parseSse(text)).toEqual([{ event: "note", id: "3", data: "line one\nline two\nline three" }]);
  });

  test("writeSseJson names the event after the data's type", () => {
    expect(writeSseJson({ type: "response.created", sequence_number: 0 })).toBe('event: response.created\ndata: {"type":"response.created","sequence_number":0}\n\n');
  });
});

describe("SSE parser limits", () => {
  test("an event past MAX_SSE_EVENT_BYTES (a line that never ends, or data lines without the blank line) fails the decoder; events completed before it in the same chunk come out first", () => {
    const endless = createSseDecoder();
    const piece = "w".repeat(64 * 1024);
    let thrown: unknown = null;
    let fed = 0;
    try {
      endless.push("data: ");
      for (; fed <= 2 * MAX_SSE_EVENT_BYTES; fed += piece.length) expect(endless.push(piece)).toEqual([]);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(UpstreamStreamError);
    expect(fed).toBeLessThanOrEqual(MAX_SSE_EVENT_BYTES);

    const lines = createSseDecoder();
    expect(() => { for (let i = 0; i < 2 * MAX_SSE_EVENT_BYTES / piece.length; i++) lines.push(`data: ${piece}\n`); }).toThrow(UpstreamStreamError);

    const mixed = createSseDecoder();
    expect(mixed.push(`data: first\n\ndata: ${"v".repeat(MAX_SSE_EVENT_BYTES + 10)}`)).toEqual([{ data: "first" }]);
    expect(() => mixed.push("more")).toThrow(UpstreamStreamError);
  });
});
