// Builds every per-instance service once at boot, in dependency order, as one typed object
// (`ctx.services`): a missing or misordered service is a compile error, not a silent no-op.
// Background jobs are returned to the gateway, started after the server listens and stopped
// (drained) on shutdown; drains registered here run in reverse order of registration.
import { LRUCache } from "lru-cache";
import type { Base } from "./base.ts";
import type { Ctx, Services } from "./context.ts";
import type { Job } from "./jobs/job.ts";
import { createMailer } from "./mail/mailer.ts";
import { accountExpiryJob } from "./jobs/account-expiry.ts";
import { bridgeHealthJob } from "./jobs/bridge-health.ts";
import { createGatewayMetrics } from "./metrics/index.ts";
import { installTracing } from "./metrics/tracing.ts";
import { installAccessLog, RequestTracker } from "./http/access-log.ts";
import { startKeyCache } from "./relay/key-cache.ts";
import { createUsageQueue } from "./relay/usage-queue.ts";
import { startUsagePipeline } from "./relay/usage-pipeline.ts";
import { createSettleBatcher } from "./money/settle-batch.ts";
import { usagePartitionsJob } from "./jobs/usage-partitions.ts";
import { startLedger } from "./money/ledger/index.ts";
import { startBudgetLeases } from "./money/leases.ts";
import { RateLimits } from "./relay/limits/rate-limits.ts";
import { startOperatorPrices } from "./money/operator-prices.ts";
import { BLITZ_INSTANCE_CAP, Semaphore } from "./blitz/pool.ts";
import { blitzJobsJobs } from "./blitz/jobs/background.ts";
import { createBlitzJobs } from "./blitz/jobs/service.ts";
import { createSubState } from "./providers/sub/state.ts";
import { createBridgeModelState } from "./providers/bridge/model-state.ts";
import { createStripeClient } from "./signup/stripe-checkout.ts";
import { ResponseCache } from "./cache/response-cache.ts";
import { MemoryCacheStore, RedisCacheStore } from "./cache/store.ts";
import type { RedisKV } from "./store/kv/redis.ts";
import { COMMAND_TIMEOUT_MS, connectRedis } from "./store/kv/connect.ts";
import { watchReplies } from "./store/kv/reply-watchdog.ts";
import { fleetNamespace } from "./store/kv/index.ts";
import { LaneCooldowns } from "./relay/routing/cooldowns.ts";
import { SessionAffinity } from "./relay/routing/affinity.ts";
import { webhookSender } from "./webhooks/sender.ts";
import { budgetAlerts } from "./webhooks/budget-alerts.ts";

