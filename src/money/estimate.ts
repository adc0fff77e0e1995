// The amount reserved against a key's budget before forwarding (CONTRACT §7: the budget is a
// ceiling). The most expensive lane the request could land on is assumed, since fallback may
// move it there.
//
// Worst case: input at one token per byte of the request body (a token covers at least one byte
// of text; the JSON around the messages more than covers per-message overhead) plus the output
// limit times the choices asked for (`n`): the client's max_tokens / max_completion_tokens /
// max_output_tokens (the largest, should several be present), else the model's maximum output
// from the catalog, else DEFAULT_MAX_OUTPUT_TOKENS (output-limits.ts). The attempt then holds the
// body each lane receives to that (fitWireLimit), after translation. A model the
// pricing catalog does not know is priced at UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT / _OUTPUT.
//
// Near the end of a budget the admission grants what remains when it covers at least the prompt
// and MIN_USEFUL_OUTPUT_TOKENS (`minUsd`), and the request's output limit is lowered to what that
// grant pays for on the dearest lane (outputLimitFor), so real ≤ reserved still holds. Hence a
// key's month spend never passes its budget, across every instance sharing the Redis, except by
// the error of the prompt estimate (a tokenizer producing more tokens than bytes). Outside the
// budget by design: seat traffic while budget_excludes_seats.
import type { Json } from "../protocols/types.ts";
import { getAdapter } from "../providers/registry.ts";
import type { KeyContext } from "../relay/key-context.ts";
import { unitPrices, type UnitPrices } from "./pricing.ts";
import { candidateModels } from "../relay/routing/model.ts";
import { choicesOf, clientOutputLimit, MIN_USEFUL_OUTPUT_TOKENS, worstOutputTokens } from "./output-limits.ts";
import type { PriceConfig } from "./money-deps.ts";
import type { OperatorPriceLookup } from "./operator-prices.ts";

/** What the estimate reads of its gateway: the fallback price settings and the operator's prices. */
export interface PriceDeps {
  config: PriceConfig;
  services?: { prices?: OperatorPriceLookup };
}

/** Reserved when every lane is free (a zero-priced model), so an exhausted budget still refuses. */
export const MIN_ESTIMATE_USD = 1e-9;

export interface Estimate {
  /** The worst case in USD. */
  usd: number;
  /** The prompt plus a useful answer (MIN_USEFUL_OUTPUT_TOKENS) on the dearest lane: below this, 402. */
  minUsd: number;
  inTokens: number;
  /** Output tokens per choice the worst case assumed (the largest over the lanes). */
  outTokens: number;
  /** Choices the request asks for (`n`); each may use `outTokens`. */
  choices: number;
  /** Unit prices of every lane and model the request may use. */
  prices: UnitPrices[];
}

/** The fallback price of a model the catalog does not know (per token). */
export function fallbackPrices(ctx: PriceDeps): UnitPrices {
  return { input: ctx.config.UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT / 1e6, output: ctx.config.UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT / 1e6 };
}

/**
 * The worst-case cost of one request on this key, or null when no lane it may use counts toward
 * the budget (seat lanes while budget_excludes_seats). `bodyBytes` is the request's size when
 * known (the relay passes it; blitz may omit it and the messages are measured). `lanes`: where
 * the request may go (the key's chain; the classifier's call passes its own lane).
 */
export function estimateRequest(ctx: PriceDeps, key: KeyContext, request: Json, bodyBytes?: number, lanes: KeyContext["lanes"] = key.lanes): Estimate | null {
  const inTokens = bodyBytes ?? JSON.stringify(request.messages ?? request.input ?? "").length;
  const cap = clientOutputLimit(request);
  // Every choice is generated and billed: n choices of up to `out` tokens each (CONTRACT §7).
  const choices = choicesOf(request);
  // A prompt that asks for cache writes may be billed above the input price (1-hour writes: 2×).
  const writes = asksCacheWrite(request);
  const requestModel = typeof request.model === "string" ? request.model : "";
  const fallback = fallbackPrices(ctx);
  let est: Estimate | null = null;
  for (const lane of lanes) {
    const adapter = getAdapter(lane.provider);
    if (adapter?.seat && key.budgetExcludesSeats) continue;
    for (const model of candidateModels(requestModel, lane)) {
      const listed = (adapter ? unitPrices(adapter.pricingId ?? adapter.id, model, ctx.services?.prices?.get(adapter.id, model) ?? null) : null) ?? fallback;
      const p = writes ? { ...listed, input: Math.max(listed.input, listed.cacheWrite ?? 2 * listed.input) } : listed;
      const out = worstOutputTokens(cap, model);
      const usd = inTokens * p.input + out * choices * p.output;
      const minUsd = inTokens * p.input + Math.min(out, MIN_USEFUL_OUTPUT_TOKENS) * choices * p.output;
      est ??= { usd: 0, minUsd: 0, inTokens, outTokens: 0, choices, prices: [] };
      est.usd = Math.max(est.usd, usd);
      est.minUsd = Math.max(est.minUsd, minUsd);
      est.outTokens = Math.max(est.outTokens, out);
      est.prices.push(p);
    }
  }
  if (!est) return null;
  est.usd = Math.max(est.usd, MIN_ESTIMATE_USD);
  est.minUsd = Math.min(est.usd, Math.max(est.minUsd, MIN_ESTIMATE_USD));
  return est;
}

/** The worst-case cost in USD (see estimateRequest). */
export function estimateCostUsd(ctx: PriceDeps, key: KeyContext, request: Json, bodyBytes?: number): number | null {
  return estimateRequest(ctx, key, request, bodyBytes)?.usd ?? null;
}

/**
 * The output limit that `grantedUsd` pays for on every lane the request may use, or null when the
 * grant covers the whole worst case (the limit stays as the client sent it).
 */
export function outputLimitFor(est: Estimate, grantedUsd: number): number | null {
  if (grantedUsd >= est.usd) return null;
  let limit = est.outTokens;
  for (const p of est.prices) {
    if (p.output <= 0) continue;
    // What remains after the prompt is shared by every choice.
    limit = Math.min(limit, Math.floor((grantedUsd - est.inTokens * p.input) / (p.output * est.choices) + 1e-6));
  }
  return Math.max(1, limit);
}

/**
 * True when the request marks anything for the prompt cache (Anthropic `cache_control`, on the
 * request or on a system, message or tool block): those tokens may be billed as cache writes.
 */
export function asksCacheWrite(request: Json): boolean {
  if (request.cache_control) return true;
  const marked = (blocks: unknown) => Array.isArray(blocks) && blocks.some((b) => b && typeof b === "object" && (b as Json).cache_control);
  if (marked(request.system) || marked(request.tools)) return true;
  const messages = request.messages;
  if (!Array.isArray(messages)) return false;
  for (const m of messages) if (m && typeof m === "object" && marked(m.content)) return true;
  return false;
}
