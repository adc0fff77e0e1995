// What the relay's request path uses of its gateway (pipeline, auth, the executor, count_tokens,
// transcriptions, /blitz and its job items, the classifier, models, /v1/key): its settings, the
// stores, a logger, and the per-instance services named below. The money path's MoneyDeps and
// the adapters' AdapterEnv are parts of it. The whole instance (context.ts) fits this shape: an
// edge (relay/routes.ts, blitz/jobs/routes.ts and background.ts) narrows it once with relayDeps(),
// never per request, and nothing below the edge sees more.
import type { Config } from "../config.ts";
import type { Ctx } from "../context.ts";
import type { RequestTracker } from "../http/access-log.ts";
import type { Logger } from "../logger.ts";
import type { AdapterEnv, ProviderConfig } from "../providers/env.ts";
import type { SecretBox } from "../secrets.ts";
import type { Db } from "../store/db/client.ts";
import type { KV } from "../store/kv/types.ts";
import type { Semaphore } from "../blitz/pool.ts";
import type { MoneyDeps, PriceConfig } from "../money/money-deps.ts";
import type { ResponseCache } from "../cache/response-cache.ts";
import type { KeyCache } from "./key-cache.ts";
import type { LaneCooldowns } from "./routing/cooldowns.ts";
import type { SessionAffinity } from "./routing/affinity.ts";
import type { UsageQueue } from "./usage-queue.ts";
import type { UsagePipeline } from "./usage-pipeline.ts";

/** The settings the request path reads. */
export type RelayConfig = PriceConfig & ProviderConfig & Pick<Config,
  "UPSTREAM_TIMEOUT_SECONDS" | "KEEPALIVE_MS" | "MAX_REQUEST_BYTES" | "siteUrl" | "BLITZ_JOB_RESULT_TTL_HOURS">;

export interface RelayDeps extends MoneyDeps, AdapterEnv {
  config: RelayConfig;
  db: Db;
  kv: KV;
  secrets: SecretBox;
  log: Logger;
  instanceId: string;
  services: MoneyDeps["services"] & AdapterEnv["services"] & {
    keyCache: Pick<KeyCache, "peek" | "load">;
    usageQueue: Pick<UsageQueue, "push" | "refusal" | "touchKey">;
    /** A /blitz job item's rerun check writes everything recorded so far before it reads Postgres. */
    usage: Pick<UsagePipeline, "flush">;
    responseCache: ResponseCache;
    /** Lanes cooling down: skipped, probed, told of failures (routing/cooldowns.ts). */
    cooldowns: Pick<LaneCooldowns, "gate" | "probe" | "failed" | "succeeded" | "forget" | "untilOf">;
    /** Sessions' lanes (routing/affinity.ts). */
    affinity: Pick<SessionAffinity, "entryOf" | "lookup" | "remember">;
    /** Opens the record of a /blitz prompt or job item that has no HTTP request of its own. */
    requestTracker: Pick<RequestTracker, "openPart">;
    /** The instance-wide /blitz prompt semaphore. */
    blitzSlots: Semaphore;
  };
}

/**
 * The request path's view of the instance, built once per edge at mount or start. `services` is
 * the instance's own object (typed narrowly), so a service replaced on the instance is seen here.
 */
export function relayDeps(ctx: Ctx): RelayDeps {
  const { config, db, kv, secrets, log, instanceId, services } = ctx;
  return { config, db, kv, secrets, log, instanceId, services };
}
