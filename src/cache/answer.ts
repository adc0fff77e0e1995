// A cached answer and the two ways back out of it. An answer is captured from what the client was
// sent, whichever protocol that was: kept as that protocol's own answer (its JSON body or its
// stream's events, wire.ts), and read by the protocol's codec into the pivot's chunks (role,
// reasoning, text, refusal, tool-call deltas, the finish reason) to tell a complete answer. A stream
// and a JSON answer to the same request fill the same entry; a hit is written from the stored
// answer with every field it had (wire.ts), in the mode the request asks, with fresh ids.
import { upstreamCodecs } from "../protocols/index.ts";
import { isErrorBody } from "../protocols/error-body.ts";
import { createSseDecoder, type SseDecoder } from "../protocols/sse.ts";
import type { ChunkDecoder, ClientShape, Json, ReasoningBlock, SseEvent, UpstreamCodec, Usage, WireProtocol } from "../protocols/types.ts";
import { pieces, renderJson, renderSse, wireEvent, type Wire, type WireEvent } from "./wire.ts";

/** One chunk of the answer: choice 0's delta and finish reason. */
export interface CachedChunk {
  delta: Json;
  finish_reason: string | null;
}

export interface CachedAnswer {
  /** When it was stored (ms since epoch): the `age` of a hit. */
  at: number;
  /** The provider and model that first answered (written on a hit's usage record). */
  provider: string | null;
  model: string;
  /** What the answer cost upstream: the `saved_usd` of every hit. */
  costUsd: number;
  usage: Usage | null;
  /** The answer as the client was sent it: its JSON body or its stream's events (wire.ts). */
  wire: Wire;
}

/** The captured answer before the relay's facts (cost, provider) are added; `chunks` (the pivot's, absent for embeddings) tell whether it is complete and are not stored. */
export type Captured = Pick<CachedAnswer, "model" | "usage" | "wire"> & { chunks?: CachedChunk[] };

const codecOf = (shape: ClientShape): UpstreamCodec | undefined => upstreamCodecs[shape as WireProtocol];

/** A completion's choice → the chunks a stream of it would have carried. */
function choiceChunks(choice: Json): CachedChunk[] {
  const m: Json = choice.message ?? {};
  const out: CachedChunk[] = [{ delta: { role: "assistant", content: "" }, finish_reason: null }];
  const d = (delta: Json) => out.push({ delta, finish_reason: null });
  if (Array.isArray(m.reasoning_blocks)) {
    // Whole reasoning blocks (a vendor's signature, encrypted content or redacted data on each): text, then the block's end.
    for (const { text, ...end } of m.reasoning_blocks as ReasoningBlock[]) {
      if (text) for (const p of pieces(text)) d({ reasoning_content: p });
      d({ reasoning_end: end });
    }
    if (typeof m.reasoning === "string" && m.reasoning) for (const p of pieces(m.reasoning)) d({ reasoning: p });
  } else for (const field of ["reasoning_content", "reasoning"]) if (typeof m[field] === "string" && m[field]) for (const p of pieces(m[field])) d({ [field]: p });
  if (typeof m.content === "string") for (const p of pieces(m.content)) d({ content: p });
  if (typeof m.refusal === "string" && m.refusal) d({ refusal: m.refusal });
  if (Array.isArray(m.tool_calls)) {
    m.tool_calls.forEach((tc: Json, index: number) => {
      d({ tool_calls: [{ index, id: tc.id, type: "function", function: { name: tc.function?.name ?? "", arguments: "" } }] });
      const args = typeof tc.function?.arguments === "string" ? tc.function.arguments : "";
      for (const p of pieces(args, 8)) d({ tool_calls: [{ index, function: { arguments: p } }] });
    });
  }
  out.push({ delta: {}, finish_reason: typeof choice.finish_reason === "string" ? choice.finish_reason : null });
  return out;
}

/** A JSON answer in the client's shape → its captured form, or null when it is not one the cache keeps (an error, several choices). */
export function captureJson(shape: ClientShape, request: Json, text: string): Captured | null {
  let parsed: Json;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  // Only complete successes of the protocol: never an error body, even one that came with a 200.
  if (isErrorBody(parsed)) return null;
  const model = String(request.model ?? "");
  const codec = codecOf(shape);
  if (!codec) return Array.isArray(parsed?.data) && parsed.data.length > 0 ? { model, usage: null, wire: { json: parsed } } : null; // embeddings: a list of vectors
  const { completion, usage } = codec.decodeResponse(parsed, { model });
  const choices = completion.choices;
  if (!Array.isArray(choices) || choices.length !== 1) return null;
  return { model: typeof completion.model === "string" && completion.model ? completion.model : model, usage, chunks: choiceChunks(choices[0]), wire: { json: parsed } };
}

