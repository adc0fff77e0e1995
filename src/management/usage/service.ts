// The 30-day usage rollup (CONTRACT §6) over usage_records: one record per inference attempt,
// so `requests` counts attempts (a request that fell back to a second lane counts twice, once
// per provider). `errors` are attempts that failed (outcome `error` or `broken`; a client that
// went away is not an error). Days are UTC calendar days.
import { and, desc, eq, gte, lte, sql } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { routingKeys, usageRecords } from "../../store/db/schema/index.ts";

export const USAGE_WINDOW_DAYS = 30;

const u = usageRecords;
export const metrics = {
  requests: sql<number>`count(*)::float8`,
  errors: sql<number>`(count(*) filter (where ${u.outcome} in ('error', 'broken')))::float8`,
  prompt_tokens: sql<number>`coalesce(sum(${u.promptTokens}), 0)::float8`,
  completion_tokens: sql<number>`coalesce(sum(${u.completionTokens}), 0)::float8`,
  cost_usd: sql<number>`coalesce(sum(${u.costUsd}), 0)::float8`,
};

export type MetricRow = { requests: unknown; errors: unknown; prompt_tokens: unknown; completion_tokens: unknown; cost_usd: unknown };

export function totals(r: MetricRow | undefined) {
  return {
    requests: Number(r?.requests ?? 0),
    errors: Number(r?.errors ?? 0),
    prompt_tokens: Number(r?.prompt_tokens ?? 0),
    completion_tokens: Number(r?.completion_tokens ?? 0),
    // Sums of doubles: rounded to the nano-dollar so float noise does not show.
    cost_usd: Math.round(Number(r?.cost_usd ?? 0) * 1e9) / 1e9,
  };
}

/** The rollup's window: the last 30 days up to `now`. */
export function rollupWindow(now = new Date()): { since: Date; until: Date } {
  return { since: new Date(now.getTime() - USAGE_WINDOW_DAYS * 86400_000), until: now };
}

export async function usageRollup(db: Db, accountId: string, now = new Date()) {
  const { since } = rollupWindow(now);
  const where = and(eq(u.accountId, accountId), gte(u.createdAt, since), lte(u.createdAt, now));
  const day = sql<string>`to_char(${u.createdAt} at time zone 'UTC', 'YYYY-MM-DD')`;

  const [all, days, keys, providers] = await Promise.all([
    db.select(metrics).from(u).where(where),
    db.select({ date: day, ...metrics }).from(u).where(where).groupBy(day).orderBy(day),
    db.select({ routing_key_id: u.routingKeyId, label: routingKeys.label, key_prefix: routingKeys.keyPrefix, ...metrics })
      .from(u)
      .leftJoin(routingKeys, eq(routingKeys.id, u.routingKeyId))
      .where(where)
      .groupBy(u.routingKeyId, routingKeys.label, routingKeys.keyPrefix)
      .orderBy(desc(metrics.cost_usd), desc(metrics.requests)),
    db.select({ provider: u.provider, ...metrics }).from(u).where(where).groupBy(u.provider).orderBy(desc(metrics.cost_usd), desc(metrics.requests)),
  ]);

  return {
    window_days: USAGE_WINDOW_DAYS,
    since: since.toISOString(),
    until: now.toISOString(),
    totals: totals(all[0]),
    by_day: days.map((d) => ({ date: d.date, ...totals(d) })),
    by_key: keys.map((k) => ({ routing_key_id: k.routing_key_id, label: k.label ?? null, key_prefix: k.key_prefix ?? null, ...totals(k) })),
    by_provider: providers.map((p) => ({ provider: p.provider, ...totals(p) })),
  };
}
