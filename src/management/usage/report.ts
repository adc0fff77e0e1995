// Usage grouped by day, routing key, lane or model, for the dashboard and for scripts:
// GET /v1/organizations/usage/groups?by=…[&month=YYYY-MM], read from the daily rollup. Without
// `month` the window is the summary's (30 UTC calendar days, today included), so its figures add
// up to GET /v1/organizations/usage; with it, that UTC calendar month up to now. Beside the
// summary's figures each group carries attempts, failed attempts, fallbacks, refusals, the seat
// (`sub`) share and time to first byte p50/p95 (from a histogram: see ttfbPercentile).
import { and, desc, eq, gte, inArray, lt, sql } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { routingKeys, usageDaily } from "../../store/db/schema/index.ts";
import { FAILED, metrics, rollupWindow, totals, usd, type MetricRow } from "./service.ts";
import type { GroupsQuery } from "./model.ts";
import { reportRead } from "./report-read.ts";
import { getAdapter } from "../../providers/registry.ts";
import { priceSourceOf } from "../../relay/pricing.ts";
import type { OperatorPriceLookup } from "../../relay/operator-prices.ts";

const d = usageDaily;

/** Upper bounds (ms) of the rollup's time-to-first-byte buckets (migration 0006); the 16th is open. */
export const TTFB_BOUNDS = [25, 50, 100, 150, 200, 300, 400, 500, 750, 1000, 1500, 2000, 3000, 5000, 10000];

/**
 * The p-quantile of a bucket histogram: the bucket holding the rank, interpolated linearly inside
 * it (so within one bucket's width of the exact value); null without any sample.
 */
export function ttfbPercentile(hist: number[], p: number): number | null {
  const n = hist.reduce((a, b) => a + b, 0);
  if (n === 0) return null;
  const rank = p * n;
  let below = 0;
  for (let i = 0; i < hist.length; i++) {
    const c = hist[i]!;
    if (c > 0 && below + c >= rank) {
      const lo = i === 0 ? 0 : TTFB_BOUNDS[i - 1]!;
      const hi = TTFB_BOUNDS[i];
      if (hi === undefined) return lo;
      return Math.round(lo + ((hi - lo) * Math.max(0, rank - below)) / c);
    }
    below += c;
  }
  return TTFB_BOUNDS.at(-1)!;
}

const extra = {
  attempts: sql<number>`coalesce(sum(${d.attempts}), 0)::float8`,
  failed_attempts: sql<number>`coalesce(sum(${d.attempts}) filter (where ${FAILED}), 0)::float8`,
  fallbacks: sql<number>`coalesce(sum(${d.fallbacks}), 0)::float8`,
  budget_refusals: sql<number>`coalesce(sum(${d.budgetRefusals}), 0)::float8`,
  rate_limit_refusals: sql<number>`coalesce(sum(${d.rateLimitRefusals}), 0)::float8`,
  seat_requests: sql<number>`coalesce(sum(${d.seatRequests}), 0)::float8`,
  seat_cost_usd: sql<number>`coalesce(sum(${d.seatCostUsd}), 0)::float8`,
  saved_usd: sql<number>`coalesce(sum(${d.savedUsd}), 0)::float8`,
  // Sixteen plain sums: far cheaper per rollup row than an array-adding aggregate.
  ttfb: sql<Array<string | number>>`array[${sql.raw(Array.from({ length: 16 }, (_, i) => `coalesce(sum(ttfb[${i + 1}]), 0)`).join(", "))}]::bigint[]`,
};

type ExtraRow = MetricRow & { [K in keyof typeof extra]: unknown };

