// The pass-through tap on its own: bytes in, the same bytes out (minus a hidden event), usage
// read off the stream, whatever way the upstream's chunks are cut.
import { describe, expect, test } from "bun:test";
import { chatUpstreamCodec } from "../../src/protocols/chat/index.ts";
import { responsesUpstreamCodec } from "../../src/protocols/responses/index.ts";
import { eventData, PassThroughTap } from "../../src/relay/stream/sse-tap.ts";
import { FailedAfterOutput, type TapBytes } from "../../src/relay/stream/tap.ts";
import { MAX_SSE_EVENT_BYTES } from "../../src/protocols/sse.ts";
import { UpstreamStreamError } from "../../src/protocols/types.ts";

const enc = new TextEncoder();
const dec = new TextDecoder();
/** One read's client bytes as one buffer (the tap may hand a read's events back in pieces). */
const bytesOf = (o: TapBytes | null): Uint8Array => (o === null ? new Uint8Array() : o instanceof Uint8Array ? o : Buffer.concat(o));

const usageEvent = 'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":11,"completion_tokens":7,"total_tokens":18,"prompt_tokens_details":{"cached_tokens":4}}}\n\n';
const stream = [
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":"ünï \\"usage\\": {\\"x\\":1} ✓"},"finish_reason":null}],"usage":null}\n\n',
  ": keep-alive from upstream\n\n",
  'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage" : null}\r\n\r\n',
  usageEvent,
  "data: [DONE]\n\n",
].join("");

function run(splits: number[], wantsUsage: boolean) {
  const bytes = enc.encode(stream);
  const tap = new PassThroughTap(chatUpstreamCodec, wantsUsage ? { stream_options: { include_usage: true } } : {});
  const out: Uint8Array[] = [];
  let at = 0;
  for (const s of [...splits, bytes.length]) {
    const o = tap.push(bytes.slice(at, s));
    if (o) out.push(bytesOf(o));
    at = s;
  }
  const t = tap.end();
  if (t) out.push(bytesOf(t));
  return { text: out.map((o) => dec.decode(o)).join(""), tap };
}

