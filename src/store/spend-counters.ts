// The month counters of spend, one per routing key and month: integer nano-dollars in the KV
// (`gw:{k:<key id>}:budget:<YYYY-MM>`, every key of one routing key under one hash tag so each
// script touches one Redis Cluster slot), rebuilt from the daily usage rollup in Postgres (a few
// dozen rows per key and month, however many records) when the KV lost them. The relay reserves and settles on them (relay/budget/counters.ts); management and
// /v1/key read the month's spend here.
import { and, eq, gte, lt, or, sql } from "drizzle-orm";
import { monthKey, secondsToMonthEnd } from "../lib/time.ts";
import type { Db } from "./db/client.ts";
import { usageDaily, usageRecords } from "./db/schema/index.ts";
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
/** The key's in-flight ledger: request id → entry (relay/budget/ledger/), under the same hash tag as its counter. */
export const inflightKey = (keyId: string) => `gw:{k:${keyId}}:inflight`;
/** Markers of settled request ids, one hash per minute, kept two minutes (resends never charge twice). */
export const settledKey = (keyId: string, minute: number) => `gw:{k:${keyId}}:settled:${minute}`;
export const ttl = () => secondsToMonthEnd() + SLACK_SECONDS;

function monthRange(month: string): [Date, Date] {
  const [y, m] = month.split("-").map(Number) as [number, number];
  return [new Date(Date.UTC(y, m - 1, 1)), new Date(Date.UTC(y, m, 1))];
}

const monthDays = (month: string) => {
  const [from, to] = monthRange(month);
  return [from.toISOString().slice(0, 10), to.toISOString().slice(0, 10)] as const;
};

/**
 * Spend recorded in Postgres for the key's month, counting seat traffic only when the key does,
 * read from the daily rollup. `exceptCalls`: money-call uids whose records are left out (record
 * keys are `<uid>.<attempt>`, one index range per call in the raw records): a settlement about to
 * add their cost to a rebuilt counter must not find it there already.
 */
export async function recordedSpendUsd(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls: string[] = []): Promise<number> {
  const [fromDay, toDay] = monthDays(month);
  const d = usageDaily;
  const spend = key.budgetExcludesSeats ? sql`${d.costUsd} - ${d.seatCostUsd}` : sql`${d.costUsd}`;
  const rows = await ctx.db
    .select({ total: sql<string>`coalesce(sum(${spend}), 0)` })
    .from(d)
    .where(and(eq(d.routingKeyId, key.id), gte(d.day, fromDay), lt(d.day, toDay)));
  let total = Number(rows[0]?.total ?? 0);
  if (exceptCalls.length) {
    const [from, to] = monthRange(month);
    const u = usageRecords;
    const seatFilter = key.budgetExcludesSeats ? eq(u.seat, false) : or(eq(u.seat, false), eq(u.seat, true));
    const ranges = or(...exceptCalls.map((c) => sql`(${u.recordKey} >= ${`${c}.`} and ${u.recordKey} < ${`${c}/`})`));
    const left = await ctx.db
      .select({ total: sql<string>`coalesce(sum(${u.costUsd}), 0)` })
      .from(u)
      .where(and(ranges, eq(u.routingKeyId, key.id), gte(u.createdAt, from), lt(u.createdAt, to), seatFilter));
    total -= Number(left[0]?.total ?? 0);
  }
  // The rollup adds doubles in another order than the records were priced in: round to the nano-dollar.
  return Math.round(total * NANO) / NANO;
}

/**
 * Month sums in flight, by key and month: concurrent rebuilds of one counter (every request of a
 * key after Redis came back empty) share one query instead of each running its own.
 */
const sums = new Map<string, Promise<number>>();

function sharedSpendUsd(ctx: SpendStores, key: BudgetedKey, month: string): Promise<number> {
  const k = `${key.id}|${month}|${key.budgetExcludesSeats ? 1 : 0}`;
  let p = sums.get(k);
  if (!p) {
    p = recordedSpendUsd(ctx, key, month).finally(() => sums.delete(k));
    sums.set(k, p);
  }
  return p;
}

/**
 * Rebuilds in this process that add settlements a missing counter could not take (rebuildAndAdd),
 * by key and month. A plain rebuild of the same counter waits for one instead of racing it: read
 * first, it would count the records of those settlements, which are then added again.
 */
const adding = new Map<string, Promise<void>>();
/** The calls those rebuilds will add, by key and month (a count per call: a call may be resent). */
const addingCalls = new Map<string, Map<string, number>>();

export async function seed(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls?: string[]): Promise<void> {
  const running = adding.get(`${key.id}|${month}`);
  if (running && !exceptCalls?.length) return await running.catch(() => {});
  const usd = exceptCalls?.length ? await recordedSpendUsd(ctx, key, month, exceptCalls) : await sharedSpendUsd(ctx, key, month);
  await ctx.kv.seed(counterKey(key.id, month), toNano(usd), ttl());
}

/**
 * Settlements found the counter missing (Redis lost it): rebuild it leaving their calls' records
 * out (and those of `pending`), then add them. `before` runs first (writing what this instance still holds for Postgres, whose
 * settlements went to the lost counter); `add` adds the settlements. Registered before its first
 * await, so a reader in this process that finds the counter missing waits for it.
 */
export function rebuildAndAdd(ctx: SpendStores, key: BudgetedKey, month: string, calls: string[], before: () => Promise<void>, add: () => Promise<unknown>, pending: () => Iterable<string> = () => []): Promise<void> {
  const k = `${key.id}|${month}`;
  // Every call still to be added leaves the rebuild, this one's and those queued behind it: a
  // later one finds the counter rebuilt and adds its settlements on top.
  let waiting = addingCalls.get(k);
  if (!waiting) addingCalls.set(k, (waiting = new Map()));
  for (const c of calls) waiting.set(c, (waiting.get(c) ?? 0) + 1);
  const prev = adding.get(k) ?? Promise.resolve();
  const p = prev.catch(() => {}).then(async () => {
    await before();
    // Also left out: settlements the caller still holds for this counter (`pending`), which will be
    // added on top of the rebuilt counter when they go out.
    await seed(ctx, key, month, [...new Set([...waiting.keys(), ...pending()])]);
    await add();
  }).finally(() => {
    for (const c of calls) {
      const n = (waiting.get(c) ?? 1) - 1;
      if (n > 0) waiting.set(c, n);
      else waiting.delete(c);
    }
    if (waiting.size === 0 && addingCalls.get(k) === waiting) addingCalls.delete(k);
  });
  adding.set(k, p);
  void p.catch(() => {}).finally(() => { if (adding.get(k) === p) adding.delete(k); });
  return p;
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
    return { month, usd: Math.max(0, await sharedSpendUsd(ctx, key, month)) };
  }
  if (n === null) {
    await seed(ctx, key, month);
    n = (await ctx.kv.getNumber(k)) ?? 0;
  }
  return { month, usd: Math.max(0, fromNano(n)) };
}