function figures(r: ExtraRow) {
  const hist = ((r.ttfb as Array<string | number> | null) ?? []).map(Number);
  return {
    ...totals(r),
    attempts: Number(r.attempts),
    failed_attempts: Number(r.failed_attempts),
    fallbacks: Number(r.fallbacks),
    budget_refusals: Number(r.budget_refusals),
    rate_limit_refusals: Number(r.rate_limit_refusals),
    seat_requests: Number(r.seat_requests),
    seat_cost_usd: usd(r.seat_cost_usd),
    saved_usd: usd(r.saved_usd),
    ttfb_p50_ms: ttfbPercentile(hist, 0.5),
    ttfb_p95_ms: ttfbPercentile(hist, 0.95),
  };
}

/** [since, until) of a UTC month, `until` capped at now. */
export function monthWindow(month: string, now = new Date()): { since: Date; until: Date } {
  const [y, m] = month.split("-").map(Number) as [number, number];
  const since = new Date(Date.UTC(y, m - 1, 1));
  const end = new Date(Date.UTC(y, m, 1));
  return { since, until: end < now ? end : now };
}

const dayOf = (t: Date) => t.toISOString().slice(0, 10);
/** '' in the rollup stands for none (a record without a key or model, a refusal without a lane). */
const orNull = (s: string) => (s === "" ? null : s);

/** Who prices a provider's model today (CONTRACT §9): the group's `price_source`; null = no price (the dashboard flags it). */
function currentPriceSource(prices: OperatorPriceLookup | undefined, provider: string, model: string): "operator" | "catalog" | null {
  const adapter = getAdapter(provider);
  if (!adapter) return null;
  return priceSourceOf(adapter.pricingId ?? adapter.id, model, prices?.get(adapter.id, model) ?? null);
}

export async function usageGroups(db: Db, accountId: string, q: GroupsQuery, now = new Date(), prices?: OperatorPriceLookup) {
  const win = q.month ? monthWindow(q.month, now) : rollupWindow(now);
  const endDay = q.month ? dayOf(new Date(Date.UTC(Number(q.month.slice(0, 4)), Number(q.month.slice(5, 7)), 1))) : "9999-12-31";
  const where = and(eq(d.accountId, accountId), gte(d.day, dayOf(win.since)), lt(d.day, endDay));
  const all = { ...metrics, ...extra };
  const byCost = [desc(metrics.cost_usd), desc(metrics.requests)];

  const groups = await reportRead(db, async (tx): Promise<Array<Record<string, unknown>>> => {
    if (q.by === "day") {
      const rows = await tx.select({ date: d.day, ...all }).from(d).where(where).groupBy(d.day).orderBy(d.day);
      return rows.map((r) => ({ date: r.date, ...figures(r) }));
    }
    if (q.by === "key") {
      const rows = await tx.select({ key: d.routingKeyId, ...all }).from(d).where(where).groupBy(d.routingKeyId).orderBy(...byCost);
      const ids = rows.map((r) => r.key).filter((k) => k !== "");
      const labels = ids.length === 0 ? [] : await tx.select({ id: routingKeys.id, label: routingKeys.label, prefix: routingKeys.keyPrefix })
        .from(routingKeys).where(inArray(routingKeys.id, ids));
      const label = new Map(labels.map((l) => [l.id, l]));
      return rows.map((r) => ({ routing_key_id: orNull(r.key), label: label.get(r.key)?.label ?? null, key_prefix: label.get(r.key)?.prefix ?? null, ...figures(r) }));
    }
    if (q.by === "lane") {
      const rows = await tx.select({ provider: d.provider, ...all }).from(d).where(where).groupBy(d.provider).orderBy(...byCost);
      return rows.map((r) => ({ provider: orNull(r.provider), ...figures(r) }));
    }
    const rows = await tx.select({ provider: d.provider, model: d.model, ...all }).from(d).where(where).groupBy(d.provider, d.model).orderBy(...byCost);
    return rows.map((r) => ({
      provider: orNull(r.provider), model: orNull(r.model),
      price_source: r.provider && r.model ? currentPriceSource(prices, r.provider, r.model) : null,
      ...figures(r),
    }));
  });
  return { by: q.by, month: q.month ?? null, since: win.since.toISOString(), until: win.until.toISOString(), groups };
}
