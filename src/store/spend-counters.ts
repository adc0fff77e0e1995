// The month counters of spend, one per routing key and month: integer nano-dollars in the KV
// (`gw:{k:<key id>}:budget:<YYYY-MM>`, every key of one routing key under one hash tag so each
// script touches one Redis Cluster slot), rebuilt from the daily usage rollup in Postgres (a few
// dozen rows per key and month, however many records) when the KV lost them, leaving out the calls
// of the month's adding set (their settlements add their cost on top). The relay reserves and
// settles on them (money/counters.ts); management and /v1/key read the month's spend here.
import { and, eq, gte, lt, or, sql } from "drizzle-orm";
import { monthKey, secondsToMonthEnd } from "../lib/time.ts";
import type { Db } from "./db/client.ts";
import { blitzVendorBatches, usageDaily, usageRecords } from "./db/schema/index.ts";
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
/** The key's in-flight ledger: request id → entry (money/ledger/), under the same hash tag as its counter. */
export const inflightKey = (keyId: string) => `gw:{k:${keyId}}:inflight`;
/** Markers of settled request ids, one hash per minute, kept two minutes (resends never charge twice). */
export const settledKey = (keyId: string, minute: number) => `gw:{k:${keyId}}:settled:${minute}`;
/**
 * The month's adding set: money calls whose records may already be in Postgres while their cost
 * is still to be added on top of the counter (a settlement that found the counter missing, or one
 * of an instance's calls put back after Redis lost its state). Every rebuild leaves their records out.
 */
export const addingKey = (keyId: string, month: string) => `gw:{k:${keyId}}:adding:${month}`;
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
export async function recordedSpendUsd(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls: string[] = [], withHolds = false): Promise<number> {
  const [fromDay, toDay] = monthDays(month);
  const d = usageDaily;
  const spend = key.budgetExcludesSeats ? sql`${d.costUsd} - ${d.seatCostUsd}` : sql`${d.costUsd}`;
  // The open vendor batches' holds on this month (blitz/vendor/poller.ts), read in the same
  // statement as the spend: one snapshot of both, whatever the poller commits meanwhile.
  const v = blitzVendorBatches;
  const holds = withHolds
    ? sql` + (select coalesce(sum(${v.heldUsd}), 0) from ${v} where ${v.routingKeyId} = ${key.id} and ${v.heldMonth} = ${month} and ${v.heldUsd} > 0)`
    : sql``;
  const rows = await ctx.db
    .select({ total: sql<string>`coalesce(sum(${spend}), 0)${holds}` })
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
 * What the counter holds when rebuilt: the month's recorded spend and the open vendor batches'
 * holds. Sums in flight, by key, month and the calls left out: concurrent rebuilds of one counter
 * (every request of a key after Redis came back empty) share one query instead of each running its own.
 */
const sums = new Map<string, Promise<number>>();

function sharedSpendUsd(ctx: SpendStores, key: BudgetedKey, month: string, exceptCalls: readonly string[] = []): Promise<number> {
  const k = `${key.id}|${month}|${key.budgetExcludesSeats ? 1 : 0}|${[...exceptCalls].sort().join(" ")}`;
  let p = sums.get(k);
  if (!p) {
    p = recordedSpendUsd(ctx, key, month, [...exceptCalls], true).finally(() => sums.delete(k));
    sums.set(k, p);
  }
  return p;
}

/**
 * Rounds of read-the-set, sum, set-if-unchanged before a rebuild gives up (the caller retries
 * later). A round is lost only to a settlement that found the counter missing during its sum.
 */
const SEED_TRIES = 10;

/**
 * Rebuilds a missing counter from Postgres, on any instance: the records of the calls in the
 * month's adding set (their cost is still to be added on top of the counter by the settlement
 * that put them there) are left out, and the set is read again when it changed before the counter
 * was set (kv/ledger-scripts.ts, SEED, has the orderings). Nothing when the counter exists.
 * In Redis mode a counter lost with Redis's state is rebuilt only after the ledger's recovery
 * barrier (money/ledger/epoch.ts), once every live instance has put its own in-flight
 * calls back in the set: the callers that write the counter wait for it.
 */
export async function seed(ctx: SpendStores, key: BudgetedKey, month: string): Promise<void> {
  const counter = counterKey(key.id, month);
  const adding = addingKey(key.id, month);
  for (let i = 0; i < SEED_TRIES; i++) {
    const seen = await ctx.kv.addingMembers(adding);
    const usd = await sharedSpendUsd(ctx, key, month, seen);
    if (await ctx.kv.seedExcept(counter, adding, inflightKey(key.id), toNano(usd), ttl(), seen)) return;
  }
  throw new Error(`the counter of ${key.id} for ${month} could not be rebuilt: its adding set kept changing`);
}

/**
 * This month's spend from the live counter (in-flight reservations included). While the KV is
 * unreachable or the counter is missing, the spend recorded in Postgres answers instead.
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
  // Missing: the spend recorded in Postgres answers, and the counter is left for the money path
  // to rebuild (after Redis lost its state, only once every instance has put its in-flight calls
  // back: a reader rebuilding it earlier could count a record whose settlement then adds it again).
  if (n === null) return { month, usd: Math.max(0, await sharedSpendUsd(ctx, key, month)) };
  return { month, usd: Math.max(0, fromNano(n)) };
}
