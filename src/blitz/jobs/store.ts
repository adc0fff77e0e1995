// Postgres rows of /blitz jobs (CONTRACT §8). Every item moves to a final state at most once
// (the update is conditional on the item still being queued or running). Progress and cost are
// counted from the items (index on job_id, status) while a job runs, never kept in the job row:
// one row every item updated made concurrent items queue on its lock. The job row is touched once
// at the end, by a conditional UPDATE that only the last item's write can satisfy, so exactly one
// caller sees the job end; it stores the final counts, so an ended job is read from its row alone.
import { and, asc, eq, gt, inArray, lt, sql } from "drizzle-orm";
import type { Config } from "../../config.ts";
import type { Db } from "../../store/db/client.ts";
import type { Json } from "../../protocols/types.ts";
import { batchFiles, blitzJobItems, blitzJobs, blitzVendorBatches } from "../../store/db/schema/index.ts";
import { rowsOf } from "../../store/db/rows.ts";
import { newId } from "../../lib/ids.ts";
import { enqueueEvent } from "../../webhooks/outbox.ts";
import { presentJob } from "./present.ts";

/** What the job store uses: the database and how long a finished job's results are kept. */
export interface JobStores {
  db: Db;
  config: Pick<Config, "BLITZ_JOB_RESULT_TTL_HOURS">;
}

export type JobRow = typeof blitzJobs.$inferSelect;
export type ItemRow = typeof blitzJobItems.$inferSelect;
export type FinalItemStatus = "succeeded" | "failed" | "cancelled" | "not_run" | "interrupted";
export const ACTIVE_JOB = ["queued", "running"];

/** Rows per INSERT when a job is created (10,000 prompts stay well under Postgres' parameter cap). */
const INSERT_CHUNK = 500;

export async function createJob(ctx: JobStores, job: { id: string; accountId: string; routingKeyId: string; keyHash: string; webhookUrl: string | null; tags?: string[] | null }, requests: Json[], vendor?: VendorBound): Promise<void> {
  await ctx.db.transaction(async (tx) => {
    await tx.insert(blitzJobs).values({ ...job, total: requests.length, remaining: requests.length });
    // Items bound for a vendor batch API are `vendor` (the live queue never takes them) with their
    // batch's row in the same transaction: the poller owns them from here (blitz/vendor/poller.ts).
    const status = vendor ? "vendor" : "queued";
    for (let i = 0; i < requests.length; i += INSERT_CHUNK) {
      await tx.insert(blitzJobItems).values(requests.slice(i, i + INSERT_CHUNK).map((request, j) => ({ jobId: job.id, idx: i + j, request, status })));
    }
    if (vendor) await insertVendorBatch(tx, job, vendor);
  });
}

/** Where a job's items go when a vendor batch API answers them, and what it holds on the budget. */
export interface VendorBound {
  id: string;
  provider: string;
  laneIndex: number;
  hold: { usd: number; month: string } | null;
}

/** Bound for `lane`'s vendor batch API, with the job's hold on the budget (a new batch row id). */
export const vendorBound = (lane: { provider: string; index: number }, hold: VendorBound["hold"]): VendorBound =>
  ({ id: newId("vbat"), provider: lane.provider, laneIndex: lane.index, hold });

/** The job's vendor batch row, in the job's own transaction (blitz/vendor/poller.ts owns it from there). */
export async function insertVendorBatch(tx: Pick<JobStores["db"], "insert">, job: { id: string; routingKeyId: string }, vendor: VendorBound): Promise<void> {
  await tx.insert(blitzVendorBatches).values({
    id: vendor.id, jobId: job.id, provider: vendor.provider, laneIndex: vendor.laneIndex, claimedBy: null,
    routingKeyId: job.routingKeyId, heldUsd: vendor.hold?.usd ?? 0, heldMonth: vendor.hold?.month ?? null,
  });
}

/** The job row as stored: while it runs its counters are those of its creation (see withProgress). */
export async function getJobRow(ctx: JobStores, id: string): Promise<JobRow | null> {
  const [row] = await ctx.db.select().from(blitzJobs).where(eq(blitzJobs.id, id)).limit(1);
  return row ?? null;
}

/** The job with its progress and cost as of now. */
export async function getJob(ctx: JobStores, id: string): Promise<JobRow | null> {
  const row = await getJobRow(ctx, id);
  return row ? (await withProgress(ctx, [row]))[0]! : null;
}

