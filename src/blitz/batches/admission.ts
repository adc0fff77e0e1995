// Money first (CONTRACT §7, §9 "Batch work"): a batch's summed worst case must fit what is left
// of the key's budget when it is submitted (its spend plus what requests in flight hold, across
// every instance sharing the Redis), or it is refused with 402 before anything is stored or sent.
// A batch whose lines run live holds nothing between submit and run: a reservation held for hours
// would be an in-flight entry of the submitting instance, which the ledger turns into an
// `interrupted` record at its reserved cost when that instance dies. Each line reserves and
// settles its own worst case when it runs, as every request does, so the ceiling holds however
// long the batch takes and across restarts; spend that the key's other traffic adds meanwhile can
// leave later lines `not_run` (budget_exceeded, in the error file), never over the budget and
// never charged.
// A job bound for a vendor batch API is the exception: no live request runs its lines, so it holds
// its worst case on the budget, durably, until the vendor batch ends (holdBatchBudget).
import { GatewayError } from "../../errors.ts";
import type { Json } from "../../protocols/types.ts";
import { monthKey } from "../../lib/time.ts";
import { fromNano, monthSpendUsd, settle, toNano } from "../../money/counters.ts";
import { estimateRequest } from "../../money/estimate.ts";
import { budgetUnavailable, holdBudget } from "../../money/money.ts";
import type { KeyContext } from "../../relay/key-context.ts";
import type { RelayDeps } from "../../relay/relay-deps.ts";
import { batchDiscount } from "../vendor/apis.ts";

const overBudget = (key: KeyContext, n: number, usd: number, leftUsd: number) =>
  new GatewayError(402, `This routing key's monthly budget of $${key.monthlyBudgetUsd} for ${monthKey()} cannot cover this batch: ${n} requests estimated up to $${usd.toPrecision(3)} at their max_tokens, and $${Math.max(0, leftUsd).toPrecision(3)} is left; nothing was stored or sent upstream. Send fewer requests or a lower max_tokens, or raise monthly_budget_usd with PATCH /v1/organizations/routing-keys.`, { code: "budget_exceeded" });

/** The summed worst case of `bodies` on this key (as each line will reserve it), or null when the key has no budget. */
export function batchWorstCase(ctx: RelayDeps, key: KeyContext, bodies: Json[]): number | null {
  if (key.monthlyBudgetUsd === null) return null;
  let usd = 0;
  for (const b of bodies) usd += estimateRequest(ctx, key, b, JSON.stringify(b).length)?.usd ?? 0;
  return usd;
}

/** 402 unless what is left of the key's budget covers `usd` now. */
export async function checkBatchBudget(ctx: RelayDeps, key: KeyContext, n: number, usd: number | null): Promise<void> {
  if (usd === null || usd <= 0 || key.monthlyBudgetUsd === null) return;
  const spent = await monthSpendUsd(ctx, key).catch(() => {
    throw budgetUnavailable();
  });
  const left = key.monthlyBudgetUsd - spent.usd;
  if (usd > left) {
    ctx.services.usageQueue.refusal(key.accountId, key.id, "budget");
    throw overBudget(key, n, usd, left);
  }
}

/** A vendor batch job's hold on its key's budget: `usd` reserved on the counter of `month`. */
export interface BatchHold {
  usd: number;
  month: string;
}

/**
 * A job bound for a vendor batch API holds its summed worst case (at batch prices) on the key's
 * budget from submit until its vendor batch ends (blitz/vendor/poller.ts releases it): no live
 * request runs its lines, so nothing else would reserve them, and two jobs submitted at once must
 * not both fit what only one does. 402 when it does not fit; null when nothing is held (a key
 * without a budget).
 */
export async function holdBatchBudget(ctx: RelayDeps, key: KeyContext, n: number, usd: number | null): Promise<BatchHold | null> {
  if (usd === null || usd <= 0 || key.monthlyBudgetUsd === null) return null;
  const r = await holdBudget(ctx, key, usd);
  if (!r) {
    const spent = await monthSpendUsd(ctx, key).then((s) => s.usd, () => key.monthlyBudgetUsd!);
    ctx.services.usageQueue.refusal(key.accountId, key.id, "budget");
    throw overBudget(key, n, usd, key.monthlyBudgetUsd - spent);
  }
  return { usd: fromNano(r.nano), month: r.month };
}

/** Runs `store` (the job's one transaction); when it fails, the hold it would have carried is given back. */
export async function storeHeld(ctx: RelayDeps, key: KeyContext, hold: BatchHold | null, store: () => Promise<void>): Promise<void> {
  try {
    await store();
  } catch (e) {
    if (hold) await settle(ctx, key, { keyId: key.id, month: hold.month, nano: toNano(hold.usd) }, 0).catch(() => {});
    throw e;
  }
}

/**
 * Admits batch work (CONTRACT §9): bound for a vendor batch API (`vendorLane`), its worst case at
 * the vendor's batch price is held (holdBatchBudget); run live, it is checked (checkBatchBudget).
 * `liveWorst`: the summed worst case at live prices (batchWorstCase). Returns the hold, if any.
 */
export async function admitBatchWork(ctx: RelayDeps, key: KeyContext, n: number, liveWorst: number | null, vendorLane: { provider: string } | null): Promise<{ worstUsd: number | null; hold: BatchHold | null }> {
  if (!vendorLane) {
    await checkBatchBudget(ctx, key, n, liveWorst);
    return { worstUsd: liveWorst, hold: null };
  }
  const worstUsd = liveWorst === null ? null : liveWorst * batchDiscount(vendorLane.provider);
  return { worstUsd, hold: await holdBatchBudget(ctx, key, n, worstUsd) };
}
