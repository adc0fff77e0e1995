// Registers each feature module's services and background jobs on the context.
// Jobs are started after the server listens and stopped (drained) on shutdown.
import type { Ctx } from "./context.ts";
import type { Job } from "./jobs/job.ts";
import { bridgeHealthJob } from "./jobs/bridge-health.ts";

export async function startServices(ctx: Ctx): Promise<Job[]> {
  const jobs: Job[] = [];
  void ctx;
  jobs.push(bridgeHealthJob(ctx));
  return jobs;
}
