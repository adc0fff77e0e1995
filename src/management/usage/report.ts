// Usage grouped by day, routing key, lane or model, for the dashboard and for scripts:
// GET /v1/organizations/usage/groups?by=…[&month=YYYY-MM]. Without `month` the window is the
// rollup's (the last 30 days), so its figures add up to GET /v1/organizations/usage; with it,
// that UTC calendar month up to now. Beside the rollup's metrics each group carries the seat
// (`sub`) share, fallbacks and time to first byte percentiles.
import { and, desc, eq, gte, lt, lte, sql, type SQL } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { routingKeys, usageRecords } from "../../store/db/schema/index.ts";
import { metrics, rollupWindow, totals, type MetricRow } from "./service.ts";
import type { GroupsQuery } from "./model.ts";

const u = usageRecords;

/**
 * A fallback is a failed attempt after which the same request went on to another lane (CONTRACT
 * §3). The retry of fallback_to_default_model stays on the lane, and the classifier's own call
 * is not a lane, so neither counts as the "other lane".
 */
const fellBack = sql`${u.outcome} <> 'ok' and ${u.requestId} is not null and exists (
  select 1 from usage_records later where later.account_id = ${u.accountId} and later.request_id = ${u.requestId}
    and later.id > ${u.id} and later.endpoint <> 'classifier' and later.lane_index is distinct from ${u.laneIndex})`;

const extra = {
  fallbacks: sql<number>`(count(*) filter (where ${fellBack}))::float8`,
  seat_requests: sql<number>`(count(*) filter (where ${u.seat}))::float8`,
  seat_cost_usd: sql<number>`coalesce(sum(${u.costUsd}) filter (where ${u.seat}), 0)::float8`,
  ttfb_p50_ms: sql<number | null>`percentile_cont(0.5) within group (order by ${u.ttfbMs})`,
  ttfb_p95_ms: sql<number | null>`percentile_cont(0.95) within group (order by ${u.ttfbMs})`,
};

type ExtraRow = MetricRow & { fallbacks: unknown; seat_requests: unknown; seat_cost_usd: unknown; ttfb_p50_ms: unknown; ttfb_p95_ms: unknown };

const ms = (v: unknown) => (v === null || v === undefined ? null : Math.round(Number(v)));

function figures(r: ExtraRow) {
  return {
    ...totals(r),
    fallbacks: Number(r.fallbacks),
    seat_requests: Number(r.seat_requests),
    seat_cost_usd: Math.round(Number(r.seat_cost_usd) * 1e9) / 1e9,
    ttfb_p50_ms: ms(r.ttfb_p50_ms),
    ttfb_p95_ms: ms(r.ttfb_p95_ms),
  };
}

/** [since, until) of a UTC month, `until` capped at now. */
export function monthWindow(month: string, now = new Date()): { since: Date; until: Date } {
  const [y, m] = month.split("-").map(Number) as [number, number];
  const since = new Date(Date.UTC(y, m - 1, 1));
  const end = new Date(Date.UTC(y, m, 1));
  return { since, until: end < now ? end : now };
}

export async function usageGroups(db: Db, accountId: string, q: GroupsQuery, now = new Date()) {
  const win = q.month ? monthWindow(q.month, now) : rollupWindow(now);
  // A month's end is exclusive (the next month's first instant); the rollup's `until` is now, inclusive.
  const upper: SQL = q.month && win.until.getTime() !== now.getTime() ? lt(u.createdAt, win.until) : lte(u.createdAt, win.until);
  const where = and(eq(u.accountId, accountId), gte(u.createdAt, win.since), upper);
  const all = { ...metrics, ...extra };
  const byCost = [desc(metrics.cost_usd), desc(metrics.requests)];

  let groups: Array<Record<string, unknown>>;
  if (q.by === "day") {
    const day = sql<string>`to_char(${u.createdAt} at time zone 'UTC', 'YYYY-MM-DD')`;
    const rows = await db.select({ date: day, ...all }).from(u).where(where).groupBy(day).orderBy(day);
    groups = rows.map((r) => ({ date: r.date, ...figures(r) }));
  } else if (q.by === "key") {
    const rows = await db.select({ routing_key_id: u.routingKeyId, label: routingKeys.label, key_prefix: routingKeys.keyPrefix, ...all })
      .from(u).leftJoin(routingKeys, eq(routingKeys.id, u.routingKeyId)).where(where)
      .groupBy(u.routingKeyId, routingKeys.label, routingKeys.keyPrefix).orderBy(...byCost);
    groups = rows.map((r) => ({ routing_key_id: r.routing_key_id, label: r.label ?? null, key_prefix: r.key_prefix ?? null, ...figures(r) }));
  } else if (q.by === "lane") {
    const rows = await db.select({ provider: u.provider, ...all }).from(u).where(where).groupBy(u.provider).orderBy(...byCost);
    groups = rows.map((r) => ({ provider: r.provider, ...figures(r) }));
  } else {
    const rows = await db.select({ provider: u.provider, model: u.model, ...all }).from(u).where(where).groupBy(u.provider, u.model).orderBy(...byCost);
    groups = rows.map((r) => ({ provider: r.provider, model: r.model ?? null, ...figures(r) }));
  }
  return { by: q.by, month: q.month ?? null, since: win.since.toISOString(), until: win.until.toISOString(), groups };
}
