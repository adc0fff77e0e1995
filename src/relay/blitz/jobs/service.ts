// Wires /blitz jobs into an instance: the queue (BullMQ on Redis, in process otherwise), the item
// runner once the server listens, the pick-up of unfinished work at start (in process: nothing
// else would run it), and the sweep that deletes results past BLITZ_JOB_RESULT_TTL_HOURS.
import type { Base, Ctx } from "../../../context.ts";
import { intervalJob, type Job } from "../../../jobs/job.ts";
import { BullJobQueue } from "./bullmq-queue.ts";
import { MemoryJobQueue, type ItemRef, type JobQueue } from "./queue.ts";
import { itemRunner } from "./runner.ts";
import { activeJobs, deleteExpired, finishItem, itemsInState, type JobRow } from "./store.ts";

const SWEEP_MS = 10 * 60_000;

export interface BlitzJobs {
  queue: JobQueue;
  /** Called when a job's last item ends (webhooks hook in here). */
  onEnded: Array<(job: JobRow) => void>;
}

export function createBlitzJobs(base: Base): BlitzJobs {
  const log = (e: unknown, item: ItemRef | null) =>
    base.log.error({ item, err: e instanceof Error ? e.message : String(e) }, "blitz job item failed");
  const lost = async (item: ItemRef) => {
    // Stalled twice in BullMQ: no runner will finish it.
    await finishItem(base, item.jobId, item.idx, {
      status: "interrupted", httpStatus: 500,
      result: { error: { message: "The gateway instances running this prompt stopped twice; it was not retried again.", code: "interrupted" } },
    }).catch((e) => log(e, item));
  };
  // Shared only when the jobs' database is shared too (an embedded database belongs to one process).
  const queue = base.config.redis && base.config.DATABASE_URL
    ? new BullJobQueue({ target: base.config.redis, database: databaseName(base.config.DATABASE_URL), concurrency: base.config.BLITZ_JOB_CONCURRENCY, lockMs: base.config.BLITZ_JOB_LOCK_MS, onError: log, onLost: (i) => void lost(i) })
    : new MemoryJobQueue(base.config.BLITZ_JOB_CONCURRENCY, log);
  return { queue, onEnded: [] };
}

/** Host, port and database name of DATABASE_URL (never its credentials): the job queue's namespace. */
function databaseName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.hostname}:${u.port || "5432"}${u.pathname}`;
  } catch {
    return "unparsed";
  }
}

/** The background jobs: the item runner (started after listen, drained on stop) and the expiry sweep. */
export function blitzJobsJobs(ctx: Ctx): Job[] {
  const { queue, onEnded } = ctx.services.blitzJobs;
  const runner = itemRunner(ctx, {
    ledgerRedis: queue instanceof BullJobQueue ? queue.redis : null,
    instanceState: ctx.services.ledger ? (i) => ctx.services.ledger!.instanceState(i) : null,
    recheckMs: ctx.config.BLITZ_JOB_LOCK_MS,
    onEnded: (job) => {
      for (const f of onEnded) f(job);
    },
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
    const n = await deleteExpired(ctx);
    if (n) ctx.log.info({ jobs: n }, "blitz job results expired");
  });
  return [run, sweep];
}

/** In process: the jobs a previous run left unfinished go back in the queue (running items first: the runner decides their fate). */
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