/** Counts of a job's items by state and their cost: the job's progress (a SQL fragment over one job id). */
const countsOf = (jobId: unknown) => sql`select
    count(*) filter (where status in ('queued', 'running', 'vendor', 'vendor_failed'))::int as remaining,
    count(*) filter (where status = 'succeeded')::int as succeeded,
    count(*) filter (where status = 'failed')::int as failed,
    count(*) filter (where status in ('not_run', 'cancelled'))::int as not_run,
    count(*) filter (where status = 'interrupted')::int as interrupted,
    coalesce(sum(cost_usd), 0)::float8 as cost_usd
  from blitz_job_items where job_id = ${jobId}`;


interface Counts { remaining: number; succeeded: number; failed: number; not_run: number; interrupted: number; cost_usd: number }

/**
 * Jobs whose items may still change (running, queued, or cancelled with prompts still finishing)
 * get their counters from their items; a completed or failed job's row holds its final counts.
 */
export async function withProgress(ctx: JobStores, rows: JobRow[]): Promise<JobRow[]> {
  return Promise.all(rows.map(async (j) => {
    if (j.status === "completed" || j.status === "failed") return j;
    const [c] = rowsOf<Counts>(await ctx.db.execute(countsOf(j.id)));
    if (!c) return j;
    // Every item is final but the job has not ended: its ending write is on its way, or the
    // instance that would have made it died in between. Either way ending it here is exact (only
    // one write can end it), so a reader never sees nothing remaining on a running job.
    if (c.remaining === 0 && ACTIVE_JOB.includes(j.status)) {
      const now = (await endIfLast(ctx, j.id)) ?? (await getJobRow(ctx, j.id));
      if (now && !ACTIVE_JOB.includes(now.status)) return now.status === "cancelled" ? { ...now, ...countsRow(c) } : now;
    }
    return { ...j, ...countsRow(c) };
  }));
}

const countsRow = (c: Counts) =>
  ({ remaining: c.remaining, succeeded: c.succeeded, failed: c.failed, notRun: c.not_run, interrupted: c.interrupted, costUsd: Number(c.cost_usd) });

/** Results after `after` (an index), in index order. */
export async function pageItems(ctx: JobStores, jobId: string, after: number, limit: number): Promise<ItemRow[]> {
  return ctx.db.select().from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), gt(blitzJobItems.idx, after)))
    .orderBy(asc(blitzJobItems.idx)).limit(limit);
}

/**
 * Takes a queued item for this instance. Returns the item (attempts counted) or, when it was not
 * queued, its current row (final, or `running` when its last runner may have died), or null.
 */
export async function claimItem(ctx: JobStores, jobId: string, idx: number, owner: string): Promise<{ claimed: boolean; item: ItemRow } | null> {
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
export async function retakeItem(ctx: JobStores, jobId: string, idx: number, owner: string, seenAttempts: number): Promise<ItemRow | null> {
  const [item] = await ctx.db.update(blitzJobItems)
    .set({ attempts: sql`${blitzJobItems.attempts} + 1`, owner })
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), eq(blitzJobItems.status, "running"), eq(blitzJobItems.attempts, seenAttempts)))
    .returning();
  return item ?? null;
}

/** Puts a claimed item back (a rate limit said later); its attempt does not count. */
export async function requeueItem(ctx: JobStores, jobId: string, idx: number): Promise<void> {
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
 * job (its last item), so the caller announces it once; `ended: null` otherwise.
 */
export async function finishItem(ctx: JobStores, jobId: string, idx: number, o: ItemOutcome): Promise<{ changed: boolean; ended: JobRow | null }> {
  const [item] = await ctx.db.update(blitzJobItems)
    .set({ status: o.status, httpStatus: o.httpStatus, result: o.result, usage: o.usage ?? null, costUsd: o.costUsd ?? 0 })
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.idx, idx), inArray(blitzJobItems.status, ["queued", "running"])))
    .returning({ idx: blitzJobItems.idx });
  if (!item) return { changed: false, ended: null };
  return { changed: true, ended: await endIfLast(ctx, jobId) };
}

/**
 * Ends the job when none of its items is left unfinished. Runs after the item's own write has
 * committed, so of items finishing together at least the last one sees all of them final; the row
 * lock and the status condition let exactly one of those end it (the others re-check the updated
 * row and match nothing). A cancelled job is not ended again.
 */
