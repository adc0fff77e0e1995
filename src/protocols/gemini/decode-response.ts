// Gemini GenerateContentResponse → chat completion; usage and finish reasons.
import { chatCompletion, newCallId, num, withReasoning, type AssistantTurn } from "../pivot.ts";
import type { Json, Usage } from "../types.ts";

const FILTERED = new Set(["SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY", "IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION"]);

/** Gemini finishReason → chat finish_reason. A STOP after function calls is `tool_calls`. */
export function finishReasonOf(reason: unknown, hadToolCalls: boolean): string {
  if (reason === "MAX_TOKENS") return "length";
  if (typeof reason === "string" && FILTERED.has(reason)) return "content_filter";
  return hadToolCalls ? "tool_calls" : "stop";
}

/**
 * usageMetadata → Usage. promptTokenCount already includes cachedContentTokenCount; thinking
 * tokens are billed as output, so completion = candidates + thoughts.
 */
export function usageFromGemini(m: unknown): Usage | null {
  if (!m || typeof m !== "object") return null;
  const x = m as Json;
  if (typeof x.promptTokenCount !== "number" && typeof x.candidatesTokenCount !== "number" && typeof x.totalTokenCount !== "number") return null;
  const thoughts = num(x.thoughtsTokenCount);
  const usage: Usage = {
    prompt_tokens: num(x.promptTokenCount) + num(x.toolUsePromptTokenCount),
    completion_tokens: num(x.candidatesTokenCount) + thoughts,
    cached_tokens: num(x.cachedContentTokenCount),
    cache_write_tokens: 0,
  };
  if (typeof x.thoughtsTokenCount === "number") usage.reasoning_tokens = thoughts;
  return usage;
}

/** Text, function calls and thought summaries (the model's reasoning) of one candidate's parts. */
export function partsToTurn(parts: unknown): { text: string; calls: AssistantTurn["toolCalls"]; thoughts: string } {
  let text = "";
  let thoughts = "";
  const calls: AssistantTurn["toolCalls"] = [];
  if (Array.isArray(parts)) {
    for (const p of parts) {
      if (!p || typeof p !== "object") continue;
      if (p.thought === true) {
        if (typeof p.text === "string") thoughts += p.text;
        continue;
      }
      if (typeof p.text === "string") text += p.text;
      else if (p.functionCall && typeof p.functionCall.name === "string") {
        calls.push({ id: typeof p.functionCall.id === "string" && p.functionCall.id ? p.functionCall.id : newCallId(), name: p.functionCall.name, arguments: JSON.stringify(p.functionCall.args ?? {}) });
      }
    }
  }
  return { text, calls, thoughts };
}

export function decodeGeminiResponse(body: Json, opts: { model: string; id?: string; created?: number }): { completion: Json; usage: Usage | null } {
  const candidates: Json[] = Array.isArray(body.candidates) ? body.candidates : [];
  const turns: AssistantTurn[] = [];
  let reasoning = "";
  for (const c of [...candidates].sort((a, b) => num(a.index) - num(b.index))) {
    const { text, calls, thoughts } = partsToTurn(c.content?.parts);
    if (turns.length === 0) reasoning = thoughts;
    turns.push({ content: text || null, toolCalls: calls, finishReason: finishReasonOf(c.finishReason, calls.length > 0) });
  }
  // A prompt blocked before generation has no candidates, only promptFeedback.blockReason.
  if (!turns.length) turns.push({ content: null, toolCalls: [], finishReason: body.promptFeedback?.blockReason ? "content_filter" : "stop" });
  const usage = usageFromGemini(body.usageMetadata);
  const completion = chatCompletion(
    {
      id: opts.id ?? (typeof body.responseId === "string" ? `chatcmpl-${body.responseId}` : "chatcmpl-gemini"),
      model: typeof body.modelVersion === "string" ? body.modelVersion : opts.model,
      created: opts.created ?? Math.floor(Date.now() / 1000),
    },
    turns,
    usage,
  );
  withReasoning(completion, reasoning ? [{ text: reasoning }] : []);
  return { completion, usage };
}
