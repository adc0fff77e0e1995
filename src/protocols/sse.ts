// Server-sent events for the translation path: bytes → text → lines → events, and back. The one
// SSE decoder in production (the translating tap, relay/stream/translate.ts, feeds it); the
// pass-through hot path never comes here, its tap only finds event boundaries (sse-tap.ts).
//
// Layers, as in openai-node: a streaming TextDecoder turns bytes into text (a chunk that ends
// inside a multi-byte UTF-8 character keeps its tail for the next chunk), eventsource-parser
// turns text into events (it holds back a trailing `\r` until it knows whether `\n` follows, so
// a chunk split inside `\r\n\r\n` is one terminator, not two), and JSON parsing is left to the
// codec that knows what the data means.
import { createParser, type EventSourceParser } from "eventsource-parser";
import { UpstreamStreamError, type SseEvent } from "./types.ts";

/**
 * The largest SSE event an upstream may send (a base64 image in a partial-image event is a few
 * MB). Past it the stream is broken: an upstream that never ends an event (garbage, or a hostile
 * bridge) would otherwise make the gateway hold everything it sends, stream after stream.
 */
export const MAX_SSE_EVENT_BYTES = 16 * 1024 * 1024;

export const eventTooLarge = () =>
  new UpstreamStreamError(`the upstream sent an event of more than ${MAX_SSE_EVENT_BYTES / 1024 / 1024} MiB, or bytes that never end an event`);

/** Incremental SSE decoder: feed byte (or text) chunks, get the events they complete; throws past MAX_SSE_EVENT_BYTES. */
export interface SseDecoder {
  push(chunk: Uint8Array | string): SseEvent[];
  /** End of input: dispatches an event whose last line was complete but lacked the blank line; drops a cut-off line. */
  end(): SseEvent[];
}

export function createSseDecoder(): SseDecoder {
  const text = new TextDecoder("utf-8");
  let out: SseEvent[] = [];
  // Last character fed: tells end() whether the input stopped at a line boundary.
  let last = "";
  const parser: EventSourceParser = createParser({
    // Counted in characters of the event not yet complete (its data and its unfinished line).
    maxBufferSize: MAX_SSE_EVENT_BYTES,
    onError(e) {
      if (e.type === "max-buffer-size-exceeded") throw eventTooLarge();
    },
    onEvent(ev) {
      const e: SseEvent = { data: ev.data };
      if (ev.event !== undefined) e.event = ev.event;
      if (ev.id !== undefined) e.id = ev.id;
      out.push(e);
    },
  });
  const feed = (s: string) => {
    if (s.length === 0) return;
    last = s[s.length - 1]!;
    parser.feed(s);
  };
  const take = () => {
    const r = out;
    out = [];
    return r;
  };
  // An event past the limit: the events completed before it in the same chunk are returned first.
  let failed: Error | null = null;
  return {
    push(chunk) {
      if (failed) throw failed;
      try {
        feed(typeof chunk === "string" ? chunk : text.decode(chunk, { stream: true }));
      } catch (e) {
        if (!out.length) throw e;
        failed = e as Error;
      }
      return take();
    },
    end() {
      if (failed) throw failed;
      // Flush a dangling partial character (becomes U+FFFD, as any decoder would).
      feed(text.decode());
      // A complete last line without the closing blank line still makes an event (some upstreams
      // end that way); a line cut off mid-way is a truncated stream and is dropped.
      if (last === "\n") parser.feed("\n");
      else if (last === "\r") parser.feed("\n\n");
      last = "";
      return take();
    },
  };
}

const LINE_BREAK = /[\r\n]/;

/**
 * One SSE event as text. `event` and `id` must not contain CR or LF (a line break there would
 * let a value inject fields or whole events), so they throw; `data` may span lines and is
 * written as one `data:` line per line, which a parser joins back with `\n`.
 */
export function writeSse(ev: SseEvent): string {
  let s = "";
  if (ev.event !== undefined) {
    if (LINE_BREAK.test(ev.event)) throw new TypeError("SSE event name must not contain CR or LF");
    s += `event: ${ev.event}\n`;
  }
  if (ev.id !== undefined) {
    if (LINE_BREAK.test(ev.id)) throw new TypeError("SSE id must not contain CR or LF");
    s += `id: ${ev.id}\n`;
  }
  for (const line of ev.data.split(/\r\n|\r|\n/)) s += `data: ${line}\n`;
  return s + "\n";
}

/** `event: <type>` + `data: <json>`: the framing of Anthropic and Responses streams. */
export function writeSseJson(data: { type?: unknown } & Record<string, unknown>, event?: string): string {
  return writeSse({ event: event ?? (typeof data.type === "string" ? data.type : undefined), data: JSON.stringify(data) });
}
