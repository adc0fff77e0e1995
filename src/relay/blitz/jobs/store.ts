// Postgres rows of /blitz jobs (CONTRACT §8). Every item moves to a final state at most once
// (the update is conditional on the item still being queued or running) and the job's counters
// move in the same transaction, so progress is one row and exactly one caller sees the job end.
import { and, asc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import type { Base } from "../../../base.ts";
import type { Json } from "../../../protocols/types.ts";
import { blitzJobItems, blitzJobs } from "../../../store/db/schema/index.ts";
import { enqueueEvent } from "../../../webhooks/outbox.ts";
import { presentJob } from "./present.ts";

export type JobRow = typeof blitzJobs.$inferSelect;
export type ItemRow = typeof blitzJobItems.$inferSelect;
export type FinalItemStatus = "succeeded" | "failed" | "cancelled" | "not_run" | "interrupted";
export const ACTIVE_JOB = ["queued", "running"];

/** Rows per INSERT when a job is created (10,000 prompts stay well under Postgres' parameter cap). */
const INSERT_CHUNK = 500;

export async function createJob(ctx: Base, job: { id: string; accountId: string; routingKeyId: string; keyHash: string; webhookUrl: string | null }, requests: Json[]): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    await tx.insert(blitzJobs).values({ ...job, total: requests.length, remaining: requests.length });
    for (let i = 0; i < requests.length; i += INSERT_CHUNK) {
      await tx.insert(blitzJobItems).values(requests.slice(i, i + INSERT_CHUNK).map((request, j) => ({ jobId: job.id, idx: i + j, request })));
    }
  });
}

export async function getJob(ctx: Base, id: string): Promise<JobRow | null> {
  const [row] = await ctx.db.select().from(blitzJobs).where(eq(blitzJobs.id, id)).limit(1);
  return row ?? null;
}

/** Results after `after` (an index), in index order. */
export async function pageItems(ctx: Base, jobId: string, after: number, limit: number): Promise<ItemRow[]> {
  return ctx.db.select().from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), gt(blitzJobItems.idx, after)))
    .orderBy(asc(blitzJobItems.idx)).limit(limit);
}

/**
 * Takes a queued item for this instance. Returns the item (attempts counted) or, when it was not
 * queued, its current row (final, or `running` when its last runner may have died), or null.
 */
export async function claimItem(ctx: Base, jobId: string, idx: number, owner: string): Promise<{ claimed: boolean; item: ItemRow } | null> {
  const [item] = await ctx.db.update(blitzJobItems)
    .set({ status: "running", attempts: sql`${blitzJobItems.attempts} + 1`, owner })
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), eq(blitzJobItems.status, "queued")))
    .returning();
  if (item) {
    await ctx.db.update(blitzJobs).set({ status: "running" }).where(and(eq(blitzJobs.id, jobId), eq(blitzJobs.status, "queued")));
    return { claimed: true, item };
  }
  const [cur] = await ctx.db.select().from(blitzJobItems).where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx))).limit(1);
  return cur ? { claimed: false, item: cur } : null;
}

/** A crashed runner's item is taken over for a rerun (attempts counts it). */
export async function retakeItem(ctx: Base, jobId: string, idx: number, owner: string, seenAttempts: number): Promise<ItemRow | null> {
  const [item] = await ctx.db.update(blitzJobItems)
    .set({ attempts: sql`${blitzJobItems.attempts} + 1`, owner })
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), eq(blitzJobItems.status, "running"), eq(blitzJobItems.attempts, seenAttempts)))
    .returning();
  return item ?? null;
}

/** Puts a claimed item back (a rate limit said later); its attempt does not count. */
export async function requeueItem(ctx: Base, jobId: string, idx: number): Promise<void> {
  await ctx.db.update(blitzJobItems)
    .set({ status: "queued", attempts: sql`greatest(${blitzJobItems.attempts} - 1, 0)`, owner: null })
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), eq(blitzJobItems.status, "running")));
}

export interface ItemOutcome {
  status: FinalItemStatus;
  httpStatus: number;
  result: Json;
  usage?: Json | null;
  costUsd?: number;
}

/**
 * Writes an item's final state if it has none yet. Returns the job row when this write ended the
 * job (its last item), so the caller announces it once; `ended: false` otherwise.
 */
