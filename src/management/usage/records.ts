// The latest usage records, newest first: GET /v1/organizations/usage/records?limit&key&provider&outcome&before.
// One record is one attempt (CONTRACT §7); `lanes_tried` lists the lanes its request had tried
// up to and including this attempt, so a fallback reads as "anthropic → openai".
import { and, desc, eq, inArray, lt, type SQL } from "drizzle-orm";
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
    // A response-cache hit (outcome cache_hit): what the answer cost when first bought (docs/caching.md).
    saved_usd: r.savedUsd,
    latency_ms: r.latencyMs,
    ttfb_ms: r.ttfbMs,
    seat: r.seat,
    lanes_tried: lanesTried,
  };
}

/**
 * A page is a keyset read: `id < before`, newest first, walking an index on (account_id, id) or
 * (routing_key_id, id) in every month partition, so its cost does not depend on its depth, and
 * records written meanwhile (higher ids) never shift the pages after the first.
 */
export function usageRecordsPage(db: Db, accountId: string, q: RecordsQuery) {
  return reportRead(db, (tx) => page(tx, accountId, q));
}

async function page(db: Db, accountId: string, q: RecordsQuery) {
  const conds: SQL[] = [eq(u.accountId, accountId)];
  if (q.key) conds.push(eq(u.routingKeyId, q.key));
  if (q.provider) conds.push(eq(u.provider, q.provider));
  if (q.outcome) conds.push(eq(u.outcome, q.outcome));
  if (q.before) conds.push(lt(u.id, q.before));
  const limit = q.limit ?? RECORDS_LIMIT_DEFAULT;
  const rows = await db.select().from(u).where(and(...conds)).orderBy(desc(u.id)).limit(limit);

  // Every attempt of the requests on this page, in order, in one query.
  const requestIds = [...new Set(rows.map((r) => r.requestId).filter((x): x is string => !!x))];
  const attempts = requestIds.length === 0 ? [] : await db
    .select({ id: u.id, requestId: u.requestId, provider: u.provider, endpoint: u.endpoint })
    .from(u).where(and(eq(u.accountId, accountId), inArray(u.requestId, requestIds)));
  // Sorted here, not by the query: an ORDER BY id would tempt the planner to walk the account's
  // (account_id, id) index over every record instead of probing the request ids' index.
  attempts.sort((x, y) => x.id - y.id);
  const byRequest = new Map<string, Array<{ id: number; provider: string }>>();
  for (const a of attempts) {
    if (a.endpoint === "classifier") continue; // the classifier's call picks a lane; it is not one
    const list = byRequest.get(a.requestId!) ?? [];
    list.push(a);
    byRequest.set(a.requestId!, list);
  }
  const lanesOf = (r: Row) => {
    const list = r.requestId ? byRequest.get(r.requestId) : undefined;
    if (!list) return [r.provider];
    const upTo = list.filter((a) => a.id <= r.id).map((a) => a.provider);
    return upTo.length > 0 ? upTo : [r.provider];
  };
  const last = rows[rows.length - 1];
  return {
    records: rows.map((r) => present(r, lanesOf(r))),
    // Pass as `before` to read the next (older) page; null when this page is the last.
    next_before: rows.length === limit && last ? last.id : null,
  };
}
