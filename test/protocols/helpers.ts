// Test helpers: run fixtures through decoders, fold chat chunks into one message, parse SSE text.
import { createSseDecoder } from "../../src/protocols/sse.ts";
import type { ChunkDecoder, Json, SseEvent } from "../../src/protocols/types.ts";

export const OPTS = { model: "requested-model", id: "chatcmpl-test", created: 1_700_000_000 };

/** Every chunk a decoder produces for these events, end() included. */
export function decodeAll(decoder: ChunkDecoder, events: SseEvent[]): Json[] {
  const out: Json[] = [];
  for (const ev of events) out.push(...decoder.push(ev));
  out.push(...decoder.end());
  return out;
}

export interface Folded {
  role: string | null;
  content: string;
  refusal: string;
  toolCalls: { id: string; name: string; arguments: string }[];
  finishReason: string | null;
  chunks: number;
}

/** Folds chat.completion.chunk objects of choice `index` the way an OpenAI client library does. */
export function fold(chunks: Json[], index = 0): Folded {
  const f: Folded = { role: null, content: "", refusal: "", toolCalls: [], finishReason: null, chunks: 0 };
  for (const c of chunks) {
    if (c.object !== "chat.completion.chunk") throw new Error(`not a chunk: ${JSON.stringify(c)}`);
    for (const ch of c.choices ?? []) {
      if ((ch.index ?? 0) !== index) continue;
      f.chunks++;
      const d = ch.delta ?? {};
      if (d.role) f.role = d.role;
      if (typeof d.content === "string") f.content += d.content;
      if (typeof d.refusal === "string") f.refusal += d.refusal;
      for (const tc of d.tool_calls ?? []) {
        const slot = (f.toolCalls[tc.index] ??= { id: "", name: "", arguments: "" });
        if (tc.id) slot.id = tc.id;
        if (tc.function?.name) slot.name = tc.function.name;
        if (tc.function?.arguments) slot.arguments += tc.function.arguments;
      }
      if (ch.finish_reason) {
        if (f.finishReason) throw new Error("two finish reasons for one choice");
        f.finishReason = ch.finish_reason;
      }
    }
  }
  return f;
}

/** Parses SSE text (what an encoder wrote) into events. */
export function parseSse(text: string): SseEvent[] {
  const d = createSseDecoder();
  return [...d.push(text), ...d.end()];
}

/** Splits bytes at the given offsets. */
export function splitAt(bytes: Uint8Array, offsets: number[]): Uint8Array[] {
  const out: Uint8Array[] = [];
  let prev = 0;
  for (const o of [...offsets].sort((a, b) => a - b)) {
    out.push(bytes.slice(prev, o));
    prev = o;
  }
  out.push(bytes.slice(prev));
  return out;
}
