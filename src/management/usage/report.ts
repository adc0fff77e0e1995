// Usage grouped by day, routing key, lane, model or tag, for the dashboard and for scripts:
// GET /v1/organizations/usage/groups?by=…[&month=YYYY-MM][&tag=…], read from the daily rollup
// (by tag, or filtered by a tag: from the tagged raw records, see rawGroups). Without
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
import { priceSourceOf } from "../../money/pricing.ts";
import type { OperatorPriceLookup } from "../../money/operator-prices.ts";
import { rowsOf } from "../../store/db/rows.ts";

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

/** The rollup's rows of the report, grouped by `by` (day, key, lane, model). */
type GroupRow = ExtraRow & { date?: string; key?: string; provider?: string; model?: string; tag?: string | null };

/** A query's rows, whichever driver answered (postgres.js: an array; PGlite: `{rows}`). */

const FAILED_RAW = sql.raw(`outcome in ('error', 'broken')`);
const ATTEMPT_RAW = sql.raw(`endpoint <> 'classifier' and attempt <> 0 and outcome <> 'cache_hit'`);
/** The figures of the rollup (migration 0011's rules), computed from raw records: the same sums over the same records. */
const RAW_FIGURES = sql`
  count(*) filter (where last)::float8 as requests,
  count(*) filter (where last and ${FAILED_RAW})::float8 as errors,
  coalesce(sum(prompt_tokens), 0)::float8 as prompt_tokens,
  coalesce(sum(completion_tokens), 0)::float8 as completion_tokens,
  coalesce(sum(cost_usd), 0)::float8 as cost_usd,
  count(*) filter (where last and outcome = 'cache_hit')::float8 as cache_hits,
  coalesce(sum(saved_usd), 0)::float8 as saved_usd,
  count(*) filter (where ${ATTEMPT_RAW})::float8 as attempts,
  count(*) filter (where ${ATTEMPT_RAW} and ${FAILED_RAW})::float8 as failed_attempts,
  count(*) filter (where fell_back)::float8 as fallbacks,
  0::float8 as budget_refusals,
  0::float8 as rate_limit_refusals,
  count(*) filter (where seat and last)::float8 as seat_requests,
  coalesce(sum(cost_usd) filter (where seat), 0)::float8 as seat_cost_usd,
  array[${sql.raw(Array.from({ length: 16 }, (_, i) => `count(*) filter (where bucket = ${i + 1})`).join(", "))}]::bigint[] as ttfb`;

/** What raw records are grouped by, and the columns they answer as (the rollup's names). */
const RAW_GROUPS: Record<GroupsQuery["by"], { cols: string; n: number }> = {
  day: { cols: `to_char((created_at at time zone 'UTC')::date, 'YYYY-MM-DD') as date`, n: 1 },
  key: { cols: `coalesce(routing_key_id, '') as key`, n: 1 },
  lane: { cols: "provider", n: 1 },
  model: { cols: `provider, coalesce(model, '') as model`, n: 2 },
  tag: { cols: "t.tag", n: 1 },
};

/**
 * The report from raw records, for what the rollup cannot answer: groups by tag, and any report
 * filtered by tag (CONTRACT §9). Only tagged records are read: with `tag`, those holding it (the
 * GIN index usage_tags); by tag alone, the account's tagged records of the window (the partial
 * index usage_tagged); both within the window's month partitions. A request's records share its
 * tags, so each of its calls is whole in what is read and its figures follow the rollup's rules:
 * a request counts once, in the group of its last attempt; a fallback in the failed attempt's.
 * By tag, a record counts in the group of each of its tags; `withTotal` adds one more row (`total`
 * true, from the same read) where each tagged record counts once.
 * (Exported for bench/usage-tags.ts, which explains it.)
 */
