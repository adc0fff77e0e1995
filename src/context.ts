// Everything a request or job needs, built once per gateway instance in gateway.ts.
// No module-level singletons: tests run several gateways in one process.
import type { LRUCache } from "lru-cache";
import type Stripe from "stripe";
import type { Base } from "./base.ts";
import type { Mailer } from "./mail/mailer.ts";
import type { GatewayMetrics } from "./metrics/gateway-metrics.ts";
import type { RequestTracker } from "./http/access-log.ts";
import type { Lifecycle } from "./http/lifecycle.ts";
import type { KeyCache } from "./relay/key-cache.ts";
import type { UsageQueue } from "./relay/usage-queue.ts";
import type { UsagePipeline } from "./relay/usage-pipeline.ts";
import type { SettleBatcher } from "./money/settle-batch.ts";
import type { Ledger } from "./money/ledger/index.ts";
import type { BudgetLeases } from "./money/leases.ts";
import type { RateLimits } from "./relay/limits/rate-limits.ts";
import type { LaneCooldowns } from "./relay/routing/cooldowns.ts";
import type { SessionAffinity } from "./relay/routing/affinity.ts";
import type { OperatorPrices } from "./money/operator-prices.ts";
import type { ResponseCache } from "./cache/response-cache.ts";
import type { BlitzJobs } from "./blitz/jobs/service.ts";
import type { WebhookSender } from "./webhooks/sender.ts";
import type { BudgetAlerts } from "./webhooks/budget-alerts.ts";
import type { Semaphore } from "./blitz/pool.ts";
import type { SubState } from "./providers/sub/state.ts";
import type { BridgeModelState } from "./providers/bridge/model-state.ts";

export type { Base };

/** The whole instance: assembled at the edges (routes, jobs, boot), never handed to a module that needs less. */
export interface Ctx extends Base {
  /** Built once at boot, in dependency order, by src/services.ts. */
  services: Services;
}

/** Every per-instance service, each built by the module named beside it. */
export interface Services {
  /** Resolved routing keys, subscribed to invalidations; also this instance's invalidation listener (relay/key-cache.ts). */
  keyCache: KeyCache;
  /** Usage records, refusals and last-used touches, written to Postgres in batches (relay/usage-queue.ts). */
  usageQueue: UsageQueue;
  /** Settlements out → ledger drain in → Postgres write: flush(), hold(), the timed flush and the shutdown drain (relay/usage-pipeline.ts). */
  usage: UsagePipeline;
  /** Budget settlements off the hot path (money/settle-batch.ts). */
  settleBatcher: SettleBatcher;
  /** The opt-in response cache of routing keys with `cache` (cache/). */
  responseCache: ResponseCache;
  /** Set draining by the graceful shutdown; /readyz reads it (http/health.ts). */
  lifecycle: Lifecycle;
  /** Every request's open record; the access log, metrics and tracing read it (http/access-log.ts). */
  requestTracker: RequestTracker;
  /** In-flight ledger and usage stream in Redis mode; null with the in-process KV (money/ledger/). */
  ledger: Ledger | null;
  /** Budget leases of hot keys (Redis mode, BUDGET_LEASES); null otherwise (money/leases.ts). */
  leases: BudgetLeases | null;
  /** The operator's prices: PRICES_FILE and the operator_prices table (money/operator-prices.ts). */
  prices: OperatorPrices;
  /** Rate limits and concurrency caps: refunds, lease renewal, the Redis-down fallback (relay/limits). */
  rateLimits: RateLimits;
  /** Lanes cooling down, as this instance knows them, and the store calls of failures and probes (relay/routing/cooldowns.ts). */
  cooldowns: LaneCooldowns;
  /** Sessions' lanes in the KV: read per request, written in batches (relay/routing/affinity.ts). */
  affinity: SessionAffinity;
  /** Prometheus registry (metrics/), fed by the request records' sink. */
  metrics: GatewayMetrics;
  /** Sign-in, refresh and catalog caches of the sub lanes (providers/sub/state.ts). */
  subLanes: SubState;
  /** What each bridge lists at GET /v1/models, cached briefly (providers/bridge/models.ts). */
  bridgeModels: BridgeModelState;
  /** The instance-wide blitz prompt semaphore (blitz/blitz.ts). */
  blitzSlots: Semaphore;
  /** The queue of /blitz job items and the hooks of a job's end (blitz/jobs/service.ts). */
  blitzJobs: BlitzJobs;
  /** Sends the outbox of signed webhooks and alert mails (webhooks/sender.ts). */
  webhooks: WebhookSender;
  /** Budget alerts: the periodic check and the alert of a key's budget refusal (webhooks/budget-alerts.ts). */
  budgetAlerts: BudgetAlerts;
  /** Token id → when this gateway last wrote its last_used_at (management/guard.ts). */
  accountTokenTouches: LRUCache<string, number>;
  /** Outgoing mail (mail/mailer.ts). */
  mailer: Mailer;
  /** The Stripe client when STRIPE_SECRET_KEY is set (signup/stripe-checkout.ts). */
  stripe: Stripe | null;
}
