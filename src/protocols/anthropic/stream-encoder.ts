// chat.completion.chunk objects → the Anthropic Messages event stream.
//
// message_start (usage so far: none; the totals come in message_delta), ping; then one content
// block at a time: content_block_start, content_block_delta (text_delta, or input_json_delta for
// a tool call's arguments), content_block_stop when the next block opens or the message ends;
// message_delta with stop_reason and the whole usage; message_stop. Framed as Anthropic frames
// them: `event: <type>\ndata: <json>\n\n`. A failure after the first event is an `error` event.
import { anthropicErrorType, type GatewayError } from "../../errors.ts";
import { firstChoice, writeDelta, type DeltaWriter } from "../chat/delta.ts";
import { writeSseJson } from "../sse.ts";
import type { ChunkEncoder, Json, ReasoningEnd, Usage } from "../types.ts";
import { anthropicUsage, newMessageId, stopReasonOf } from "./from-pivot.ts";

type Open = { kind: "text"; index: number } | { kind: "thinking"; index: number } | { kind: "tool"; index: number; toolIndex: number };

/** The `error` event of an Anthropic stream. */
export function anthropicStreamError(message: string, type = "api_error"): string {
  return writeSseJson({ type: "error", error: { type, message } });
}

export function anthropicStreamEncoder(request: Json): ChunkEncoder {
  let started = false;
  let closed = false;
  let blocks = 0;
  let open: Open | null = null;
  /** chat tool_call index → content block index. */
  const toolBlocks = new Map<number, number>();
  let finishReason: string | null = null;

  const start = (chunk: Json | null): string => {
    if (started) return "";
    started = true;
    const message = {
      id: newMessageId(),
      type: "message",
      role: "assistant",
      model: typeof chunk?.model === "string" && chunk.model ? chunk.model : String(request.model ?? ""),
      content: [],
      stop_reason: null,
      stop_sequence: null,
      usage: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 },
    };
    return writeSseJson({ type: "message_start", message }) + writeSseJson({ type: "ping" });
  };
  const closeOpen = (): string => {
    if (!open) return "";
    const s = writeSseJson({ type: "content_block_stop", index: open.index });
    open = null;
    return s;
  };
  const text = (delta: string): string => {
    let s = "";
    if (open?.kind !== "text") {
      s += closeOpen();
      open = { kind: "text", index: blocks++ };
      s += writeSseJson({ type: "content_block_start", index: open.index, content_block: { type: "text", text: "" } });
    }
    return s + writeSseJson({ type: "content_block_delta", index: open.index, delta: { type: "text_delta", text: delta } });
  };
  const toolCall = (tc: Json): string => {
    const toolIndex = typeof tc.index === "number" ? tc.index : 0;
    let s = "";
    let index = toolBlocks.get(toolIndex);
    if (index === undefined) {
      s += closeOpen();
      index = blocks++;
      toolBlocks.set(toolIndex, index);
      open = { kind: "tool", index, toolIndex };
      s += writeSseJson({ type: "content_block_start", index, content_block: { type: "tool_use", id: String(tc.id ?? ""), name: String(tc.function?.name ?? ""), input: {} } });
    }
    const args = tc.function?.arguments;
    // Arguments of a call whose block already closed (interleaved calls) still carry its index.
    if (typeof args === "string" && args) s += writeSseJson({ type: "content_block_delta", index, delta: { type: "input_json_delta", partial_json: args } });
    return s;
  };

  // Reasoning: a thinking block (thinking_delta…), closed by its signature_delta at the block's end.
  const reasoning = (delta: string): string => {
    let s = "";
    if (open?.kind !== "thinking") {
      s += closeOpen();
      open = { kind: "thinking", index: blocks++ };
      s += writeSseJson({ type: "content_block_start", index: open.index, content_block: { type: "thinking", thinking: "", signature: "" } });
    }
    return s + writeSseJson({ type: "content_block_delta", index: open.index, delta: { type: "thinking_delta", thinking: delta } });
  };
  const reasoningEnd = (end: ReasoningEnd): string => {
    if (typeof end.redacted === "string") {
      const index = blocks++;
      return closeOpen() + writeSseJson({ type: "content_block_start", index, content_block: { type: "redacted_thinking", data: end.redacted } })
        + writeSseJson({ type: "content_block_stop", index });
    }
    if (open?.kind !== "thinking") return "";
    const s = end.signature ? writeSseJson({ type: "content_block_delta", index: open.index, delta: { type: "signature_delta", signature: end.signature } }) : "";
    return s + closeOpen();
  };

  const writer: DeltaWriter = { reasoning, reasoningEnd, text, refusal: text, toolCall };
  return {
    push(chunk: Json): string {
      if (closed) return "";
      let s = start(chunk);
      const choice = firstChoice(chunk);
      if (!choice) return s;
      s += writeDelta(choice, writer);
      if (typeof choice.finish_reason === "string") finishReason = choice.finish_reason;
      return s;
    },
    end(usage: Usage | null): string {
      if (closed) return "";
      closed = true;
      let s = start(null) + closeOpen();
      const u = anthropicUsage(usage ?? { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 });
      s += writeSseJson({ type: "message_delta", delta: { stop_reason: stopReasonOf(finishReason), stop_sequence: null }, usage: u });
      return s + writeSseJson({ type: "message_stop" });
    },
    error(message: string, cause?: GatewayError): string {
      if (closed) return "";
      closed = true;
      return anthropicStreamError(message, cause ? anthropicErrorType(cause.status) : undefined);
    },
  };
}
