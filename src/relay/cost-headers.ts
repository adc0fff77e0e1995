// What a non-streamed answer says it cost (CONTRACT §9), in headers a client reads without parsing
// the body: `x-gateway-cost-usd` is what the request's usage records hold (the `cost` in its
// usage); on a key with a budget, `x-gateway-cost-reserved-usd` is the worst case reserved at
// admission and `x-gateway-cost-settled-usd` what the settlement counted toward the budget (seat
// traffic excluded while budget_excludes_seats). A streamed answer's headers leave before its cost
// is known: its cost is in its last usage event only.
import type { MoneyCall } from "../money/money.ts";

/** USD as a plain decimal (never an exponent), to the pico-dollar, without trailing zeros. */
export function usdText(usd: number): string {
  if (!Number.isFinite(usd) || usd <= 0) return "0";
  const s = usd.toFixed(12).replace(/0+$/, "");
  return s.endsWith(".") ? s.slice(0, -1) : s;
}

export const COST_HEADER = "x-gateway-cost-usd";
export const CACHE_SAVED_HEADER = "x-gateway-cache-saved-usd";

/** The cost headers of a settled request. */
export function costHeaders(money: Pick<MoneyCall, "recordedUsd" | "reservedUsd" | "countedUsd" | "key">): Record<string, string> {
  const h: Record<string, string> = { [COST_HEADER]: usdText(money.recordedUsd) };
  if (money.key.monthlyBudgetUsd !== null && money.reservedUsd > 0) {
    h["x-gateway-cost-reserved-usd"] = usdText(money.reservedUsd);
    h["x-gateway-cost-settled-usd"] = usdText(money.countedUsd);
  }
  return h;
}
