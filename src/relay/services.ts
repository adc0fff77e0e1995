// The relay's services: the routing-key cache (subscribed to invalidations) and the usage queue
// (its flush job, drained on shutdown). Registered from src/services.ts.
import type { Ctx } from "../context.ts";
import type { Job } from "../jobs/job.ts";
import { startLedger } from "./budget/ledger.ts";
import { startSettleBatcher } from "./budget/settle-batch.ts";
import { startKeyCache } from "./key-cache.ts";
import { startUsageQueue } from "./usage-queue.ts";

/** Registers `ctx.services.keyCache`, `usageQueue` and `settleBatcher`; returns the usage flush job. */
export async function startRelayServices(ctx: Ctx): Promise<Job[]> {
  await startKeyCache(ctx);
  const q = startUsageQueue(ctx);
  // Registered after the queue: shutdown runs in reverse, so settlements go out before the last usage flush.
  startSettleBatcher(ctx);
  // Registered last so its shutdown runs first: the ledger's last writes and the usage stream's
  // last entries reach the queue before the queue's own drain.
  await startLedger(ctx);
  return [q.job];
}
