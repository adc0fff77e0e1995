// The usage pipeline: how what a request cost reaches Postgres, in one place. Built once at boot
// (services.ts) from its three stages, which run in this order on every flush:
//   1. settlements out   the pending budget settlements go to their counters (in process: the
//                        settle batcher), so a counter rebuilt from Postgres never already holds a
//                        record whose settlement has yet to add it; the queue's every write sends
//                        them first too, the ledger's drain writes included;
//   2. ledger drain in   Redis mode: this instance's pending ledger writes go out, then the usage
//                        stream's records come into the queue (null in process: no stream);
//   3. Postgres write    the usage queue writes what it holds (usage-queue.ts).
// A timed flush writes the queue every second (the ledger drains the stream on its own timer);
// shutdown stops the stages in the same order and drains what is left. hold() is the one control
// over timing: tests that count queries around a request, and anything that must see records
// wait, hold the pipeline and release it.
import type { Base } from "../base.ts";
import { intervalJob, type Job } from "../jobs/job.ts";
import type { PendingSettlements, UsageQueue } from "./usage-queue.ts";

const FLUSH_INTERVAL_MS = 1000;

/** The ledger as the pipeline's drain stage (money/ledger/index.ts). */
export interface LedgerStage {
  /** Sends this instance's pending ledger writes (records to the stream, settlements). */
  flush(): Promise<void>;
  /** Moves the usage stream into the queue and writes it. */
  drain(): Promise<number>;
  /** Stops its jobs and sends and drains what it holds (shutdown). */
  stop(): Promise<void>;
}

export interface UsageStages {
  settlements: PendingSettlements;
  ledger: LedgerStage | null;
  queue: UsageQueue;
}

export interface UsagePipeline {
  /** Writes everything recorded so far: settlements out → ledger drain in → Postgres write. */
  flush(): Promise<void>;
  /**
   * Holds the pipeline until the returned function is called: no timed or size-triggered write,
   * and the ledger's drain leaves its entries in the stream (tests that count queries or read the
   * queue's depth around a request). flush() still writes. Holds nest; a release runs once.
   */
  hold(): () => void;
  /** The timed flush, started by the gateway after the server listens and stopped first on shutdown. */
  job: Job;
  /** Shutdown: the ledger's last writes and stream entries, the pending settlements, then the last flush (retried). */
  stop(): Promise<void>;
}

export function createUsagePipeline(ctx: Base, { settlements, ledger, queue }: UsageStages): UsagePipeline {
  const flush = async (): Promise<void> => {
    await settlements.flush();
    if (ledger) {
      await ledger.flush();
      await ledger.drain();
    }
    await queue.flushQueued();
  };
  const job = intervalJob(ctx, "usage-flush", FLUSH_INTERVAL_MS, async () => {
    if (!queue.held()) await queue.flushQueued();
  });
  return {
    flush,
    hold: () => queue.hold(),
    job,
    async stop() {
      await job.stop();
      if (ledger) await ledger.stop();
      await settlements.flush();
      // Drain: retry a few times so a blip at shutdown does not lose records.
      for (let i = 0; i < 3; i++) {
        try {
          await flush();
          return;
        } catch (e) {
          ctx.log.error({ err: e instanceof Error ? e.message : String(e), pending: queue.depth() }, "usage drain failed; retrying");
          await new Promise((r) => setTimeout(r, 200));
        }
      }
    },
  };
}

/** Creates the pipeline and registers its stop on shutdown (its job is started by the gateway). */
export function startUsagePipeline(ctx: Base, stages: UsageStages): UsagePipeline {
  const p = createUsagePipeline(ctx, stages);
  ctx.onShutdown(() => p.stop());
  return p;
}
