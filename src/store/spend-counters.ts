// The month counters of spend, one per routing key and month: integer nano-dollars in the KV
// (`gw:{k:<key id>}:budget:<YYYY-MM>`, every key of one routing key under one hash tag so each
// script touches one Redis Cluster slot), rebuilt from the usage records in Postgres when the KV
// lost them. The relay reserves and settles on them (relay/budget/counters.ts); management and
// /v1/key read the month's spend here.
import { and, eq, gte, lt, or, sql } from "drizzle-orm";
import { monthKey, secondsToMonthEnd } from "../lib/time.ts";
import type { Db } from "./db/client.ts";
import { usageRecords } from "./db/schema/index.ts";
import type { KV } from "./kv/types.ts";

/** What the counters need: the database and the KV. */
export interface SpendStores {
  db: Db;
  kv: KV;
}

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

/**
 * Spend recorded in Postgres for the key's month, counting seat traffic only when the key does.
 * `exceptCalls`: money-call uids whose records are left out (record keys are `<uid>.<attempt>`):
 * a settlement about to add their cost to a rebuilt counter must not find it there already.
 */
export async function recordedSpendUsd(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls: string[] = []): Promise<number> {
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

export async function seed(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls?: string[]): Promise<void> {
  const usd = await recordedSpendUsd(ctx, key, month, exceptCalls);
  await ctx.kv.seed(counterKey(key.id, month), toNano(usd), ttl());
}

/**
 * This month's spend from the live counter (in-flight reservations included), rebuilt if lost.
 * While the KV is unreachable, the settled spend recorded in Postgres answers instead.
 */
export async function monthSpendUsd(ctx: SpendStores, key: BudgetedKey): Promise<{ month: string; usd: number }> {
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
