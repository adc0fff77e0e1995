// A chat completion → a Gemini GenerateContentResponse (the answer of generateContent on a lane
// that does not speak Gemini), and the pieces the stream encoder shares with it.
//
// Each choice is a candidate: its reasoning as `thought` parts when the client asked to see
// thoughts (thinkingConfig.includeThoughts), its text, then one functionCall part per tool call
// with its arguments as an object and the call's id (Gemini clients send it back on the
// functionResponse, which is how the next request finds the call it answers).
import { randomToken } from "../../lib/crypto.ts";
import { parseArguments, reasoningBlocksOf, usageFromChat } from "../pivot.ts";
import type { Json, Usage } from "../types.ts";
import { includesThoughts } from "./to-pivot.ts";

export const newResponseId = () => randomToken(22);

/** chat finish_reason → Gemini finishReason (a turn that ends in function calls is STOP, as Gemini says it). */
export function geminiFinishReason(finishReason: unknown): string {
  switch (finishReason) {
    case "length":
      return "MAX_TOKENS";
    case "content_filter":
      return "SAFETY";
    default:
      return "STOP";
  }
}

/**
 * Usage → usageMetadata. The pivot's completion tokens include the reasoning; Gemini reports
 * thoughts beside the candidates' tokens, and its prompt count includes the cached part.
 */
export function usageMetadataOf(u: Usage): Json {
  const thoughts = u.reasoning_tokens ?? 0;
  const out: Json = {
    promptTokenCount: u.prompt_tokens,
    candidatesTokenCount: Math.max(0, u.completion_tokens - thoughts),
    totalTokenCount: u.prompt_tokens + u.completion_tokens,
  };
  if (u.cached_tokens) out.cachedContentTokenCount = u.cached_tokens;
  if (thoughts) out.thoughtsTokenCount = thoughts;
  return out;
}

/** Tool-call arguments (a JSON string) → `args`; arguments that are not an object travel as {"arguments": text}. */
function argsOf(args: unknown): Json {
  try {
    return parseArguments(args, "arguments");
  } catch {
    return { arguments: String(args) };
  }
}

/** One tool call of the pivot → a functionCall part. */
export function functionCallPart(tc: Json): Json {
  return { functionCall: { id: String(tc.id ?? ""), name: String(tc.function?.name ?? ""), args: argsOf(tc.function?.arguments) } };
}

function candidateOf(choice: Json, index: number, thoughts: boolean): Json {
  const message = choice?.message ?? {};
  const parts: Json[] = [];
  if (thoughts) {
    for (const b of reasoningBlocksOf(message)) if (b.text) parts.push({ text: b.text, thought: true });
    if (!parts.length && typeof message.reasoning_content === "string" && message.reasoning_content) parts.push({ text: message.reasoning_content, thought: true });
  }
  const text = typeof message.content === "string" ? message.content : typeof message.refusal === "string" ? message.refusal : "";
  if (text) parts.push({ text });
  for (const tc of Array.isArray(message.tool_calls) ? message.tool_calls : []) parts.push(functionCallPart(tc));
  return { content: { role: "model", parts }, finishReason: geminiFinishReason(choice?.finish_reason), index };
}

export function geminiFromPivot(completion: Json, usage: Usage | null, request: Json): Json {
  const choices: Json[] = Array.isArray(completion.choices) ? completion.choices : [];
  const thoughts = includesThoughts(request);
  const u = usage ?? usageFromChat(completion.usage) ?? { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 };
  return {
    candidates: choices.map((c, i) => candidateOf(c, typeof c?.index === "number" ? c.index : i, thoughts)),
    usageMetadata: usageMetadataOf(u),
    modelVersion: typeof completion.model === "string" && completion.model ? completion.model : String(request.model ?? ""),
    responseId: newResponseId(),
  };
}
