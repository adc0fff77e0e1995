// The /blitz job queue of an instance: BullMQ on Redis, in process otherwise (its background
// jobs are background.ts's).
import type { Base } from "../../base.ts";
import { loggableError } from "../../errors.ts";
import { BullJobQueue } from "./bullmq-queue.ts";
import { MemoryJobQueue, type ItemRef, type JobQueue } from "./queue.ts";
import { finishItem, type JobRow } from "./store.ts";

export interface BlitzJobs {
  queue: JobQueue;
  /** Called when a job ends: its last item, or a cancel (webhooks hook in here). */
  onEnded: Array<(job: JobRow) => void>;
  /** Polls the vendor batches now (set by the background job once it exists). */
  nudgeVendor?: () => Promise<void>;
}

export function createBlitzJobs(base: Base): BlitzJobs {
  const log = (e: unknown, item: ItemRef | null) =>
    base.log.error({ item, err: loggableError(e) }, "blitz job item failed");
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
