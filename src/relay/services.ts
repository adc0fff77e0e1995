// The relay's services: the routing-key cache (subscribed to invalidations) and the usage queue
// (its flush job, drained on shutdown). Registered from src/services.ts.
import type { Ctx } from "../context.ts";
import type { Job } from "../jobs/job.ts";
import { startKeyCache } from "./key-cache.ts";
import { startUsageQueue } from "./usage-queue.ts";

/** Registers `ctx.services.keyCache` and `ctx.services.usageQueue`; returns the flush job. */
export async function startRelayServices(ctx: Ctx): Promise<Job[]> {
  await startKeyCache(ctx);
  const q = startUsageQueue(ctx);
  return [q.job];
}
