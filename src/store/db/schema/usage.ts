import { sql } from "drizzle-orm";
import { bigint, bigserial, boolean, date, doublePrecision, index, integer, pgTable, primaryKey, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/**
 * One row per inference attempt, served or failed (CONTRACT §7). Written in batches off the hot path.
 * Partitioned by month on created_at (migration 0006: the partitions, the daily rollup trigger and
 * the functions the partition and retention jobs call are SQL the query builder does not model).
 */
export const usageRecords = pgTable("usage_records", {
  id: bigserial("id", { mode: "number" }).notNull(),
  requestId: text("request_id"),
  accountId: text("account_id").notNull(),
  routingKeyId: text("routing_key_id"),
  /** 1, 2, … per upstream attempt of one request; 0 for the record written when its instance died. */
  attempt: integer("attempt").notNull().default(0),
  /** Unique id of this record (instance, call, attempt): what makes a redelivered record a no-op. */
  recordKey: text("record_key"),
  endpoint: text("endpoint").notNull(), // chat | responses | blitz | transcriptions | classifier
  laneIndex: integer("lane_index"),
  provider: text("provider").notNull(),
  model: text("model"),
  status: integer("status").notNull(), // HTTP status of the attempt (0 = connection failure)
  outcome: text("outcome").notNull(), // ok | error | aborted | broken | interrupted | cache_hit
  errorCode: text("error_code"),
  promptTokens: integer("prompt_tokens").notNull().default(0),
  completionTokens: integer("completion_tokens").notNull().default(0),
  cachedTokens: integer("cached_tokens").notNull().default(0),
  cacheWriteTokens: integer("cache_write_tokens").notNull().default(0),
  costUsd: doublePrecision("cost_usd").notNull().default(0),
  /** True when the model was not in the pricing catalog and cost_usd uses the fallback price. */
  priceEstimated: boolean("price_estimated").notNull().default(false),
  /** Where cost_usd's price came from (CONTRACT §9): `catalog`, `operator` or `fallback`; null when nothing was priced (no usage, or a model the catalog lacks on a key without a budget, at $0). */
  priceSource: text("price_source"),
  /** A cache hit (outcome cache_hit, cost 0): what the answer cost when it was first bought upstream. */
  savedUsd: doublePrecision("saved_usd").notNull().default(0),
  latencyMs: integer("latency_ms").notNull().default(0),
  ttfbMs: integer("ttfb_ms"),
  seat: boolean("seat").notNull().default(false),
  /** The request fields this attempt's lane got adapted (CONTRACT §9: `field=action, …`); null when none. */
  adapted: text("adapted"),
  /** Session affinity (CONTRACT §9): followed, moved or new; null when the request carried no session or its key has none. */
  affinity: text("affinity"),
  /** The request's tags (CONTRACT §9: x-gateway-tags or metadata.tags), distinct, in the order sent; null when untagged. */
  tags: text("tags").array(),
  createdAt: ts("created_at").notNull().defaultNow(),
}, (t) => [
  primaryKey({ name: "usage_records_pkey", columns: [t.id, t.createdAt] }),
  index("usage_account_id").on(t.accountId, t.id),
  index("usage_key_id").on(t.routingKeyId, t.id),
  index("usage_request").on(t.requestId).where(sql`"request_id" IS NOT NULL`),
  // A record delivered twice (stream redelivery, a retried write) is written once. Keyed by the
  // gateway's own id of the attempt (not the request id, which a client may reuse) and the
  // partition key, which a redelivered record carries unchanged.
  uniqueIndex("usage_record_key").on(t.recordKey, t.createdAt),
  // ?tag= (records and groups): the records holding a tag, never a walk of every record. Partial:
  // an untagged record (most of them) costs its INSERT nothing here.
  index("usage_tags").using("gin", t.tags).where(sql`"tags" IS NOT NULL`),
  // ?by=tag: the account's tagged records of a window, never its untagged ones.
  index("usage_tagged").on(t.accountId, t.createdAt).where(sql`"tags" IS NOT NULL`),
]);

/**
 * The daily rollup every report and counter rebuild reads: one row per account, UTC day, routing
 * key ('' for none), provider, model ('' for none) and outcome, kept by a trigger on usage_records
 * in the inserting statement (only rows actually inserted count, so a redelivery adds nothing).
 * `requests` are client requests, each counted in the group of its latest attempt; `attempts`
 * are upstream attempts; `fallbacks` count in the group of the failed attempt whose request moved
 * to another lane. Refusals (402 budget, 429 rate limit) have outcome `refused` and provider ''.
 * `ttfb` is a 16-bucket histogram of time to first byte (bounds in report.ts).
 */
export const usageDaily = pgTable("usage_daily", {
  accountId: text("account_id").notNull(),
  day: date("day", { mode: "string" }).notNull(),
  routingKeyId: text("routing_key_id").notNull().default(""),
  provider: text("provider").notNull(),
  model: text("model").notNull().default(""),
  outcome: text("outcome").notNull(),
  requests: bigint("requests", { mode: "number" }).notNull().default(0),
  attempts: bigint("attempts", { mode: "number" }).notNull().default(0),
  fallbacks: bigint("fallbacks", { mode: "number" }).notNull().default(0),
  budgetRefusals: bigint("budget_refusals", { mode: "number" }).notNull().default(0),
  rateLimitRefusals: bigint("rate_limit_refusals", { mode: "number" }).notNull().default(0),
  promptTokens: bigint("prompt_tokens", { mode: "number" }).notNull().default(0),
  completionTokens: bigint("completion_tokens", { mode: "number" }).notNull().default(0),
  cachedTokens: bigint("cached_tokens", { mode: "number" }).notNull().default(0),
  cacheWriteTokens: bigint("cache_write_tokens", { mode: "number" }).notNull().default(0),
  costUsd: doublePrecision("cost_usd").notNull().default(0),
  seatRequests: bigint("seat_requests", { mode: "number" }).notNull().default(0),
  seatCostUsd: doublePrecision("seat_cost_usd").notNull().default(0),
  /** What the cache hits of the group would have cost upstream. */
  savedUsd: doublePrecision("saved_usd").notNull().default(0),
  ttfb: bigint("ttfb", { mode: "number" }).array().notNull().default(sql`'{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}'`),
}, (t) => [
  primaryKey({ name: "usage_daily_pkey", columns: [t.accountId, t.day, t.routingKeyId, t.provider, t.model, t.outcome] }),
  index("usage_daily_key").on(t.routingKeyId, t.day),
]);