export function rawGroupsSql(accountId: string, since: Date, endDay: string | null, by: GroupsQuery["by"], tag: string | undefined, withTotal: boolean) {
  const conds = [sql`account_id = ${accountId}`, sql`created_at >= ${since.toISOString()}::timestamptz`];
  if (endDay !== null) conds.push(sql`created_at < ${new Date(`${endDay}T00:00:00Z`).toISOString()}::timestamptz`);
  conds.push(sql`tags is not null`);
  if (tag !== undefined) conds.push(sql`tags @> array[${tag}]::text[]`);
  const g = RAW_GROUPS[by];
  const from = by === "tag" ? sql.raw("k cross join lateral unnest(k.tags) as t(tag)") : sql.raw("k");
  // The total row: the group columns null, each record once (k is read once for both: a CTE used twice is materialised).
  const total = withTotal ? sql` union all select true as total, ${sql.raw(Array.from({ length: g.n }, () => "null").join(", "))}, ${RAW_FIGURES} from k` : sql``;
  // The call: the record key less its `.<attempt>` (the rollup's regexp_replace, without a regexp),
  // computed once per record (MATERIALIZED) and not again by each window and filter.
  return sql`with r as materialized (
      select created_at, routing_key_id, provider, model, outcome, endpoint, attempt, seat, lane_index, tags,
             prompt_tokens, completion_tokens, cost_usd, saved_usd, usage_ttfb_bucket(ttfb_ms) as bucket,
             case when endpoint <> 'classifier' and outcome <> 'cache_hit' and record_key like '%.' || attempt::text
                  then left(record_key, length(record_key) - length(attempt::text) - 1) end as call,
             case when attempt = 0 then 2147483647 else attempt end as ord
      from usage_records where ${sql.join(conds, sql` and `)}
    ), k as (
      select r.*,
             case when call is null then endpoint <> 'classifier' else row_number() over (partition by call order by ord desc) = 1 end as last,
             coalesce(call is not null and ord <> 2147483647 and lead(ord) over w = ord + 1 and lead(lane_index) over w is distinct from lane_index, false) as fell_back
      from r window w as (partition by call order by ord)
    )
    select false as total, ${sql.raw(g.cols)}, ${RAW_FIGURES} from ${from} group by ${sql.raw(Array.from({ length: g.n }, (_, i) => String(i + 2)).join(", "))}${total}`;
}

async function rawGroups(tx: Db, accountId: string, since: Date, endDay: string | null, by: GroupsQuery["by"], tag: string | undefined, withTotal = false) {
  const rows = rowsOf<GroupRow & { total: boolean }>(await tx.execute(rawGroupsSql(accountId, since, endDay, by, tag, withTotal)));
  return { groups: rows.filter((r) => !r.total), total: rows.find((r) => r.total) };
}

/** a − b, figure by figure (the histogram too): the untagged share of a window, the rollup's sums less the tagged records'. */
function minus(a: ExtraRow | undefined, b: ExtraRow | undefined): ExtraRow {
  const out: Record<string, unknown> = {};
  for (const k of [...Object.keys(metrics), ...Object.keys(extra)]) {
    const x = (a as Record<string, unknown> | undefined)?.[k];
    const y = (b as Record<string, unknown> | undefined)?.[k];
    if (k === "ttfb") {
      const xs = ((x as Array<string | number> | null) ?? []).map(Number);
      const ys = ((y as Array<string | number> | null) ?? []).map(Number);
      out[k] = Array.from({ length: 16 }, (_, i) => Math.max(0, (xs[i] ?? 0) - (ys[i] ?? 0)));
    } else out[k] = Number(x ?? 0) - Number(y ?? 0);
  }
  return out as ExtraRow;
}

const byCostRows = (a: ExtraRow, b: ExtraRow) => Number(b.cost_usd) - Number(a.cost_usd) || Number(b.requests) - Number(a.requests);