describe("pass-through tap", () => {
  test("usage tap: same bytes out and usage read, for every split point of the stream", () => {
    const n = enc.encode(stream).length;
    for (let i = 1; i < n; i++) {
      const { text, tap } = run([i], true);
      expect(text).toBe(stream);
      expect(tap.usage).toEqual({ prompt_tokens: 11, completion_tokens: 7, cached_tokens: 4, cache_write_tokens: 0 });
    }
  });

  test("fed one byte at a time, each event goes out the moment its blank line completes (never held for a later read)", () => {
    const bytes = enc.encode(stream);
    const tap = new PassThroughTap(chatUpstreamCodec, { stream_options: { include_usage: true } });
    let out = "";
    const ends: number[] = [];
    for (const m of stream.matchAll(/\n\n|\r\n\r\n/g)) ends.push(enc.encode(stream.slice(0, m.index + m[0].length)).length);
    for (let i = 0; i < bytes.length; i++) {
      const o = tap.push(bytes.subarray(i, i + 1));
      if (o) out += dec.decode(bytesOf(o));
      if (ends.includes(i + 1)) expect(enc.encode(out).length).toBe(i + 1);
    }
    expect(out).toBe(stream);
  });

  test("a read that completes a carried event joins only that event: the events after it go out as a view of the read", () => {
    const ev = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}],"usage":null}\n\n`;
    const first = ev(0);
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    expect(tap.push(enc.encode(first.slice(0, 20)))).toBeNull();
    const later = Array.from({ length: 50 }, (_, i) => ev(i + 1)).join("");
    const read = enc.encode(first.slice(20) + later + "data: [DO");
    const out = tap.push(read);
    expect(Array.isArray(out)).toBe(true);
    const [head, rest] = out as Uint8Array[];
    expect(dec.decode(head)).toBe(first);
    expect(dec.decode(rest)).toBe(later);
    expect(rest!.buffer).toBe(read.buffer); // not copied
    expect(dec.decode(bytesOf(tap.push(enc.encode("NE]\n\n"))))).toBe("data: [DONE]\n\n");
  });

  test("the usage event rewritten with the cost goes out beside views of the events around it, not a copy of the read", () => {
    const ev = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"t${i}"}}],"usage":null}\n\n`;
    const before = Array.from({ length: 20 }, (_, i) => ev(i)).join("");
    const read = enc.encode(before + usageEvent + "data: [DONE]\n\n");
    const tap = new PassThroughTap(chatUpstreamCodec, { stream_options: { include_usage: true } }, undefined, [], () => 0.5);
    const out = tap.push(read) as Uint8Array[];
    expect(Array.isArray(out)).toBe(true);
    expect(out[0]!.buffer).toBe(read.buffer);
    expect(dec.decode(out[0])).toBe(before);
    expect(JSON.parse(dec.decode(out[1]).slice(6)).usage.cost).toBe(0.5);
    expect(dec.decode(out[2])).toBe("data: [DONE]\n\n");
  });

  test("usage tap: byte-by-byte chunks (splits inside UTF-8 characters and inside \\r\\n\\r\\n)", () => {
    const n = enc.encode(stream).length;
    const { text, tap } = run(Array.from({ length: n - 1 }, (_, i) => i + 1), true);
    expect(text).toBe(stream);
    expect(tap.usage?.prompt_tokens).toBe(11);
  });

  test("the include_usage chunk is cut out whole for a client that did not ask, at every split point", () => {
    const expected = stream.replace(usageEvent, "");
    const n = enc.encode(stream).length;
    for (let i = 1; i < n; i += 3) {
      const { text, tap } = run([i, Math.min(n - 1, i + 40)], false);
      expect(text).toBe(expected);
      expect(tap.usage?.completion_tokens).toBe(7);
    }
  });

  test("an escaped \"usage\" inside content is not mistaken for the usage block; delivered marks data only", () => {
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    expect(dec.decode(bytesOf(tap.push(enc.encode(": PROCESSING\n\n"))))).toBe(": PROCESSING\n\n");
    expect(tap.delivered).toBe(false);
    tap.push(enc.encode('data: {"choices":[{"delta":{"content":"\\"usage\\":{\\"prompt_tokens\\":5}"}}]}\n\n'));
    expect(tap.delivered).toBe(true);
    expect(tap.usage).toBeNull();
  });

  test("a partial event is held back until complete, and flushed as-is at the end (riding along with the broken-stream failure: no [DONE], CONTRACT §8)", () => {
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    expect(tap.push(enc.encode('data: {"choices":[]'))).toBeNull();
    let thrown: any = null;
    try { tap.end(); } catch (e) { thrown = e; }
    expect(thrown?.name).toBe("FailedAfterOutput");
    expect(dec.decode(thrown.output)).toBe('data: {"choices":[]');
  });

  test("CONTRACT §8: a stream whose last event is [DONE] ends cleanly, also when [DONE] arrives without its blank line", () => {
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    expect(tap.push(enc.encode('data: {"choices":[{"delta":{"content":"x"}}]}\n\n'))).not.toBeNull();
    expect(tap.push(enc.encode("data: [DONE]"))).toBeNull();
    expect(dec.decode(bytesOf(tap.end()))).toBe("data: [DONE]");
  });
});

describe("an event's data (the SSE field rules), on the one-line fast path and off it", () => {
  const data = (s: string) => eventData(enc.encode(s));
  test("one data line, with or without its space, its blank line, or a CR before the LF", () => {
    expect(data('data: {"a":1}\n\n')).toBe('{"a":1}');
    expect(data('data:{"a":1}\n\n')).toBe('{"a":1}');
    expect(data("data: [DONE]")).toBe("[DONE]");
    expect(data("data: [DONE]\r\n\r\n")).toBe("[DONE]");
    expect(data("data:  two spaces\n\n")).toBe(" two spaces");
    expect(data("data: ünï ✓\n\n")).toBe("ünï ✓");
  });
  test("several lines join with \\n; a lone CR ends a line; other fields and comments are left out", () => {
    expect(data("data: a\ndata: b\n\n")).toBe("a\nb");
    expect(data("data: a\rdata: b\n\n")).toBe("a\nb");
    expect(data("event: x\ndata: a\n\n")).toBe("a");
    expect(data(": comment\ndata: a\n\n")).toBe("a");
    expect(data("data\n\n")).toBe("");
    expect(data("datax: a\n\n")).toBe("");
  });
});

