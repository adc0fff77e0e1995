import { bigserial, boolean, doublePrecision, index, integer, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** One row per inference attempt, served or failed (CONTRACT §7). Written in batches off the hot path. */
export const usageRecords = pgTable("usage_records", {
  id: bigserial("id", { mode: "number" }).primaryKey(),
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
  /** A cache hit (outcome cache_hit, cost 0): what the answer cost when it was first bought upstream. */
  savedUsd: doublePrecision("saved_usd").notNull().default(0),
  latencyMs: integer("latency_ms").notNull().default(0),
  ttfbMs: integer("ttfb_ms"),
  seat: boolean("seat").notNull().default(false),
  createdAt: ts("created_at").notNull().defaultNow(),
}, (t) => [
  index("usage_account_time").on(t.accountId, t.createdAt),
  index("usage_key_time").on(t.routingKeyId, t.createdAt),
  // A record delivered twice (stream redelivery, a retried write) is written once. Keyed by the
  // gateway's own id of the attempt, not the request id, which a client may reuse.
  uniqueIndex("usage_record_key").on(t.recordKey),
]);
