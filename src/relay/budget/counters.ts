// Budget counters (used through money.ts). Month-scoped integer counters of nano-dollars in the KV
// (`gw:{k:<key id>}:budget:<YYYY-MM>`, every key of one routing key under one hash tag so each
// script touches one Redis Cluster slot): reserve before forwarding, settle the real cost after.
// A counter Redis lost is rebuilt from the usage records in Postgres.
import { and, eq, gte, lt, or, sql } from "drizzle-orm";
import type { Base } from "../../context.ts";
import { monthKey, secondsToMonthEnd } from "../../lib/time.ts";
import { usageRecords } from "../../store/db/schema/index.ts";
import type { LimitVerdict } from "../../store/kv/limit-window.ts";
import type { LedgerEntry, LimitCall } from "../../store/kv/types.ts";

const NANO = 1e9;
/** Counters outlive their month a little, so late settles still find them. */
const SLACK_SECONDS = 3 * 86400;

export const toNano = (usd: number) => Math.round(usd * NANO);
export const fromNano = (n: number) => n / NANO;

export interface BudgetedKey {
  id: string;
  monthlyBudgetUsd: number | null;
  budgetExcludesSeats: boolean;
}

export const counterKey = (keyId: string, month: string) => `gw:{k:${keyId}}:budget:${month}`;
/** The key's in-flight ledger: request id → entry (ledger.ts), under the same hash tag as its counter. */
export const inflightKey = (keyId: string) => `gw:{k:${keyId}}:inflight`;
/** Markers of settled request ids, one hash per minute, kept two minutes (resends never charge twice). */
export const settledKey = (keyId: string, minute: number) => `gw:{k:${keyId}}:settled:${minute}`;
export const ttl = () => secondsToMonthEnd() + SLACK_SECONDS;

function monthRange(month: string): [Date, Date] {
  const [y, m] = month.split("-").map(Number) as [number, number];
  return [new Date(Date.UTC(y, m - 1, 1)), new Date(Date.UTC(y, m, 1))];
}

/** Spend recorded in Postgres for the key's month, counting seat traffic only when the key does. */
/**
 * Spend recorded in Postgres for the key's month, counting seat traffic only when the key does.
 * `exceptCalls`: money-call uids whose records are left out (record keys are `<uid>.<attempt>`):
 * a settlement about to add their cost to a rebuilt counter must not find it there already.
 */
export async function recordedSpendUsd(ctx: Base, key: BudgetedKey, month: string, exceptCalls: string[] = []): Promise<number> {
  const [from, to] = monthRange(month);
  const seatFilter = key.budgetExcludesSeats ? eq(usageRecords.seat, false) : or(eq(usageRecords.seat, false), eq(usageRecords.seat, true));
  const except = exceptCalls.length
    ? sql`(${usageRecords.recordKey} is null or regexp_replace(${usageRecords.recordKey}, '[.][^.]*$', '') not in (${sql.join(exceptCalls.map((u) => sql`${u}`), sql`, `)}))`
    : undefined;
  const rows = await ctx.db
    .select({ total: sql<string>`coalesce(sum(${usageRecords.costUsd}), 0)` })
    .from(usageRecords)
    .where(and(eq(usageRecords.routingKeyId, key.id), gte(usageRecords.createdAt, from), lt(usageRecords.createdAt, to), seatFilter, except));
  return Number(rows[0]?.total ?? 0);
}

export async function seed(ctx: Base, key: BudgetedKey, month: string, exceptCalls?: string[]): Promise<void> {
  const usd = await recordedSpendUsd(ctx, key, month, exceptCalls);
  await ctx.kv.seed(counterKey(key.id, month), toNano(usd), ttl());
}

export interface Reservation {
  keyId: string;
  month: string;
  nano: number;
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
export async function reserve(ctx: Base, key: BudgetedKey, usd: number | null, minUsd = usd, entry?: LedgerEntry, onMissing?: () => Promise<void>, limits?: LimitCall): Promise<Reservation | null> {
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
  return { keyId: key.id, month, nano: r.granted, limits: r.limits };
}

/** Replaces a reservation with the real cost (0 releases it). Safe to call once per reservation. */
export async function settle(ctx: Base, key: BudgetedKey, res: Reservation, actualUsd: number): Promise<void> {
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
 * This month's spend from the live counter (in-flight reservations included), rebuilt if lost.
 * While the KV is unreachable, the settled spend recorded in Postgres answers instead.
 */
export async function monthSpendUsd(ctx: Base, key: BudgetedKey): Promise<{ month: string; usd: number }> {
  const month = monthKey();
  const k = counterKey(key.id, month);
  let n: number | null;
  try {
    n = await ctx.kv.getNumber(k);
  } catch {
    return { month, usd: Math.max(0, await recordedSpendUsd(ctx, key, month)) };
  }
  if (n === null) {
    await seed(ctx, key, month);
    n = (await ctx.kv.getNumber(k)) ?? 0;
  }
  return { month, usd: Math.max(0, fromNano(n)) };
}

/**
 * Applies several settlements of one key's month at once: `deltaNano` is Σ(real − reserved),
 * `actualNano` Σ real (what the counter gains if it has to be rebuilt, reservations being lost with it).
 */
export async function settleMany(ctx: Base, key: BudgetedKey, month: string, deltaNano: number, actualNano: number): Promise<void> {
  if (deltaNano === 0) return;
  const k = counterKey(key.id, month);
  const v = await ctx.kv.adjust(k, deltaNano, ttl());
  if (v === null) {
    await seed(ctx, key, month);
    await ctx.kv.adjust(k, actualNano, ttl());
  }
}