export async function buildServices(base: Base): Promise<Services> {
  const keyCache = await startKeyCache(base);
  // An invalid PRICES_FILE fails the boot here, with the message saying what is wrong.
  const prices = await startOperatorPrices(base);
  // The usage pipeline, in its order: settlements out → ledger drain in (Redis mode) → Postgres
  // write (relay/usage-pipeline.ts). Its shutdown stops them in that order: the ledger's last
  // writes and stream entries reach the queue, the pending settlements go out, then the last flush.
  const settleBatcher = createSettleBatcher(base);
  const usageQueue = createUsageQueue(base, settleBatcher);
  const ledger = await startLedger(base, usageQueue);
  const usage = startUsagePipeline(base, { settlements: settleBatcher, ledger, queue: usageQueue });
  const leases = startBudgetLeases(base, ledger);
  const rateLimits = new RateLimits(base, () => ledger?.liveInstances ?? 1);
  rateLimits.onRefused = (key) => usageQueue.refusal(key.accountId, key.id, "rate_limit");
  base.onShutdown(() => rateLimits.stop());
  const requestTracker = new RequestTracker();
  const metrics = createGatewayMetrics(requestTracker);
  // Metrics read every finished record, /blitz prompts' included; the access log and traces attach at start.
  requestTracker.addSink(metrics.record, { parts: true });
  metrics.setUsageQueueDepthSource(() => usageQueue.depth());
  // Lane cooldowns, shared by every instance through the KV; each instance holds the cooling set (relay/routing/cooldowns.ts).
  const cooldowns = new LaneCooldowns({ config: base.config, kv: base.kv, log: base.log, instanceId: base.instanceId, namespace: fleetNamespace(base.config) });
  await cooldowns.start();
  cooldowns.onCooled = (provider) => metrics.laneCooled(provider);
  metrics.setCoolingSource(() => cooldowns.coolingByProvider());
  // Sessions' lanes (relay/routing/affinity.ts): what is still to be written goes out at shutdown.
  const affinity = new SessionAffinity(base);
  base.onShutdown(() => affinity.flush());
  const cfg = base.config;
  const responseCache = new ResponseCache({
    store: cacheStore(base),
    maxEntryBytes: cfg.RESPONSE_CACHE_MAX_ENTRY_KB * 1024,
    // Hits' pre-encoded bytes, per instance in either mode: a quarter of the embedded cache's size.
    templateBytes: (cfg.RESPONSE_CACHE_MEMORY_MB * 1024 * 1024) / 4,
    waitMs: Math.min(120_000, cfg.UPSTREAM_TIMEOUT_SECONDS * 1000),
    instanceId: base.instanceId,
    record: (row) => (ledger ? ledger.record(row) : usageQueue.push(row)),
  });
  const mailer = createMailer(base.config, base.log);
  base.onShutdown(() => mailer.close());
  const webhooks = webhookSender(base, mailer);
  const alerts = budgetAlerts({ ...base, services: { webhooks } });
  const blitzJobs = createBlitzJobs(base);
  // A job that ended here announces itself at once instead of at the next poll.
  blitzJobs.onEnded.push((job) => { if (job.webhookUrl) webhooks.nudge(); });
  return {
    keyCache,
    usageQueue,
    usage,
    settleBatcher,
    ledger,
    leases,
    rateLimits,
    cooldowns,
    affinity,
    prices,
    responseCache,
    lifecycle: { draining: false },
    requestTracker,
    metrics,
    subLanes: createSubState(),
    bridgeModels: createBridgeModelState(),
    blitzSlots: new Semaphore(BLITZ_INSTANCE_CAP),
    blitzJobs,
    webhooks,
    budgetAlerts: alerts,
    accountTokenTouches: new LRUCache({ max: 10_000 }),
    mailer,
    stripe: createStripeClient(base.config),
  };
}

/**
 * Where the response cache keeps its entries: RESPONSE_CACHE_REDIS_URL's Redis (its own, so it
 * may evict freely: allkeys-lru), else the gateway's Redis (shared by every instance; the cache then leaves
 * the memory budgets need), else an in-process LRU.
 */
function cacheStore(base: Base) {
  const cfg = base.config;
  const perAccount = cfg.RESPONSE_CACHE_MAX_BYTES_PER_ACCOUNT;
  const memoryPercent = cfg.RESPONSE_CACHE_REDIS_MEMORY_PERCENT;
  if (cfg.RESPONSE_CACHE_REDIS_URL) {
    const r = connectRedis({ mode: "url", url: cfg.RESPONSE_CACHE_REDIS_URL }, "commands");
    r.on("error", () => {}); // a cache that cannot be reached is a miss (store.ts)
    const stopWatchdog = watchReplies(r, COMMAND_TIMEOUT_MS);
    base.onShutdown(() => {
      stopWatchdog();
      r.disconnect();
    });
    return new RedisCacheStore(r, { perAccount, total: cfg.RESPONSE_CACHE_MAX_BYTES }, memoryPercent);
  }
  if (base.kv.kind === "redis") return new RedisCacheStore((base.kv as RedisKV).client, { perAccount, total: cfg.RESPONSE_CACHE_MAX_BYTES }, memoryPercent);
  return new MemoryCacheStore({ perAccount, total: cfg.RESPONSE_CACHE_MEMORY_MB * 1024 * 1024 });
}

/** Attaches the request tracker's sinks (access log, tracing) and returns the background jobs. */
export async function startServices(ctx: Ctx): Promise<Job[]> {
  installAccessLog(ctx.config, ctx.log, ctx.services.requestTracker);
  await installTracing(ctx);
  // Partitions for this month and the next ones exist before the first record is written.
  const partitions = usagePartitionsJob(ctx);
  await partitions.runOnce();
  return [ctx.services.usage.job, accountExpiryJob(ctx), bridgeHealthJob(ctx), partitions, ...blitzJobsJobs(ctx), ctx.services.budgetAlerts.job, ctx.services.webhooks];
}
