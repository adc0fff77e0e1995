// The 30-day usage summary (CONTRACT §6), read from the daily rollup (usage_daily), never from
// the raw records: its cost does not grow with traffic. `requests` are client requests, each
// counted once whatever number of lanes it tried; `errors` are requests that ended failed (their
// last attempt's outcome `error` or `broken`; a client that went away is not an error). The
// totals also carry upstream attempts, fallbacks and 402/429 refusals (the same sums as
// /usage/groups), so one call gives every figure the dashboard's overview shows. The window is
// 30 UTC calendar days, today included.
import { and, eq, gte, inArray, ne, sql } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { routingKeys, usageDaily } from "../../store/db/schema/index.ts";
import { reportRead } from "./report-read.ts";

export const USAGE_WINDOW_DAYS = 30;
const DAY_MS = 86400_000;

const d = usageDaily;
/** Outcomes of a failed request (or attempt). */
export const FAILED = sql`${d.outcome} in ('error', 'broken')`;
export const metrics = {
  requests: sql<number>`coalesce(sum(${d.requests}), 0)::float8`,
  errors: sql<number>`coalesce(sum(${d.requests}) filter (where ${FAILED}), 0)::float8`,
  prompt_tokens: sql<number>`coalesce(sum(${d.promptTokens}), 0)::float8`,
  completion_tokens: sql<number>`coalesce(sum(${d.completionTokens}), 0)::float8`,
  cost_usd: sql<number>`coalesce(sum(${d.costUsd}), 0)::float8`,
  // Response-cache hits (docs/caching.md): requests answered at $0; saved_usd is what they cost when first bought.
  cache_hits: sql<number>`coalesce(sum(${d.requests}) filter (where ${d.outcome} = 'cache_hit'), 0)::float8`,
  saved_usd: sql<number>`coalesce(sum(${d.savedUsd}), 0)::float8`,
};

/** Totals-only figures, summed over every rollup row of the window (refusal rows included). */
const traffic = {
  attempts: sql<number>`coalesce(sum(${d.attempts}), 0)::float8`,
  fallbacks: sql<number>`coalesce(sum(${d.fallbacks}), 0)::float8`,
  budget_refusals: sql<number>`coalesce(sum(${d.budgetRefusals}), 0)::float8`,
  rate_limit_refusals: sql<number>`coalesce(sum(${d.rateLimitRefusals}), 0)::float8`,
};

export type MetricRow = { requests: unknown; errors: unknown; prompt_tokens: unknown; completion_tokens: unknown; cost_usd: unknown; cache_hits?: unknown; saved_usd?: unknown };
type Totals = { requests: number; errors: number; prompt_tokens: number; completion_tokens: number; cost_usd: number; cache_hits: number; saved_usd: number };

/** Sums of doubles: rounded to the nano-dollar so float noise does not show. */
export const usd = (v: unknown) => Math.round(Number(v ?? 0) * 1e9) / 1e9;

export function totals(r: MetricRow | undefined): Totals {
  return {
    requests: Number(r?.requests ?? 0),
    errors: Number(r?.errors ?? 0),
    prompt_tokens: Number(r?.prompt_tokens ?? 0),
    completion_tokens: Number(r?.completion_tokens ?? 0),
    cost_usd: usd(r?.cost_usd),
    cache_hits: Number(r?.cache_hits ?? 0),
    saved_usd: usd(r?.saved_usd),
  };
}

/** The summary's window: from the start of the UTC day 29 days ago up to `now` (30 calendar days). */
export function rollupWindow(now = new Date()): { since: Date; until: Date } {
  const today = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  return { since: new Date(today - (USAGE_WINDOW_DAYS - 1) * DAY_MS), until: now };
}

const day = (t: Date) => t.toISOString().slice(0, 10);

const add = (a: Totals, r: Totals) => {
  a.requests += r.requests;
  a.errors += r.errors;
  a.prompt_tokens += r.prompt_tokens;
  a.completion_tokens += r.completion_tokens;
  a.cost_usd += r.cost_usd;
  a.cache_hits += r.cache_hits;
  a.saved_usd += r.saved_usd;
};
const zero = (): Totals => ({ requests: 0, errors: 0, prompt_tokens: 0, completion_tokens: 0, cost_usd: 0, cache_hits: 0, saved_usd: 0 });
const rounded = (t: Totals): Totals => ({ ...t, cost_usd: usd(t.cost_usd), saved_usd: usd(t.saved_usd) });
const byCost = (a: Totals, b: Totals) => b.cost_usd - a.cost_usd || b.requests - a.requests;

export async function usageRollup(db: Db, accountId: string, now = new Date()) {
  const { since } = rollupWindow(now);
  // One grouped read (day × key × provider, a few rows per day) folded into the four views here.
  const rows = await reportRead(db, async (tx) => {
    const cells = await tx.select({ day: d.day, key: d.routingKeyId, provider: d.provider, ...metrics }).from(d)
      .where(and(eq(d.accountId, accountId), gte(d.day, day(since)), ne(d.outcome, "refused")))
      .groupBy(d.day, d.routingKeyId, d.provider);
    const [moves] = await tx.select(traffic).from(d).where(and(eq(d.accountId, accountId), gte(d.day, day(since))));
    const keyIds = [...new Set(cells.map((c) => c.key).filter((k) => k !== ""))];
    const labels = keyIds.length === 0 ? [] : await tx.select({ id: routingKeys.id, label: routingKeys.label, prefix: routingKeys.keyPrefix })
      .from(routingKeys).where(inArray(routingKeys.id, keyIds));
    return { cells, labels, moves };
  });
  const all = zero();
  const days = new Map<string, Totals>();
  const keys = new Map<string, Totals>();
  const providers = new Map<string, Totals>();
  const into = (m: Map<string, Totals>, k: string, t: Totals) => {
    let cur = m.get(k);
    if (!cur) m.set(k, (cur = zero()));
    add(cur, t);
  };
  for (const c of rows.cells) {
    const t = totals(c);
    add(all, t);
    into(days, c.day, t);
    into(keys, c.key, t);
    into(providers, c.provider, t);
  }
  const label = new Map(rows.labels.map((l) => [l.id, l]));
  return {
    window_days: USAGE_WINDOW_DAYS,
    since: since.toISOString(),
    until: now.toISOString(),
    totals: {
      ...rounded(all),
      attempts: Number(rows.moves?.attempts ?? 0),
      fallbacks: Number(rows.moves?.fallbacks ?? 0),
      budget_refusals: Number(rows.moves?.budget_refusals ?? 0),
      rate_limit_refusals: Number(rows.moves?.rate_limit_refusals ?? 0),
    },
    by_day: [...days].sort(([a], [b]) => (a < b ? -1 : 1)).map(([date, t]) => ({ date, ...rounded(t) })),
    by_key: [...keys].sort(([, a], [, b]) => byCost(a, b)).map(([id, t]) => ({
      routing_key_id: id === "" ? null : id, label: label.get(id)?.label ?? null, key_prefix: label.get(id)?.prefix ?? null, ...rounded(t),
    })),
    by_provider: [...providers].sort(([, a], [, b]) => byCost(a, b)).map(([provider, t]) => ({ provider, ...rounded(t) })),
  };
}
