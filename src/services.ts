// Registers each feature module's services and background jobs on the context.
// Jobs are started after the server listens and stopped (drained) on shutdown.
import type { Ctx } from "./context.ts";
import type { Job } from "./jobs/job.ts";
import { startRelayServices } from "./relay/services.ts";
import { createMailer } from "./mail/mailer.ts";
import { accountExpiryJob } from "./jobs/account-expiry.ts";
import { bridgeHealthJob } from "./jobs/bridge-health.ts";
import { installMetrics } from "./metrics/index.ts";
import { installTracing } from "./metrics/tracing.ts";
import { installAccessLog } from "./http/access-log.ts";
import { registerClassifier } from "./relay/routing/classifier.ts";

export async function startServices(ctx: Ctx): Promise<Job[]> {
  const jobs: Job[] = [];
  jobs.push(...(await startRelayServices(ctx)));
  registerClassifier(ctx);
  installMetrics(ctx);
  installAccessLog(ctx);
  await installTracing(ctx);
  const mailer = createMailer(ctx.config, ctx.log);
  ctx.services.mailer = mailer;
  ctx.onShutdown(() => mailer.close());
  jobs.push(accountExpiryJob(ctx));
  jobs.push(bridgeHealthJob(ctx));
  void ctx;
  return jobs;
}
