// Anthropic Messages answer → chat completion; usage and finish reasons.
import { chatCompletion, num, withReasoning, type AssistantTurn } from "../pivot.ts";
import type { Json, ReasoningBlock, Usage } from "../types.ts";
import { JSON_TOOL_NAME } from "./encode-request.ts";

/** Anthropic stop_reason → chat finish_reason. */
export function finishReasonOf(stopReason: unknown, onlyJsonTool = false): string {
  switch (stopReason) {
    case "tool_use":
      // The forced response_format tool is the answer itself, not a call for the client to run.
      return onlyJsonTool ? "stop" : "tool_calls";
    case "max_tokens":
    case "model_context_window_exceeded":
      return "length";
    case "refusal":
      return "content_filter";
    case "end_turn":
    case "stop_sequence":
    case "pause_turn":
    default:
      return "stop";
  }
}

/**
 * Anthropic `usage` → Usage. Anthropic's input_tokens excludes cache reads and writes; the pivot's
 * prompt_tokens is the whole input (as OpenAI's is), so the three are summed.
 */
export function usageFromAnthropic(u: unknown): Usage | null {
  if (!u || typeof u !== "object") return null;
  const x = u as Json;
  if (typeof x.input_tokens !== "number" && typeof x.output_tokens !== "number") return null;
  const cacheRead = num(x.cache_read_input_tokens);
  const cacheWrite = num(x.cache_creation_input_tokens);
  const out: Usage = {
    prompt_tokens: num(x.input_tokens) + cacheRead + cacheWrite,
    completion_tokens: num(x.output_tokens),
    cached_tokens: cacheRead,
    cache_write_tokens: cacheWrite,
  };
  const h1 = oneHourWrites(x);
  if (h1 !== null) out.cache_write_1h_tokens = h1;
  return out;
}

/**
 * The 1-hour cache writes of an Anthropic `usage` (`cache_creation.ephemeral_1h_input_tokens`,
 * part of cache_creation_input_tokens and priced higher than 5-minute writes), or null when absent.
 */
export function oneHourWrites(x: Json): number | null {
  const v = x.cache_creation?.ephemeral_1h_input_tokens;
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : null;
}

export function decodeAnthropicResponse(body: Json, opts: { model: string; created?: number }): { completion: Json; usage: Usage | null } {
  const blocks: Json[] = Array.isArray(body.content) ? body.content : [];
  let text = "";
  const toolCalls: AssistantTurn["toolCalls"] = [];
  let jsonAnswer: string | null = null;
  const reasoning: ReasoningBlock[] = [];
  for (const b of blocks) {
    if (b.type === "thinking" && typeof b.thinking === "string") reasoning.push({ text: b.thinking, ...(typeof b.signature === "string" && b.signature ? { signature: b.signature } : {}) });
    else if (b.type === "redacted_thinking" && typeof b.data === "string") reasoning.push({ text: "", redacted: b.data });
    if (b.type === "text" && typeof b.text === "string") text += b.text;
    else if (b.type === "tool_use") {
      if (b.name === JSON_TOOL_NAME) jsonAnswer = JSON.stringify(b.input ?? {});
      else toolCalls.push({ id: String(b.id), name: String(b.name), arguments: JSON.stringify(b.input ?? {}) });
    }
    // server tool blocks have no chat equivalent and are left out.
  }
  const usage = usageFromAnthropic(body.usage);
  const content = jsonAnswer ?? (text || null);
  const completion = chatCompletion(
    { id: typeof body.id === "string" ? body.id : "msg", model: typeof body.model === "string" ? body.model : opts.model, created: opts.created ?? Math.floor(Date.now() / 1000) },
    [{ content, toolCalls, finishReason: finishReasonOf(body.stop_reason, jsonAnswer !== null && toolCalls.length === 0) }],
    usage,
  );
  withReasoning(completion, reasoning);
  return { completion, usage };
}
