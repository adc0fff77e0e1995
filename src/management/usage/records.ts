// The latest usage records, newest first: GET /v1/organizations/usage/records?limit&key&provider&outcome&tag&before.
// One record is one attempt (CONTRACT §7); `lanes_tried` lists the lanes its request had tried
// up to and including this attempt, so a fallback reads as "anthropic → openai".
import { and, desc, eq, lt, sql, type SQL } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { usageRecords } from "../../store/db/schema/index.ts";
import { iso } from "../../lib/time.ts";
import { RECORDS_LIMIT_DEFAULT, type RecordsQuery } from "./model.ts";
import { reportRead } from "./report-read.ts";

const u = usageRecords;
type Row = typeof usageRecords.$inferSelect;

function present(r: Row, lanesTried: string[]) {
  return {
    id: r.id,
    request_id: r.requestId,
    created_at: iso(r.createdAt),
    routing_key_id: r.routingKeyId,
    attempt: r.attempt,
    endpoint: r.endpoint,
    lane_index: r.laneIndex,
    provider: r.provider,
    model: r.model,
    status: r.status,
    outcome: r.outcome,
    error_code: r.errorCode,
    prompt_tokens: r.promptTokens,
    completion_tokens: r.completionTokens,
    cached_tokens: r.cachedTokens,
    cost_usd: r.costUsd,
    // The model was not in the pricing catalog: cost_usd uses the conservative fallback price (CONTRACT §7).
    price_estimated: r.priceEstimated,
    // Where cost_usd's price came from: catalog, operator or fallback (null: nothing was priced) (CONTRACT §9).
    price_source: r.priceSource,
    // A response-cache hit (outcome cache_hit): what the answer cost when first bought (docs/caching.md).
    saved_usd: r.savedUsd,
    latency_ms: r.latencyMs,
    ttfb_ms: r.ttfbMs,
    seat: r.seat,
    // The request fields this attempt's lane got mapped, dropped or moved (CONTRACT §9), e.g. "reasoning_effort=mapped, verbosity=dropped"; null when none.
    adapted: r.adapted ?? null,
    // Session affinity (CONTRACT §9): followed, moved or new; null without a session.
    affinity: r.affinity,
    // The request's tags (CONTRACT §9: x-gateway-tags or metadata.tags); [] when untagged.
    tags: r.tags ?? [],
    lanes_tried: lanesTried,
  };
}

/**
 * A page is a keyset read: `id < before`, newest first, walking an index on (account_id, id) or
 * (routing_key_id, id) in every month partition, so its cost does not depend on its depth, and
 * records written meanwhile (higher ids) never shift the pages after the first.
 *
 * The page and its lanes are one statement. Without a `provider` or `outcome` filter its work is
 * bounded by `limit` (that many index entries, and for each an index probe of its request's
 * attempts), so it needs no report fence: a fence is a transaction around it, four more round
 * trips to Postgres that cost more than the read itself. A filter can make the walk skip any
 * number of records before it finds `limit` that match: that read stays fenced (report-read.ts).
 */
export async function usageRecordsPage(db: Db, accountId: string, q: RecordsQuery) {
  const rows = q.provider || q.outcome || q.tag ? await reportRead(db, (tx) => pageQuery(tx, accountId, q)) : await pageQuery(db, accountId, q);
  const limit = q.limit ?? RECORDS_LIMIT_DEFAULT;
  const last = rows[rows.length - 1];
  return {
    records: rows.map(({ lanes, ...r }) => present(r, lanes && lanes.length > 0 ? lanes : [r.provider])),
    // Pass as `before` to read the next (older) page; null when this page is the last.
    next_before: rows.length === limit && last ? last.id : null,
  };
}

/** The page's one statement (exported for bench/usage-scale.ts, which explains it). */
export function pageQuery(db: Db, accountId: string, q: RecordsQuery) {
  const conds: SQL[] = [eq(u.accountId, accountId)];
  if (q.key) conds.push(eq(u.routingKeyId, q.key));
  if (q.provider) conds.push(eq(u.provider, q.provider));
  if (q.outcome) conds.push(eq(u.outcome, q.outcome));
  if (q.before) conds.push(lt(u.id, q.before));
  // The GIN index of the tagged records (usage_tags, partial: hence the IS NOT NULL) finds those holding the tag.
  if (q.tag) conds.push(sql`${u.tags} is not null and ${u.tags} @> array[${q.tag}]::text[]`);
  // The lanes its request had tried up to and including this attempt, in order: a probe of the
  // request-id index per record, evaluated for the page's rows only (the LIMIT is inside).
  // The classifier's call picks a lane; it is not one.
  const page = db.select().from(u).where(and(...conds)).orderBy(desc(u.id)).limit(q.limit ?? RECORDS_LIMIT_DEFAULT).as("p");
  return db.select({
    ...page._.selectedFields,
    lanes: sql<string[] | null>`(select array_agg(a.provider order by a.id) from ${u} a
      where a.request_id = p.request_id and a.account_id = p.account_id and a.id <= p.id and a.endpoint <> 'classifier')`,
  }).from(page).orderBy(desc(page.id));
}
