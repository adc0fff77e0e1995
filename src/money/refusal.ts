// The 402 of a request whose money does not fit the key's budget, saying which of two things is
// true: the month's spend (with requests in flight) has used the budget up, or there is budget
// left but less than the request's smallest possible cost (its prompt and a useful answer on the
// dearest lane, estimate.ts) — a budget of $0.000001 refuses every call while nothing was spent.
// Runs on the refusal path only: the extra read of the month's counter costs nothing on a served request.
import type { GatewayError } from "../errors.ts";
import type { KeyContext } from "../relay/key-context.ts";
import { budgetExceeded } from "../relay/relay-errors.ts";
import { monthSpendUsd, type SpendStores } from "./counters.ts";
import { monthKey } from "../lib/time.ts";

export async function budgetRefusal(ctx: SpendStores, key: KeyContext, minUsd: number | null): Promise<GatewayError> {
  const spent = await monthSpendUsd(ctx, key).then((s) => s.usd, () => null);
  return budgetExceeded({ budgetUsd: key.monthlyBudgetUsd!, month: monthKey(), keyId: key.id, spentUsd: spent, minUsd });
}