describe("delta count of an answer cut short (CONTRACT §7), counted only when asked", () => {
  test("the count over a long stream is the same whether asked once at the end or after every chunk", () => {
    const delta = (i: number) => `data: {"choices":[{"index":0,"delta":{"content":"token ${i} of a long answer, ${"x".repeat(i % 40)}"}}]}\n\n`;
    const lazy = new PassThroughTap(chatUpstreamCodec, {});
    const eager = new PassThroughTap(chatUpstreamCodec, {});
    let eagerSeen = 0;
    // ~150 kB: past the batch the tap keeps uncounted, so batches and the remainder both count.
    for (let i = 0; i < 2000; i++) {
      lazy.push(enc.encode(delta(i)));
      eager.push(enc.encode(delta(i)));
      eagerSeen = eager.outputTokens;
    }
    let want = 0;
    for (let i = 0; i < 2000; i++) want += Math.max(1, Math.ceil(`token ${i} of a long answer, ${"x".repeat(i % 40)}`.length / 3));
    expect(eagerSeen).toBe(want);
    expect(lazy.outputTokens).toBe(want);
    // The same answer read in 8 kB pieces: large regions wait uncounted (in batches) until asked.
    const bytes = enc.encode(Array.from({ length: 2000 }, (_, i) => delta(i)).join(""));
    const pieces = new PassThroughTap(chatUpstreamCodec, {});
    for (let at = 0; at < bytes.length; at += 8192) pieces.push(bytes.subarray(at, at + 8192));
    expect(pieces.outputTokens).toBe(want);

  });
});