/**
 * Reads the client's SSE bytes as they go out and keeps the answer they carry. finish() is null
 * unless the stream ended with its protocol's terminator and no error event, within `maxBytes`.
 */
export class StreamRecorder {
  private sse: SseDecoder = createSseDecoder();
  private codec: UpstreamCodec;
  private decoder: ChunkDecoder;
  private chunks: CachedChunk[] = [];
  private events: WireEvent[] = [];
  private last: SseEvent | null = null;
  private model: string | null = null;
  private bytes = 0;
  private bad = false;

  constructor(shape: ClientShape, private request: Json, private maxBytes: number) {
    this.codec = codecOf(shape)!;
    this.decoder = this.codec.streamDecoder({ model: String(request.model ?? ""), id: "cached", created: 0 });
  }

  push(b: Uint8Array): void {
    if (this.bad) return;
    this.bytes += b.length;
    if (this.bytes > this.maxBytes) {
      this.bad = true;
      return;
    }
    try {
      this.take(this.sse.push(b));
    } catch {
      this.bad = true; // an error event or an undecodable stream: nothing to keep
    }
  }

  finish(): Captured | null {
    if (this.bad) return null;
    try {
      this.take(this.sse.end());
      for (const c of this.decoder.end()) this.keep(c);
    } catch {
      return null;
    }
    const last = this.last;
    if (!last || (this.codec.isTerminal && !this.codec.isTerminal(last.data, last.event ?? null))) return null;
    return { model: this.model ?? String(this.request.model ?? ""), usage: this.decoder.usage(), chunks: this.chunks, wire: { events: this.events } };
  }

  private take(events: SseEvent[]): void {
    for (const ev of events) {
      this.last = ev;
      this.events.push(wireEvent(ev));
      for (const c of this.decoder.push(ev)) this.keep(c);
    }
  }

  private keep(chunk: Json): void {
    if (!Array.isArray(chunk.choices)) return;
    if (chunk.choices.length !== 1 || (chunk.choices[0]?.index ?? 0) !== 0) {
      if (chunk.choices.length > 0) this.bad = true; // several choices: not an answer the cache keeps
      return;
    }
    if (typeof chunk.model === "string" && chunk.model) this.model ??= chunk.model;
    const c = chunk.choices[0];
    this.chunks.push({ delta: c.delta ?? {}, finish_reason: typeof c.finish_reason === "string" ? c.finish_reason : null });
  }
}

/** The finish reason an answer ended with. */
export function finishOf(chunks: CachedChunk[]): string | null {
  for (let i = chunks.length - 1; i >= 0; i--) if (chunks[i]!.finish_reason) return chunks[i]!.finish_reason;
  return null;
}

/** True when the client itself limited the answer's length. */
export function clientSetLimit(request: Json): boolean {
  return ["max_tokens", "max_completion_tokens", "max_output_tokens"].some((f) => typeof request[f] === "number");
}

/**
 * Only complete answers are kept: ended by the model (stop, tool calls), or by an output limit
 * the client set itself, never one the gateway lowered near the end of a budget (`lowered`).
 */
export function isComplete(c: Captured, request: Json, lowered: boolean): boolean {
  if (!c.chunks) return true; // embeddings: kept whole
  const finish = finishOf(c.chunks ?? []);
  if (finish === "stop" || finish === "tool_calls") return true;
  return finish === "length" && !lowered && clientSetLimit(request);
}

/** A hit costs nothing (CONTRACT §9): its usage says cost 0. */
const hitUsage = (a: CachedAnswer): Usage | null => (a.usage ? { ...a.usage, cost: 0 } : null);

/** A hit as the JSON answer of the client's protocol: every field the stored answer had, fresh ids. */
export function replayJson(shape: ClientShape, request: Json, a: CachedAnswer): string {
  return renderJson(shape, request, a.wire, hitUsage(a));
}

/** A hit as the client protocol's SSE: one piece per event (the stream's writes), its ending included. */
export function replaySse(shape: ClientShape, request: Json, a: CachedAnswer): string[] {
  return renderSse(shape, request, a.wire, hitUsage(a));
}