export async function endIfLast(ctx: JobStores, jobId: string): Promise<JobRow | null> {
  return ctx.db.transaction(async (tx) => {
    const [ended] = rowsOf<{ id: string }>(await tx.execute(sql`with c as (${countsOf(jobId)})
      update blitz_jobs j set
        status = case when c.succeeded > 0 then 'completed' else 'failed' end,
        remaining = 0, succeeded = c.succeeded, failed = c.failed, not_run = c.not_run,
        interrupted = c.interrupted, cost_usd = c.cost_usd,
        finished_at = now(), expires_at = now() + make_interval(hours => ${ctx.config.BLITZ_JOB_RESULT_TTL_HOURS})
      from c
      where j.id = ${jobId} and j.status in ('queued', 'running')
        and not exists (select 1 from blitz_job_items where job_id = ${jobId} and status in ('queued', 'running', 'vendor', 'vendor_failed'))
      returning j.id`));
    if (!ended) return null;
    const [job] = await tx.select().from(blitzJobs).where(eq(blitzJobs.id, jobId)).limit(1);
    // The job's webhook is queued with its end, in this transaction: neither happens without the other.
    if (job?.webhookUrl) {
      await enqueueEvent(tx, job.accountId, { type: `job.${job.status}`, data: { job: presentJob(job) } }, [{ channel: "webhook", target: job.webhookUrl }]);
    }
    return job ?? null;
  });
}

/** Budget out: the job admits nothing more; its queued items end as `not_run` when their turn comes. */
export async function stopAdmitting(ctx: JobStores, jobId: string, reason: string): Promise<void> {
  await ctx.db.update(blitzJobs).set({ stopReason: reason }).where(and(eq(blitzJobs.id, jobId), sql`${blitzJobs.stopReason} is null`));
}

/**
 * DELETE: the job ends as `cancelled` at once and its queued items as `cancelled` (never sent);
 * items already running finish and are charged. Returns the row, or null when it had already ended.
 */
export async function cancelJob(ctx: JobStores, jobId: string): Promise<JobRow | null> {
  return ctx.db.transaction(async (tx) => {
    const [job] = await tx.update(blitzJobs)
      .set({ status: "cancelled", finishedAt: sql`now()`, expiresAt: sql`now() + make_interval(hours => ${ctx.config.BLITZ_JOB_RESULT_TTL_HOURS})` })
      .where(and(eq(blitzJobs.id, jobId), inArray(blitzJobs.status, ACTIVE_JOB)))
      .returning();
    if (!job) return null;
    await tx.update(blitzJobItems)
      .set({ status: "cancelled", httpStatus: 499, result: { error: { message: "The job was cancelled before this prompt started; it was never sent.", code: "cancelled" } } })
      .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.status, "queued")));
    // A cancel ends the job too: its webhook is queued with it, in this transaction, showing the
    // progress at the cancel (prompts still running finish and are charged afterwards).
    if (job.webhookUrl) {
      const [c] = rowsOf<Counts>(await tx.execute(countsOf(jobId)));
      const now = c ? { ...job, ...countsRow(c) } : job;
      await enqueueEvent(tx, job.accountId, { type: "job.cancelled", data: { job: presentJob(now) } }, [{ channel: "webhook", target: job.webhookUrl }]);
    }
    return job;
  }).then(async (job) => (job ? (await withProgress(ctx, [job]))[0]! : null));
}

/** Jobs with work left (the in-process queue picks them up again at start). */
export async function activeJobs(ctx: JobStores): Promise<JobRow[]> {
  return ctx.db.select().from(blitzJobs).where(inArray(blitzJobs.status, ACTIVE_JOB));
}

export async function itemsInState(ctx: JobStores, jobId: string, status: string): Promise<number[]> {
  const rows = await ctx.db.select({ idx: blitzJobItems.idx }).from(blitzJobItems)
    .where(and(eq(blitzJobItems.jobId, jobId), eq(blitzJobItems.status, status))).orderBy(asc(blitzJobItems.idx));
  return rows.map((r) => r.idx);
}

/** Deletes jobs whose results outlived BLITZ_JOB_RESULT_TTL_HOURS. Returns how many. */
export async function deleteExpired(ctx: JobStores): Promise<number> {
  const gone = await ctx.db.delete(blitzJobs).where(lt(blitzJobs.expiresAt, new Date())).returning({ id: blitzJobs.id });
  if (gone.length) {
    const ids = gone.map((g) => g.id);
    await ctx.db.delete(blitzJobItems).where(inArray(blitzJobItems.jobId, ids));
    // A batch's output and error files show its items: they go with them.
    await ctx.db.delete(batchFiles).where(inArray(batchFiles.batchId, ids));
    await ctx.db.delete(blitzVendorBatches).where(inArray(blitzVendorBatches.jobId, ids));
  }
  return gone.length;
}