export async function finishItem(ctx: Base, jobId: string, idx: number, o: ItemOutcome): Promise<{ changed: boolean; ended: JobRow | null }> {
  return ctx.db.transaction(async (tx) => {
    const [item] = await tx.update(blitzJobItems)
      .set({ status: o.status, httpStatus: o.httpStatus, result: o.result, usage: o.usage ?? null, costUsd: o.costUsd ?? 0 })
      .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), inArray(blitzJobItems.status, ["queued", "running"])))
      .returning({ idx: blitzJobItems.idx });
    if (!item) return { changed: false, ended: null };
    const ok = o.status === "succeeded" ? 1 : 0;
    const [job] = await tx.update(blitzJobs).set({
      remaining: sql`${blitzJobs.remaining} - 1`,
      succeeded: sql`${blitzJobs.succeeded} + ${ok}`,
      failed: sql`${blitzJobs.failed} + ${o.status === "failed" ? 1 : 0}`,
      notRun: sql`${blitzJobs.notRun} + ${o.status === "not_run" || o.status === "cancelled" ? 1 : 0}`,
      interrupted: sql`${blitzJobs.interrupted} + ${o.status === "interrupted" ? 1 : 0}`,
      costUsd: sql`${blitzJobs.costUsd} + ${o.costUsd ?? 0}`,
      status: sql`case when ${blitzJobs.remaining} = 1 and ${blitzJobs.status} in ('queued', 'running')
        then (case when ${blitzJobs.succeeded} + ${ok} > 0 then 'completed' else 'failed' end) else ${blitzJobs.status} end`,
      finishedAt: sql`case when ${blitzJobs.remaining} = 1 and ${blitzJobs.finishedAt} is null then now() else ${blitzJobs.finishedAt} end`,
      expiresAt: sql`case when ${blitzJobs.remaining} = 1 and ${blitzJobs.expiresAt} is null then now() + make_interval(hours => ${ctx.config.BLITZ_JOB_RESULT_TTL_HOURS}) else ${blitzJobs.expiresAt} end`,
    }).where(eq(blitzJobs.id, jobId)).returning();
    const ended = job && job.remaining === 0 && job.status !== "cancelled" ? job : null;
    // The job's webhook is queued with its end, in this transaction: neither happens without the other.
    if (ended?.webhookUrl) {
      await enqueueEvent(tx, ended.accountId, { type: `job.${ended.status}`, data: { job: presentJob(ended) } }, [{ channel: "webhook", target: ended.webhookUrl }]);
    }
    return { changed: true, ended };
  });
}

/** Budget out: the job admits nothing more; its queued items end as `not_run` when their turn comes. */
export async function stopAdmitting(ctx: Base, jobId: string, reason: string): Promise<void> {
  await ctx.db.update(blitzJobs).set({ stopReason: reason }).where(and(eq(blitzJobs.id, jobId), sql`${blitzJobs.stopReason} is null`));
}

/**
 * DELETE: the job ends as `cancelled` at once and its queued items as `cancelled` (never sent);
 * items already running finish and are charged. Returns the row, or null when it had already ended.
 */
export async function cancelJob(ctx: Base, jobId: string): Promise<JobRow | null> {
  return ctx.db.transaction(async (tx) => {
    const [job] = await tx.update(blitzJobs)
      .set({ status: "cancelled", finishedAt: sql`now()`, expiresAt: sql`now() + make_interval(hours => ${ctx.config.BLITZ_JOB_RESULT_TTL_HOURS})` })
      .where(and(eq(blitzJobs.id, jobId), inArray(blitzJobs.status, ACTIVE_JOB)))
      .returning();
    if (!job) return null;
    const dropped = await tx.update(blitzJobItems)
      .set({ status: "cancelled", httpStatus: 499, result: { error: { message: "The job was cancelled before this prompt started; it was never sent.", code: "cancelled" } } })
      .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.status, "queued")))
      .returning({ idx: blitzJobItems.idx });
    const [after] = await tx.update(blitzJobs)
      .set({ remaining: sql`${blitzJobs.remaining} - ${dropped.length}`, notRun: sql`${blitzJobs.notRun} + ${dropped.length}` })
      .where(eq(blitzJobs.id, jobId)).returning();
    return after ?? job;
  });
}

/** Jobs with work left (the in-process queue picks them up again at start). */
export async function activeJobs(ctx: Base): Promise<JobRow[]> {
  return ctx.db.select().from(blitzJobs).where(inArray(blitzJobs.status, ACTIVE_JOB));
}

export async function itemsInState(ctx: Base, jobId: string, status: string): Promise<number[]> {
  const rows = await ctx.db.select({ idx: blitzJobItems.idx }).from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.status, status))).orderBy(asc(blitzJobItems.idx));
  return rows.map((r) => r.idx);
}

/** Deletes jobs whose results outlived BLITZ_JOB_RESULT_TTL_HOURS. Returns how many. */
export async function deleteExpired(ctx: Base): Promise<number> {
  const gone = await ctx.db.delete(blitzJobs).where(lt(blitzJobs.expiresAt, new Date())).returning({ id: blitzJobs.id });
  if (gone.length) await ctx.db.delete(blitzJobItems).where(inArray(blitzJobItems.jobId, gone.map((g) => g.id)));
  return gone.length;
}
