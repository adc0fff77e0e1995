// Responses `usage` ⇄ Usage.
import { num } from "../pivot.ts";
import type { Json, Usage } from "../types.ts";

/** {input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens} → Usage. */
export function usageFromResponses(u: unknown): Usage | null {
  if (!u || typeof u !== "object") return null;
  const x = u as Json;
  if (typeof x.input_tokens !== "number" && typeof x.output_tokens !== "number") return null;
  const usage: Usage = {
    prompt_tokens: num(x.input_tokens),
    completion_tokens: num(x.output_tokens),
    cached_tokens: num(x.input_tokens_details?.cached_tokens),
    cache_write_tokens: num(x.input_tokens_details?.cache_write_tokens),
  };
  if (typeof x.output_tokens_details?.reasoning_tokens === "number") usage.reasoning_tokens = x.output_tokens_details.reasoning_tokens;
  return usage;
}

export function responsesUsage(u: Usage): Json {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.cached_tokens },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens,
  };
}
