// Anthropic Messages stream → chat.completion.chunk objects. State lives in the closure.
//
// message_start → role chunk; content_block_start(text) → nothing (or its initial text);
// content_block_start(tool_use) → a tool_calls entry with id and name (its own chat index, so
// parallel and interleaved calls stay apart); text_delta → content; input_json_delta → that
// call's arguments; message_delta → stop reason and cumulative usage; message_stop → the
// finish chunk. Thinking: thinking_delta → reasoning_content, the block's end → reasoning_end with
// its signature; a redacted_thinking block → reasoning_end with its data (pivot.ts, types.ts).
// ping is ignored; an error event throws UpstreamStreamError.
import { chatChunk, roleChunkOnce, streamEventJson, vendorText, type ChunkBase } from "../pivot.ts";
import { UpstreamStreamError, type ChunkDecoder, type Json, type SseEvent, type Usage } from "../types.ts";
import { finishReasonOf, oneHourWrites } from "./decode-response.ts";
import { JSON_TOOL_NAME } from "./encode-request.ts";
import { anthropicErrorRetryable } from "./errors.ts";

type BlockState = { kind: "text" } | { kind: "tool"; toolIndex: number } | { kind: "json" } | { kind: "thinking"; signature: string } | { kind: "other" };

export function anthropicStreamDecoder(opts: { model: string; id: string; created: number }): ChunkDecoder {
  const base: ChunkBase = { id: opts.id, model: opts.model, created: opts.created };
  const blocks = new Map<number, BlockState>();
  let tools = 0;
  let jsonAnswer = false;
  let stopReason: string | null = null;
  let finished = false;
  const u = { input: 0, cacheRead: 0, cacheWrite: 0, cacheWrite1h: 0, output: 0, seen: false };

  const takeUsage = (x: unknown) => {
    if (!x || typeof x !== "object") return;
    const usage = x as Json;
    if (typeof usage.input_tokens === "number") { u.input = usage.input_tokens; u.seen = true; }
    if (typeof usage.cache_read_input_tokens === "number") u.cacheRead = usage.cache_read_input_tokens;
    if (typeof usage.cache_creation_input_tokens === "number") u.cacheWrite = usage.cache_creation_input_tokens;
    if (usage.cache_creation) u.cacheWrite1h = oneHourWrites(usage) ?? 0;
    if (typeof usage.output_tokens === "number") { u.output = usage.output_tokens; u.seen = true; }
  };
  const start = roleChunkOnce(base);
  const finish = (): Json[] => {
    if (finished) return [];
    finished = true;
    return [chatChunk(base, {}, finishReasonOf(stopReason, jsonAnswer && tools === 0))];
  };

  return {
    push(ev: SseEvent): Json[] {
      const d = streamEventJson(ev, "Anthropic");
      const type = typeof d.type === "string" ? d.type : ev.event;
      switch (type) {
        case "message_start": {
          const m = d.message ?? {};
          if (typeof m.model === "string" && m.model) base.model = m.model;
          takeUsage(m.usage);
          // The role chunk waits for the first content: an error right after message_start then
          // reaches the relay before any byte went to the client, so another lane can still serve.
          return [];
        }
        case "content_block_start": {
          const cb = d.content_block ?? {};
          const index = Number(d.index);
          if (cb.type === "text") {
            blocks.set(index, { kind: "text" });
            if (typeof cb.text === "string" && cb.text) return [...start(), chatChunk(base, { content: cb.text })];
          } else if (cb.type === "tool_use" && cb.name === JSON_TOOL_NAME) {
            blocks.set(index, { kind: "json" });
            jsonAnswer = true;
          } else if (cb.type === "tool_use") {
            const toolIndex = tools++;
            blocks.set(index, { kind: "tool", toolIndex });
            return [...start(), chatChunk(base, { tool_calls: [{ index: toolIndex, id: String(cb.id), type: "function", function: { name: String(cb.name), arguments: "" } }] })];
          } else if (cb.type === "thinking") {
            blocks.set(index, { kind: "thinking", signature: typeof cb.signature === "string" ? cb.signature : "" });
            if (typeof cb.thinking === "string" && cb.thinking) return [...start(), chatChunk(base, { reasoning_content: cb.thinking })];
          } else if (cb.type === "redacted_thinking" && typeof cb.data === "string") {
            blocks.set(index, { kind: "other" });
            return [...start(), chatChunk(base, { reasoning_end: { redacted: cb.data } })];
          } else blocks.set(index, { kind: "other" });
          return [];
        }
        case "content_block_delta": {
          const b = blocks.get(Number(d.index));
          const delta = d.delta ?? {};
          if (delta.type === "text_delta" && typeof delta.text === "string" && delta.text) {
            if (!b || b.kind === "text") return [...start(), chatChunk(base, { content: delta.text })];
          } else if (delta.type === "input_json_delta" && typeof delta.partial_json === "string" && delta.partial_json) {
            if (b?.kind === "tool") return [...start(), chatChunk(base, { tool_calls: [{ index: b.toolIndex, function: { arguments: delta.partial_json } }] })];
            if (b?.kind === "json") return [...start(), chatChunk(base, { content: delta.partial_json })];
          }
          if (b?.kind === "thinking") {
            if (delta.type === "thinking_delta" && typeof delta.thinking === "string" && delta.thinking) return [...start(), chatChunk(base, { reasoning_content: delta.thinking })];
            if (delta.type === "signature_delta" && typeof delta.signature === "string") b.signature += delta.signature;
          }
          // citations_delta: no chat equivalent.
          return [];
        }
        case "content_block_stop": {
          const b = blocks.get(Number(d.index));
          if (b?.kind === "thinking") return [...start(), chatChunk(base, { reasoning_end: b.signature ? { signature: b.signature } : {} })];
          return [];
        }
        case "message_delta":
          if (typeof d.delta?.stop_reason === "string") stopReason = d.delta.stop_reason;
          takeUsage(d.usage);
          return [];
        case "message_stop":
          return [...start(), ...finish()];
        case "ping":
          return [];
        case "error": {
          const e = d.error ?? {};
          const kind = typeof e.type === "string" ? e.type : "error";
          throw new UpstreamStreamError(`Anthropic stream error (${kind}): ${vendorText(e.message)}`, anthropicErrorRetryable(kind));
        }
        default:
          return []; // Unknown event types are skipped, as Anthropic's versioning policy asks.
      }
    },
    end(): Json[] {
      if (finished) return [];
      // message_stop is the Messages stream's terminator (CONTRACT §8): a stream that ends without
      // it was cut off, even after message_delta carried the stop reason.
      throw new UpstreamStreamError(stopReason === null ? "The Anthropic stream ended before the message was complete." : "The Anthropic stream ended without message_stop.");
    },
    usage(): Usage | null {
      if (!u.seen) return null;
      const out: Usage = {
        prompt_tokens: u.input + u.cacheRead + u.cacheWrite,
        completion_tokens: u.output,
        cached_tokens: u.cacheRead,
        cache_write_tokens: u.cacheWrite,
      };
      if (u.cacheWrite1h) out.cache_write_1h_tokens = u.cacheWrite1h;
      return out;
    },
  };
}
