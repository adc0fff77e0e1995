// Budget admission and settlement on the month counters (used through money.ts): reserve before
// forwarding, settle the real cost after. The counters themselves (keys, rebuild from Postgres,
// the month's spend) live in store/spend-counters.ts, which management reads too.
import { monthKey } from "../lib/time.ts";
import type { LimitVerdict } from "../store/kv/limit-window.ts";
import { counterKey, seed, toNano, ttl, type BudgetedKey, type SpendStores } from "../store/spend-counters.ts";
import type { LedgerEntry, LimitCall } from "../store/kv/types.ts";

export { addingKey, counterKey, fromNano, inflightKey, monthSpendUsd, recordedSpendUsd, seed, settledKey, toNano, ttl, type BudgetedKey, type SpendStores } from "../store/spend-counters.ts";

export interface Reservation {
  keyId: string;
  month: string;
  nano: number;
  /** The month counter after this reservation (nano; budgeted reservations only). */
  total?: number;
  /** The rate limits' verdict when the admission carried them; when it refused, nothing was reserved. */
  limits?: LimitVerdict;
}

/**
 * Reserves `usd` against the key's monthly budget, atomically across instances; when that does not
 * fit but `minUsd` does, reserves what remains (the reservation says how much). Returns null when
 * not even `minUsd` fits (the caller answers 402 budget_exceeded). A key without a budget (or
 * `usd` null: nothing the request may use counts toward it) reserves nothing and, without limits,
 * makes no KV call; its settlement still counts the month's spend. `limits` are admitted in the
 * same call, after the budget: a refusal comes back as `limits.refused` with nothing reserved.
 */
export async function reserve(ctx: SpendStores, key: BudgetedKey, usd: number | null, minUsd = usd, entry?: LedgerEntry, onMissing?: () => Promise<void>, limits?: LimitCall): Promise<Reservation | null> {
  const month = monthKey();
  const k = counterKey(key.id, month);
  if (key.monthlyBudgetUsd === null || usd === null) {
    if (!limits) return { keyId: key.id, month, nano: 0 };
    const r = await ctx.kv.reserve(k, 0, 0, -1, ttl(), entry, limits);
    return { keyId: key.id, month, nano: 0, limits: r.limits };
  }
  const nano = Math.max(0, toNano(usd));
  const min = Math.min(nano, Math.max(0, toNano(minUsd ?? usd)));
  const limit = toNano(key.monthlyBudgetUsd);
  let r = await ctx.kv.reserve(k, nano, min, limit, ttl(), entry, limits);
  if (r.missing) {
    // A missing counter may mean Redis lost its state: the ledger re-asserts what is in flight first.
    await onMissing?.();
    await seed(ctx, key, month);
    r = await ctx.kv.reserve(k, nano, min, limit, ttl(), entry, limits);
  }
  if (!r.ok && !r.limits?.refused) return null;
  return { keyId: key.id, month, nano: r.granted, total: r.total, limits: r.limits };
}

/** Replaces a reservation with the real cost (0 releases it). Safe to call once per reservation. */
export async function settle(ctx: SpendStores, key: BudgetedKey, res: Reservation, actualUsd: number): Promise<void> {
  const delta = toNano(actualUsd) - res.nano;
  if (delta === 0) return;
  const k = counterKey(res.keyId, res.month);
  const v = await ctx.kv.adjust(k, delta, ttl());
  if (v === null) {
    // The counter vanished in between (Redis restart): rebuild it; the record carries this cost.
    await seed(ctx, key, res.month);
    await ctx.kv.adjust(k, toNano(actualUsd), ttl());
  }
}

/**
 * Applies several settlements of one key's month at once: `deltaNano` is Σ(real − reserved),
 * `actualNano` Σ real (what the counter gains if it has to be rebuilt, reservations being lost with it).
 */
export async function settleMany(ctx: SpendStores, key: BudgetedKey, month: string, deltaNano: number, actualNano: number): Promise<void> {
  if (deltaNano === 0) return;
  const k = counterKey(key.id, month);
  const v = await ctx.kv.adjust(k, deltaNano, ttl());
  if (v === null) {
    await seed(ctx, key, month);
    await ctx.kv.adjust(k, actualNano, ttl());
  }
}
