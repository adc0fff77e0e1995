// Responses `usage` ⇄ Usage.
import { usageFromFields, type UsageFieldNames } from "../pivot.ts";
import type { Json, Usage } from "../types.ts";

const RESPONSES_USAGE_FIELDS: UsageFieldNames = { input: "input_tokens", output: "output_tokens", inputDetails: "input_tokens_details", outputDetails: "output_tokens_details" };

/** {input_tokens, input_tokens_details.cached_tokens, output_tokens, output_tokens_details.reasoning_tokens} → Usage. */
export function usageFromResponses(u: unknown): Usage | null {
  return usageFromFields(u, RESPONSES_USAGE_FIELDS);
}

export function responsesUsage(u: Usage): Json {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.cached_tokens, cache_write_tokens: u.cache_write_tokens, ...(u.cache_write_1h_tokens ? { cache_write_1h_tokens: u.cache_write_1h_tokens } : {}) },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens,
    ...(u.cost !== undefined ? { cost: u.cost } : {}),
  };
}