describe("pass-through tap: the lane's secret never reaches the client (README \"Secrets\", CONTRACT §8)", () => {
  const KEY = "Zq7xKp2mWv9tLr4sNb6yHc3dFg8jUe5aQw1o";
  const content = 'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"hi \\"error\\" talk"},"finish_reason":null}]}\n\n';

  function through(text: string, cuts: number[]) {
    const bytes = enc.encode(text);
    const tap = new PassThroughTap(chatUpstreamCodec, {}, undefined, [KEY]);
    let out = "";
    let at = 0;
    for (const c of [...cuts, bytes.length]) {
      const o = tap.push(bytes.slice(at, c));
      if (o) out += dec.decode(bytesOf(o));
      at = c;
    }
    try {
      const t = tap.end();
      if (t) out += dec.decode(bytesOf(t));
    } catch {}
    return out;
  }

  test("an error event mid-stream that echoes part of the key is redacted, however the chunks are cut; the content before it is untouched", () => {
    const echo = `data: {"error":{"message":"Incorrect API key provided: ${KEY.slice(2, 30)}","type":"invalid_request_error"}}\n\n`;
    const text = content + echo;
    for (const cuts of [[], [content.length], [content.length + 40], [10, content.length + 5, content.length + 60]]) {
      const out = through(text, cuts);
      expect(out.startsWith(content)).toBe(true);
      expect(out).toContain("[redacted]");
      for (let i = 0; i + 8 <= KEY.length; i++) expect(out).not.toContain(KEY.slice(i, i + 8));
    }
  });

  test("the whole key in any event is redacted; a stream without it passes through byte for byte", () => {
    const leak = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"key=${KEY}"},"finish_reason":null}]}\n\n`;
    expect(through(content + leak + "data: [DONE]\n\n", [])).not.toContain(KEY);
    const clean = content + "data: [DONE]\n\n";
    expect(through(clean, [7])).toBe(clean);
  });

  test("Responses events carrying `\"error\":null` pass byte for byte, however large (the scrub is not theirs); an error event past 16 KiB is still redacted", () => {
    const completed = `event: response.completed\ndata: ${JSON.stringify({ type: "response.completed", sequence_number: 9, response: { id: "resp_1", status: "completed", error: null, output: [{ type: "message", content: [{ type: "output_text", text: "z".repeat(5 * 1024 * 1024) }] }], usage: { input_tokens: 3, output_tokens: 4, total_tokens: 7 } } })}\n\n`;
    const bytes = enc.encode(completed);
    const tap = new PassThroughTap(responsesUpstreamCodec, {}, undefined, [KEY]);
    const out: Uint8Array[] = [];
    for (let at = 0; at < bytes.length; at += 65536) {
      const o = tap.push(bytes.subarray(at, at + 65536));
      if (o) out.push(bytesOf(o));
    }
    const t = tap.end();
    if (t) out.push(bytesOf(t));
    expect(Buffer.concat(out).equals(Buffer.from(bytes))).toBe(true);
    expect(tap.served).toBe(true);
    const failed = `event: response.failed\ndata: ${JSON.stringify({ type: "response.failed", response: { status: "failed", error: { message: `${"x".repeat(40_000)} key ${KEY}` } } })}\n\n`;
    const ftap = new PassThroughTap(responsesUpstreamCodec, {}, undefined, [KEY]);
    const got = dec.decode(bytesOf(ftap.push(enc.encode(failed))));
    expect(got).not.toContain(KEY.slice(0, 8));
    expect(got).toBe(failed.replace(KEY, "[redacted]"));
    expect(ftap.served).toBe(false);
  });

  test("an event carried across many chunks (one byte each, then in pieces) comes out once, whole, wherever its blank line falls", () => {
    const big = `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"${"y".repeat(3000)}"},"finish_reason":null}]}\r\n\r\n`;
    const text = big + stream;
    const bytes = enc.encode(text);
    for (const size of [1, 2, 3, 7, 1000]) {
      const tap = new PassThroughTap(chatUpstreamCodec, { stream_options: { include_usage: true } });
      const out: string[] = [];
      for (let at = 0; at < bytes.length; at += size) {
        const o = tap.push(bytes.slice(at, at + size));
        if (o) out.push(dec.decode(bytesOf(o)));
      }
      const t = tap.end();
      if (t) out.push(dec.decode(bytesOf(t)));
      expect(out.join("")).toBe(text);
      expect(tap.usage?.completion_tokens).toBe(7);
    }
  });

  test("an upstream that never ends an event breaks the stream past MAX_SSE_EVENT_BYTES instead of being held in memory", () => {
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    const piece = enc.encode(`data: ${"z".repeat(64 * 1024 - 6)}`);
    let thrown: unknown = null;
    let fed = 0;
    try {
      for (;;) {
        expect(tap.push(fed === 0 ? piece : piece.subarray(6))).toBeNull();
        fed += fed === 0 ? piece.length : piece.length - 6;
        if (fed > 2 * MAX_SSE_EVENT_BYTES) break;
      }
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(UpstreamStreamError);
    expect((thrown as Error).message).toContain("never end an event");
    expect(fed).toBeLessThanOrEqual(MAX_SSE_EVENT_BYTES);
  });

  test("the events completed in the read that overflows still reach the client, ahead of the failure", () => {
    const tap = new PassThroughTap(chatUpstreamCodec, {});
    const ok = 'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"fine"},"finish_reason":null}]}\n\n';
    let thrown: unknown = null;
    try {
      tap.push(enc.encode(ok + "data: " + "q".repeat(MAX_SSE_EVENT_BYTES)));
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toBeInstanceOf(FailedAfterOutput);
    expect(dec.decode(bytesOf((thrown as FailedAfterOutput).output))).toBe(ok);
    expect((thrown as FailedAfterOutput).failure).toBeInstanceOf(UpstreamStreamError);
  });
});
