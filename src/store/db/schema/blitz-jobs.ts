import { doublePrecision, index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";
import { sql } from "drizzle-orm";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/**
 * A /blitz job (CONTRACT §8): its counters move with each item's final write, in the same
 * statement, so progress is one row read and exactly one writer sees the job finish.
 */
export const blitzJobs = pgTable("blitz_jobs", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  routingKeyId: text("routing_key_id").notNull(),
  /** The key's hash, so any instance resolves it through its key cache (a revoked key stops the job). */
  keyHash: text("key_hash").notNull(),
  /** queued | running | completed | cancelled | failed */
  status: text("status").notNull().default("queued"),
  total: integer("total").notNull(),
  /** Items not yet in a final state. Counters are written when the job ends; until then they are counted from the items. */
  remaining: integer("remaining").notNull(),
  succeeded: integer("succeeded").notNull().default(0),
  failed: integer("failed").notNull().default(0),
  /** Items that never ran: cancelled, or refused once the key's budget ran out. */
  notRun: integer("not_run").notNull().default(0),
  interrupted: integer("interrupted").notNull().default(0),
  costUsd: doublePrecision("cost_usd").notNull().default(0),
  /** Why the job stopped admitting items (`budget_exceeded`), null while it admits. */
  stopReason: text("stop_reason"),
  webhookUrl: text("webhook_url"),
  /** `blitz` (POST /blitz/jobs) or `batch` (POST /v1/batches: the OpenAI Batch API over the same runner). */
  kind: text("kind").notNull().default("blitz"),
  /** Batches: the endpoint every line calls (`/v1/chat/completions`, `/v1/responses`, `/v1/embeddings`). */
  endpoint: text("endpoint"),
  /** Batches: the uploaded JSONL file the lines came from. */
  inputFileId: text("input_file_id"),
  /** Batches: the client's metadata (up to 16 string pairs), echoed back. */
  metadata: jsonb("metadata"),
  /** Batches: the worst case of every line, checked against the key's budget at submit. */
  reservedUsd: doublePrecision("reserved_usd"),
  /** The tags the job was submitted with (CONTRACT §9), written on every item's records; null when untagged. */
  tags: text("tags").array(),
  createdAt: ts("created_at").notNull().defaultNow(),
  finishedAt: ts("finished_at"),
  /** Results are deleted after this (set when the job ends). */
  expiresAt: ts("expires_at"),
}, (t) => [index("blitz_jobs_key").on(t.routingKeyId, t.createdAt), index("blitz_jobs_expiry").on(t.expiresAt)]);

/** One prompt of a job: its chat body, then its result. `idx` is the prompt's index. */
export const blitzJobItems = pgTable("blitz_job_items", {
  jobId: text("job_id").notNull(),
  idx: integer("idx").notNull(),
  /** queued | running | succeeded | failed | cancelled | not_run | interrupted */
  status: text("status").notNull().default("queued"),
  request: jsonb("request").notNull(),
  /** Batches: the line's custom_id, unique within its batch. */
  customId: text("custom_id"),
  httpStatus: integer("http_status"),
  result: jsonb("result"),
  usage: jsonb("usage"),
  costUsd: doublePrecision("cost_usd").notNull().default(0),
  /** Runs started (a crash redelivery that reruns the item makes it 2). */
  attempts: integer("attempts").notNull().default(0),
  /** Instance running it (crash recovery reads it). */
  owner: text("owner"),
}, (t) => [primaryKey({ columns: [t.jobId, t.idx] }), index("blitz_job_items_state").on(t.jobId, t.status)]);

/**
 * A job's items sent to a lane's vendor batch API (OpenAI Batch API): the vendor's batch id is kept
 * here before anything else happens to it, so any instance polls it after a restart; one instance
 * at a time holds the claim (`claimedBy` until `claimedUntil`).
 */
export const blitzVendorBatches = pgTable("blitz_vendor_batches", {
  id: text("id").primaryKey(),
  jobId: text("job_id").notNull(),
  /** The lane's provider (`openai`) and index on the key. */
  provider: text("provider").notNull(),
  laneIndex: integer("lane_index").notNull(),
  /** The vendor's batch id, null until the upload and create succeeded. */
  vendorBatchId: text("vendor_batch_id"),
  /** submitting | polling | ended */
  status: text("status").notNull().default("submitting"),
  vendorStatus: text("vendor_status"),
  claimedBy: text("claimed_by"),
  claimedUntil: ts("claimed_until"),
  createdAt: ts("created_at").notNull().defaultNow(),
  endedAt: ts("ended_at"),
  /**
   * The hold on the key's budget while the vendor works (CONTRACT §9 "Batch work"): the job's
   * worst case at batch prices, reserved on the month counter of `held_month` at submit and
   * released when the batch ends (then 0). A counter rebuilt from Postgres counts open holds.
   */
  routingKeyId: text("routing_key_id"),
  heldUsd: doublePrecision("held_usd").notNull().default(0),
  heldMonth: text("held_month"),
}, (t) => [
  index("blitz_vendor_batches_status").on(t.status),
  index("blitz_vendor_batches_job").on(t.jobId),
  index("blitz_vendor_batches_held").on(t.routingKeyId, t.heldMonth).where(sql`${t.heldUsd} > 0`),
]);
