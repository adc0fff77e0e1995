// GET /v1/key: the calling key's lanes, mode and budget state (CONTRACT §6 shape).
import type { RelayDeps } from "./relay-deps.ts";
import { getAdapter } from "../providers/registry.ts";
import { resolveRoutingKey } from "./auth.ts";
import { monthSpendUsd } from "../money/counters.ts";

const round6 = (usd: number) => Math.round(usd * 1e6) / 1e6;

export async function keyInfo(ctx: RelayDeps, request: Request): Promise<object> {
  const key = await resolveRoutingKey(ctx, request);
  const spend = await monthSpendUsd(ctx, key);
  const budget = key.monthlyBudgetUsd;
  return {
    id: key.id,
    label: key.label,
    key_prefix: key.keyPrefix,
    mode: key.mode,
    lanes: key.lanes.map((l) => {
      // CONTRACT §9: when the lane's cooldown ends (every instance skips it until then), or null.
      const until = ctx.services.cooldowns.untilOf(l);
      return { provider: l.provider, model: l.model, subscription: getAdapter(l.provider)?.seat ?? false, cooldown_until: until === null ? null : new Date(until).toISOString() };
    }),
    budget: {
      monthly_budget_usd: budget,
      current_month: spend.month,
      current_month_spend_usd: round6(spend.usd),
      remaining_usd: budget === null ? null : round6(Math.max(0, budget - spend.usd)),
      exhausted: budget !== null && spend.usd >= budget,
    },
  };
}
