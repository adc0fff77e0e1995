// A chat completion → an Anthropic Message (the answer of POST /v1/messages on a lane that does
// not speak Messages), and the pieces the stream encoder shares with it.
import { randomToken } from "../../lib/crypto.ts";
import { parseArguments, reasoningBlocksOf, usageFromChat } from "../pivot.ts";
import type { Json, Usage } from "../types.ts";

export const newMessageId = () => `msg_${randomToken(24)}`;

/** chat finish_reason → Anthropic stop_reason. */
export function stopReasonOf(finishReason: unknown): string {
  switch (finishReason) {
    case "length":
      return "max_tokens";
    case "tool_calls":
    case "function_call":
      return "tool_use";
    case "content_filter":
      return "refusal";
    default:
      return "end_turn";
  }
}

/**
 * Usage → Anthropic `usage`. The pivot's prompt_tokens is the whole input; Anthropic's
 * input_tokens leaves out cache reads and writes, which it reports beside it.
 */
export function anthropicUsage(u: Usage): Json {
  const out: Json = {
    input_tokens: Math.max(0, u.prompt_tokens - u.cached_tokens - u.cache_write_tokens),
    cache_creation_input_tokens: u.cache_write_tokens,
    cache_read_input_tokens: u.cached_tokens,
    output_tokens: u.completion_tokens,
  };
  // Cache writes by TTL, as Anthropic reports them (the two add up to cache_creation_input_tokens).
  if (u.cache_write_tokens) {
    out.cache_creation = {
      ephemeral_5m_input_tokens: Math.max(0, u.cache_write_tokens - (u.cache_write_1h_tokens ?? 0)),
      ephemeral_1h_input_tokens: u.cache_write_1h_tokens ?? 0,
    };
  }
  if (u.cost !== undefined) out.cost = u.cost;
  return out;
}

/** Tool-call arguments (a JSON string) → the tool_use `input` object; arguments that are not an object travel as {"arguments": text}. */
export function toolInput(args: unknown): Json {
  try {
    return parseArguments(args, "arguments");
  } catch {
    return { arguments: String(args) };
  }
}

export function anthropicFromPivot(completion: Json, usage: Usage | null, request: Json): Json {
  const choice = Array.isArray(completion.choices) ? completion.choices[0] : undefined;
  const message = choice?.message ?? {};
  const content: Json[] = [];
  // Reasoning first, as Anthropic sends it: a thinking block keeps its signature (empty when the
  // reasoning came from another vendor), a redacted one its data.
  for (const b of reasoningBlocksOf(message)) {
    content.push(b.redacted !== undefined ? { type: "redacted_thinking", data: b.redacted } : { type: "thinking", thinking: b.text, signature: b.signature ?? "" });
  }
  const text = typeof message.content === "string" ? message.content : typeof message.refusal === "string" ? message.refusal : "";
  if (text) content.push({ type: "text", text });
  for (const tc of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    content.push({ type: "tool_use", id: String(tc.id), name: String(tc.function?.name ?? ""), input: toolInput(tc.function?.arguments) });
  }
  const u = usage ?? usageFromChat(completion.usage);
  return {
    id: newMessageId(),
    type: "message",
    role: "assistant",
    model: typeof completion.model === "string" ? completion.model : String(request.model ?? ""),
    content,
    stop_reason: stopReasonOf(choice?.finish_reason),
    stop_sequence: null,
    usage: anthropicUsage(u ?? { prompt_tokens: 0, completion_tokens: 0, cached_tokens: 0, cache_write_tokens: 0 }),
  };
}
