// The chat-completions client shape. Chat is the pivot, so requests and completions pass as
// they are; the stream encoder writes chat SSE (`data: {chunk}` … `data: [DONE]`) and shows a
// usage chunk only to a client that asked for it with stream_options.include_usage.
import { nestedErrorObject, type GatewayError } from "../../errors.ts";
import { chatUsage } from "../pivot.ts";
import type { ChatRequest, ChunkEncoder, ClientCodec, Json, Usage } from "../types.ts";

/**
 * The SSE error event that ends a stream broken after its first byte (no [DONE] follows): a
 * server error with `cause` as its code, or typed as `cause` when it is the gateway's error.
 */
export function chatStreamError(message: string, cause: string | GatewayError = "upstream_error"): string {
  // The whole OpenAI error object: param and code always present (CONTRACT §8).
  const error = typeof cause === "string" ? { message, type: "server_error", param: null, code: cause } : { ...nestedErrorObject(cause), message };
  return `event: error\ndata: ${JSON.stringify({ error })}\n\n`;
}

/** A completion without the pivot's own `reasoning_blocks` (its `reasoning_content` stays). */
function withoutReasoningBlocks(completion: Json): Json {
  const m = completion.choices?.[0]?.message;
  if (!m || m.reasoning_blocks === undefined) return completion;
  const { reasoning_blocks: _, ...message } = m;
  return { ...completion, choices: [{ ...completion.choices[0], message }, ...completion.choices.slice(1)] };
}

export const chatClientCodec: ClientCodec = {
  shape: "chat",
  toPivot: (body) => body as ChatRequest,
  fromPivot(completion: Json, usage: Usage | null) {
    const out = withoutReasoningBlocks(completion);
    if (usage && !out.usage) return { ...out, usage: chatUsage(usage) };
    return out;
  },
  streamEncoder(request: Json): ChunkEncoder {
    const wantsUsage = request.stream_options?.include_usage === true;
    let base: { id: string; created: number; model: string } | null = null;
    return {
      push(chunk) {
        base ??= { id: chunk.id, created: chunk.created, model: chunk.model };
        const d = chunk.choices?.[0]?.delta;
        if (d?.reasoning_end !== undefined) {
          // The end of a reasoning block is the gateway's own mark: a chunk that only carried it says nothing.
          const { reasoning_end: _, ...delta } = d;
          if (Object.keys(delta).length === 0 && !chunk.choices[0].finish_reason) return "";
          chunk = { ...chunk, choices: [{ ...chunk.choices[0], delta }, ...chunk.choices.slice(1)] };
        }
        return `data: ${JSON.stringify(chunk)}\n\n`;
      },
      end(usage) {
        let s = "";
        if (wantsUsage && usage) {
          const b = base ?? { id: "chatcmpl-gateway", created: Math.floor(Date.now() / 1000), model: String(request.model ?? "") };
          s += `data: ${JSON.stringify({ id: b.id, object: "chat.completion.chunk", created: b.created, model: b.model, choices: [], usage: chatUsage(usage) })}\n\n`;
        }
        return s + "data: [DONE]\n\n";
      },
      error: (message, cause) => chatStreamError(message, cause),
    };
  },
};
