// The background jobs of /blitz: the item runner once the server listens, the pick-up of
// unfinished work at start (in process: nothing else would run it), and the sweep that deletes
// results past BLITZ_JOB_RESULT_TTL_HOURS (it also ends a job whose ending instance died).
import type { Ctx } from "../../context.ts";
import { intervalJob, type Job } from "../../jobs/job.ts";
import { loggableError } from "../../errors.ts";
import { BullJobQueue } from "./bullmq-queue.ts";
import { MemoryJobQueue, type JobQueue } from "./queue.ts";
import { relayDeps } from "../../relay/relay-deps.ts";
import { itemRunner } from "./runner.ts";
import { activeJobs, deleteExpired, endIfLast, itemsInState } from "./store.ts";
import { vendorBatchPoller } from "../vendor/poller.ts";

const SWEEP_MS = 10 * 60_000;
/**
 * Redis mode: how often each instance looks whether the queue lost its items (one SET), and how
 * often one of them puts every unfinished item back anyway (a re-add of a queued item is a no-op).
 */
const RESYNC_LOOK_MS = 15_000;
const RESYNC_EVERY_MS = 10 * 60_000;

/** The background jobs: the item runner (started after listen, drained on stop) and the expiry sweep. */
export function blitzJobsJobs(ctx: Ctx): Job[] {
  const { queue, onEnded } = ctx.services.blitzJobs;
  const runner = itemRunner(relayDeps(ctx), {
    ledgerRedis: queue instanceof BullJobQueue ? queue.redis : null,
    instanceState: ctx.services.ledger ? (i) => ctx.services.ledger!.instanceState(i) : null,
    recheckMs: ctx.config.BLITZ_JOB_LOCK_MS,
    onEnded: (job) => {
      for (const f of onEnded) f(job);
    },
    onStoreError: (e, item, retryAfterMs) =>
      ctx.log.warn({ item, retryAfterMs, err: loggableError(e) }, "blitz job item could not run (a store failed); it is tried again later"),
  });
  let started = false;
  const run: Job = {
    name: "blitz-jobs",
    start() {
      if (started) return;
      started = true;
      queue.start(runner);
      if (queue instanceof MemoryJobQueue) void resume(ctx, queue);
    },
    async stop() {
      await queue.close();
    },
    async runOnce() {},
  };
  const sweep = intervalJob(ctx, "blitz-jobs-expiry", SWEEP_MS, async () => {
    // A job whose last item's instance died between the item's write and the job's end.
    for (const job of await activeJobs(ctx)) {
      const ended = await endIfLast(ctx, job.id);
      if (ended) for (const f of onEnded) f(ended);
    }
    const n = await deleteExpired(ctx);
    if (n) ctx.log.info({ jobs: n }, "blitz job results expired");
  });
  // Vendor batches (OpenAI Batch API): whichever instance claims one polls it.
  const vendor = vendorBatchPoller(ctx);
  ctx.services.blitzJobs.nudgeVendor = () => vendor.runOnce();
  if (!(queue instanceof BullJobQueue)) return [run, sweep, vendor];
  // Postgres holds every item; BullMQ's copy lives only in Redis. A Redis that restarted empty (or
  // failed over before replicating) forgot the items still queued: without this they would wait
  // for good. Within RESYNC_LOOK_MS of such a loss one instance puts them back.
  const resync = intervalJob(ctx, "blitz-jobs-resync", RESYNC_LOOK_MS, async () => {
    if (await queue.claimResync(RESYNC_EVERY_MS)) await resume(ctx, queue);
  });
  return [run, sweep, vendor, resync];
}

/**
 * Unfinished items of every active job go (back) in the queue, running ones first: the runner
 * decides their fate (an item another instance still runs is left to it). In process: what a
 * previous run left; on BullMQ: what Redis lost (an item still in the queue is not added twice).
 */
async function resume(ctx: Ctx, queue: JobQueue): Promise<void> {
  try {
    for (const job of await activeJobs(ctx)) {
      const idx = [...(await itemsInState(ctx, job.id, "running")), ...(await itemsInState(ctx, job.id, "queued"))];
      if (idx.length) await queue.add(job.id, idx);
    }
  } catch (e) {
    ctx.log.error({ err: e instanceof Error ? e.message : String(e) }, "blitz jobs could not be resumed");
  }
}
