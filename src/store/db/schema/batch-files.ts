import { index, integer, pgTable, text, timestamp } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/**
 * A file of the OpenAI Files API (POST /v1/files), owned by the routing key that uploaded it.
 * An input file (`purpose: batch`) holds its JSONL text; a batch's output and error files hold no
 * text of their own: their lines are written from the batch's items when they are read, so a
 * result is stored once.
 */
export const batchFiles = pgTable("batch_files", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  routingKeyId: text("routing_key_id").notNull(),
  /** batch (an upload) | batch_output (a batch's output or error file) */
  purpose: text("purpose").notNull(),
  filename: text("filename").notNull(),
  bytes: integer("bytes").notNull(),
  /** The uploaded text; null for a batch's output and error files. */
  content: text("content"),
  /** Output and error files: the batch whose items they show. */
  batchId: text("batch_id"),
  /** input | output | error */
  kind: text("kind").notNull().default("input"),
  createdAt: ts("created_at").notNull().defaultNow(),
  expiresAt: ts("expires_at"),
}, (t) => [index("batch_files_key").on(t.routingKeyId, t.createdAt), index("batch_files_batch").on(t.batchId)]);