export async function usageGroups(db: Db, accountId: string, q: GroupsQuery, now = new Date(), prices?: OperatorPriceLookup) {
  const win = q.month ? monthWindow(q.month, now) : rollupWindow(now);
  const nextMonth = q.month ? dayOf(new Date(Date.UTC(Number(q.month.slice(0, 4)), Number(q.month.slice(5, 7)), 1))) : null;
  const endDay = nextMonth ?? "9999-12-31";
  const where = and(eq(d.accountId, accountId), gte(d.day, dayOf(win.since)), lt(d.day, endDay));
  const all = { ...metrics, ...extra };
  const byCost = [desc(metrics.cost_usd), desc(metrics.requests)];
  // Tags (CONTRACT §9) are not in the rollup: grouping by them, or filtering by one, reads raw records.
  const raw = q.by === "tag" || q.tag !== undefined;

  const groups = await reportRead(db, async (tx): Promise<Array<Record<string, unknown>>> => {
    const sorted = (rows: GroupRow[]) => (q.by === "day" ? rows.sort((a, b) => (a.date! < b.date! ? -1 : 1)) : rows.sort(byCostRows));
    const rawRows = async () => sorted((await rawGroups(tx, accountId, win.since, nextMonth, q.by, q.tag)).groups);
    if (q.by === "tag") {
      const read = await rawGroups(tx, accountId, win.since, nextMonth, "tag", q.tag, q.tag === undefined);
      const tagged = sorted(read.groups).map((r) => ({ tag: r.tag ?? null, ...figures(r) }));
      if (q.tag !== undefined) return tagged;
      // Untagged records: the window's rollup less its tagged records, each counted once.
      const [whole] = await tx.select(all).from(d).where(where);
      const taggedOnce = read.total;
      const rest = figures(minus(whole as ExtraRow, taggedOnce));
      const empty = rest.requests === 0 && rest.attempts === 0 && rest.cost_usd === 0 && rest.budget_refusals === 0 && rest.rate_limit_refusals === 0 && rest.prompt_tokens === 0;
      return empty ? tagged : [...tagged, { tag: null, ...rest }];
    }
    if (q.by === "day") {
      const rows = raw ? await rawRows() : await tx.select({ date: d.day, ...all }).from(d).where(where).groupBy(d.day).orderBy(d.day);
      return rows.map((r) => ({ date: r.date, ...figures(r) }));
    }
    if (q.by === "key") {
      const rows = raw ? await rawRows() : await tx.select({ key: d.routingKeyId, ...all }).from(d).where(where).groupBy(d.routingKeyId).orderBy(...byCost);
      const ids = rows.map((r) => r.key!).filter((k) => k !== "");
      const labels = ids.length === 0 ? [] : await tx.select({ id: routingKeys.id, label: routingKeys.label, prefix: routingKeys.keyPrefix })
        .from(routingKeys).where(inArray(routingKeys.id, ids));
      const label = new Map(labels.map((l) => [l.id, l]));
      return rows.map((r) => ({ routing_key_id: orNull(r.key!), label: label.get(r.key!)?.label ?? null, key_prefix: label.get(r.key!)?.prefix ?? null, ...figures(r) }));
    }
    if (q.by === "lane") {
      const rows = raw ? await rawRows() : await tx.select({ provider: d.provider, ...all }).from(d).where(where).groupBy(d.provider).orderBy(...byCost);
      return rows.map((r) => ({ provider: orNull(r.provider!), ...figures(r) }));
    }
    const rows = raw ? await rawRows() : await tx.select({ provider: d.provider, model: d.model, ...all }).from(d).where(where).groupBy(d.provider, d.model).orderBy(...byCost);
    return rows.map((r) => ({
      provider: orNull(r.provider!), model: orNull(r.model!),
      price_source: r.provider && r.model ? currentPriceSource(prices, r.provider, r.model) : null,
      ...figures(r),
    }));
  });
  return { by: q.by, month: q.month ?? null, tag: q.tag ?? null, since: win.since.toISOString(), until: win.until.toISOString(), groups };
}
