// Postgres rows of the OpenAI Batch API: uploaded files, and batches, which are /blitz jobs of
// kind `batch` (their items run on the same runner, survive restarts the same way and are
// charged the same way: jobs/store.ts). A batch's output and error files are rows without text:
// their lines are written from the items when read (present.ts), so each result is stored once.
import { and, asc, desc, eq, getTableColumns, gt, inArray, lt, or, sql } from "drizzle-orm";

import { batchFiles, blitzJobItems, blitzJobs } from "../../store/db/schema/index.ts";
import { insertVendorBatch, type JobRow, type JobStores, type VendorBound } from "../jobs/store.ts";
import type { BatchLine } from "./jsonl.ts";

export type FileRow = typeof batchFiles.$inferSelect;

/** Rows per INSERT of a batch's items (well under Postgres' parameter cap). */
const INSERT_CHUNK = 500;

export async function insertFile(ctx: JobStores, f: typeof batchFiles.$inferInsert): Promise<FileRow> {
  const [row] = await ctx.db.insert(batchFiles).values(f).returning();
  return row!;
}

/** The key's file, or null (another key's file is as unknown as a missing one). */
export async function ownFile(ctx: JobStores, routingKeyId: string, id: string): Promise<FileRow | null> {
  const [row] = await ctx.db.select().from(batchFiles).where(and(eq(batchFiles.id, id), eq(batchFiles.routingKeyId, routingKeyId))).limit(1);
  return row ?? null;
}

/** A file without its text: what a listing shows. */
export type FileInfo = Omit<FileRow, "content">;
const { content: _content, ...infoColumns } = getTableColumns(batchFiles);

/** The key's files, newest first; their text is not read (an upload may be 50 MB). */
export async function listFiles(ctx: JobStores, routingKeyId: string, o: { after: FileInfo | null; limit: number; purpose: string | null }): Promise<FileInfo[]> {
  const conds = [eq(batchFiles.routingKeyId, routingKeyId)];
  if (o.purpose) conds.push(eq(batchFiles.purpose, o.purpose));
  if (o.after) conds.push(or(lt(batchFiles.createdAt, o.after.createdAt), and(eq(batchFiles.createdAt, o.after.createdAt), lt(batchFiles.id, o.after.id)))!);
  return ctx.db.select(infoColumns).from(batchFiles).where(and(...conds)).orderBy(desc(batchFiles.createdAt), desc(batchFiles.id)).limit(o.limit);
}

export async function deleteFile(ctx: JobStores, routingKeyId: string, id: string): Promise<boolean> {
  const gone = await ctx.db.delete(batchFiles).where(and(eq(batchFiles.id, id), eq(batchFiles.routingKeyId, routingKeyId))).returning({ id: batchFiles.id });
  return gone.length > 0;
}

export interface NewBatch {
  id: string;
  accountId: string;
  routingKeyId: string;
  keyHash: string;
  endpoint: string;
  inputFileId: string;
  metadata: Record<string, string> | null;
  reservedUsd: number | null;
}

/**
 * A batch and its lines, in one transaction: either every line is queued (or, bound for a vendor
 * batch API, `vendor` with its batch row) or nothing is.
 */
export async function createBatch(ctx: JobStores, b: NewBatch, lines: BatchLine[], vendor?: VendorBound): Promise<void> {
  const status = vendor ? "vendor" : "queued";
  await ctx.db.transaction(async (tx) => {
    await tx.insert(blitzJobs).values({ ...b, kind: "batch", webhookUrl: null, total: lines.length, remaining: lines.length });
    for (let i = 0; i < lines.length; i += INSERT_CHUNK) {
      await tx.insert(blitzJobItems).values(lines.slice(i, i + INSERT_CHUNK).map((l, j) => ({ jobId: b.id, idx: i + j, request: l.body, customId: l.customId, status })));
    }
    if (vendor) await insertVendorBatch(tx, b, vendor);
  });
}

/** The key's batches, newest first, after the batch `after` (OpenAI's cursor paging). */
export async function listBatches(ctx: JobStores, routingKeyId: string, after: JobRow | null, limit: number): Promise<JobRow[]> {
  const conds = [eq(blitzJobs.routingKeyId, routingKeyId), eq(blitzJobs.kind, "batch")];
  if (after) conds.push(or(lt(blitzJobs.createdAt, after.createdAt), and(eq(blitzJobs.createdAt, after.createdAt), lt(blitzJobs.id, after.id)))!);
  return ctx.db.select().from(blitzJobs).where(and(...conds)).orderBy(desc(blitzJobs.createdAt), desc(blitzJobs.id)).limit(limit);
}

/** The model the batch's first line names (the batch object's `model`). */
export async function firstModel(ctx: JobStores, jobId: string): Promise<string | null> {
  const [row] = await ctx.db.select({ model: sql<string | null>`${blitzJobItems.request}->>'model'` }).from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, 0))).limit(1);
  return row?.model ?? null;
}

/** A batch's output (`output`) or error (`error`) file row, if it was made. */
export async function resultFiles(ctx: JobStores, batchId: string): Promise<FileRow[]> {
  return ctx.db.select().from(batchFiles).where(eq(batchFiles.batchId, batchId));
}

/** Makes the batch's result file once (any instance; a second insert of the same id does nothing). */
export async function ensureResultFile(ctx: JobStores, f: typeof batchFiles.$inferInsert): Promise<void> {
  await ctx.db.insert(batchFiles).values(f).onConflictDoNothing();
}

/** Items of a batch after index `after`, in index order, whose status is in `statuses`. */
export async function itemsPage(ctx: JobStores, jobId: string, after: number, limit: number, statuses: string[]) {
  return ctx.db.select({
    idx: blitzJobItems.idx, customId: blitzJobItems.customId, status: blitzJobItems.status,
    httpStatus: blitzJobItems.httpStatus, result: blitzJobItems.result, attempts: blitzJobItems.attempts,
  }).from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), gt(blitzJobItems.idx, after), inArray(blitzJobItems.status, statuses)))
    .orderBy(asc(blitzJobItems.idx)).limit(limit);
}

/** The summed token usage of a batch's items (the batch object's `usage`). */
export async function usageOf(ctx: JobStores, jobId: string): Promise<{ input: number; output: number }> {
  const [row] = await ctx.db.select({
    input: sql<number>`coalesce(sum((${blitzJobItems.usage}->>'prompt_tokens')::bigint), 0)::float8`,
    output: sql<number>`coalesce(sum((${blitzJobItems.usage}->>'completion_tokens')::bigint), 0)::float8`,
  }).from(blitzJobItems).where(eq(blitzJobItems.jobId, jobId));
  return { input: Number(row?.input ?? 0), output: Number(row?.output ?? 0) };
}

