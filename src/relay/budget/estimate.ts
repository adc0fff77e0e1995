// The amount reserved against a key's budget before forwarding (CONTRACT §7). The most
// expensive lane the request could land on is assumed, since fallback may move it there.
//
// With max_tokens / max_completion_tokens / max_output_tokens the estimate is a worst case:
// input at one token per byte of the request body (a token covers at least one byte of text;
// the JSON around the messages more than covers per-message overhead) plus max tokens of
// output. Without a cap it is a typical case: a quarter token per byte and DEFAULT_OUTPUT_TOKENS.
//
// The bound we guarantee. Admission reserves atomically in the shared KV (one Lua script in Redis
// for every instance, the same check in-process): a request is admitted only if the month's
// counter (settled costs + reservations in flight) plus its estimate fits the budget, and its
// reservation is replaced by the real cost when it ends (released on error, disconnect and
// fallback). Hence a key's spend for a month never exceeds
//     monthly_budget_usd + Σ over the requests in flight when the last one was admitted of
//                           max(0, real cost − reserved estimate),
// across every gateway instance sharing the Redis. (Settlements that lower the counter are
// batched for a few milliseconds, which only keeps it higher meanwhile; settlements that raise
// it go out at once: see settle-batch.ts.) Requests that carry max_tokens,
// max_completion_tokens or max_output_tokens reserve their worst case (real ≤ reserved), so
// such traffic never passes the budget at all. Outside the bound: seat traffic while
// budget_excludes_seats (by design), and models the pricing catalog does not know (priced at 0).
import type { Ctx } from "../../context.ts";
import type { Json } from "../../protocols/types.ts";
import { getAdapter } from "../../providers/registry.ts";
import type { KeyContext } from "../key-context.ts";
import { unitPrices } from "../pricing.ts";
import { candidateModels } from "../routing/model.ts";

export const DEFAULT_OUTPUT_TOKENS = 1024;
/** Reserved when no lane's price is known, so an exhausted budget still refuses. */
export const MIN_ESTIMATE_USD = 1e-9;

export function maxOutputTokens(body: Json): number | null {
  const v = body.max_completion_tokens ?? body.max_tokens ?? body.max_output_tokens;
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? Math.ceil(v) : null;
}

/**
 * Estimated cost in USD of one request on this key, or null when no lane it may use counts
 * toward the budget (seat lanes while budget_excludes_seats). `bodyBytes` is the request's size
 * when known (the relay passes it; blitz may omit it and the messages are measured).
 */
export function estimateCostUsd(ctx: Ctx, key: KeyContext, request: Json, bodyBytes?: number): number | null {
  void ctx;
  const bytes = bodyBytes ?? JSON.stringify(request.messages ?? request.input ?? "").length;
  const cap = maxOutputTokens(request);
  const inTokens = cap !== null ? bytes : Math.ceil(bytes / 4);
  const outTokens = cap ?? DEFAULT_OUTPUT_TOKENS;
  const requestModel = typeof request.model === "string" ? request.model : "";
  let best: number | null = null;
  for (const lane of key.lanes) {
    const adapter = getAdapter(lane.provider);
    if (adapter?.seat && key.budgetExcludesSeats) continue;
    for (const model of candidateModels(requestModel, lane)) {
      const p = adapter ? unitPrices(adapter.pricingId ?? adapter.id, model) : null;
      const usd = p ? inTokens * p.input + outTokens * p.output : MIN_ESTIMATE_USD;
      if (best === null || usd > best) best = usd;
    }
  }
  return best === null ? null : Math.max(best, MIN_ESTIMATE_USD);
}
