// The only reader of process.env: every setting is parsed once, here, with zod.
// A bad value stops the process at start with a message naming the variable.
import { z } from "zod";
import { API_KEY_PROVIDER_IDS, baseUrlEnvName, DEFAULT_PROVIDER_BASE_URLS, DEFAULT_SUB_API_BASE_URL, DEFAULT_SUB_AUTH_BASE_URL, type ApiKeyProviderId } from "./providers/endpoints.ts";

const bool = z
  .enum(["true", "false", "1", "0", "yes", "no", ""])
  .transform((v) => v === "true" || v === "1" || v === "yes");
const port = z.coerce.number().int().min(0).max(65535);
const url = z.string().url();
const positiveInt = z.coerce.number().int().positive();
/** `host:port,host:port`, an IPv6 host in brackets (`[::1]:26379`). */
const hostPorts = z.string().transform((v, ctx) => {
  const out: Array<{ host: string; port: number }> = [];
  for (const part of v.split(",").map((p) => p.trim()).filter(Boolean)) {
    const m = /^(\[[0-9a-fA-F:.]+\]|[^\s:,[\]]+):(\d{1,5})$/.exec(part);
    const p = m ? Number(m[2]) : 0;
    if (!m || p < 1 || p > 65535) {
      ctx.addIssue({ code: "custom", message: `must be host:port[,host:port…] (bad entry ${JSON.stringify(part)})` });
      return z.NEVER;
    }
    out.push({ host: m[1]!.replace(/^\[|\]$/g, ""), port: p });
  }
  if (!out.length) {
    ctx.addIssue({ code: "custom", message: "must name at least one host:port" });
    return z.NEVER;
  }
  return out;
});


const schema = z.object({
  NODE_ENV: z.string().default("development"),
  PORT: port.default(8080),
  HOST: z.string().min(1).default("0.0.0.0"),
  BASE_URL: url.optional(),
  SITE_URL: url.optional(),
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL").optional(),
  /**
   * A direct Postgres connection when DATABASE_URL goes through a transaction-mode pooler
   * (PgBouncer): migrations, their lock and LISTEN need one session; setting it also turns off
   * named prepared statements on DATABASE_URL (CONTRACT §2).
   */
  DATABASE_DIRECT_URL: z.string().regex(/^postgres(ql)?:\/\//, "must be a postgres:// URL").optional(),
  DATA_DIR: z.string().min(1).default("./data"),
  REDIS_URL: z.string().regex(/^rediss?:\/\//, "must be a redis:// URL").optional(),
  /** Redis Sentinels and the monitored master's name: the gateway follows failovers (instead of REDIS_URL). */
  REDIS_SENTINELS: hostPorts.optional(),
  REDIS_SENTINEL_MASTER: z.string().min(1).optional(),
  /** Password of the Redis data nodes reached through REDIS_SENTINELS or REDIS_CLUSTER_NODES (also sent to Sentinels that ask for one). */
  REDIS_PASSWORD: z.string().min(1).optional(),
  /** Seed nodes of a Redis Cluster (instead of REDIS_URL). */
  REDIS_CLUSTER_NODES: hostPorts.optional(),
  GATEWAY_SECRET_KEY: z.string().optional(),
  SMTP_URL: z.string().regex(/^smtps?:\/\//, "must be an smtp:// URL").optional(),
  MAIL_FROM: z.string().min(3).default("Model Gateway <no-reply@localhost>"),
  SUB_API_BASE_URL: url.default(DEFAULT_SUB_API_BASE_URL),
  SUB_AUTH_BASE_URL: url.default(DEFAULT_SUB_AUTH_BASE_URL),
  BILLING_WEBHOOK_SECRET: z.string().min(1).optional(),
  STRIPE_SECRET_KEY: z.string().min(1).optional(),
  STRIPE_PRICE_ID: z.string().min(1).optional(),
  MEMBERSHIP_PRICE_USD: z.coerce.number().positive().default(20),
  UNPAID_ACCOUNT_TTL_SECONDS: positiveInt.default(172800),
  SIGNUP_CODE_TTL_SECONDS: positiveInt.default(600),
  SIGNUP_IP_LIMIT_PER_HOUR: positiveInt.default(20),
  TRUST_PROXY: z.coerce.number().int().min(0).default(0),
  ALLOW_PRIVATE_UPSTREAMS: bool.default(false),
  BRIDGE_HEALTH_INTERVAL_SECONDS: z.coerce.number().positive().default(30),
  // Additions beyond the contract, documented in the README.
  LOG_LEVEL: z.enum(["fatal", "error", "warn", "info", "debug", "trace", "silent"]).default("info"),
  /** One JSON line per request (src/http/access-log.ts); false turns it off. */
  ACCESS_LOG: bool.default(true),
  /** OTLP/HTTP collector for traces (e.g. http://127.0.0.1:4318); unset = tracing off, nothing loaded. */
  OTEL_EXPORTER_OTLP_ENDPOINT: url.optional(),
  OTEL_SERVICE_NAME: z.string().min(1).default("model-gateway"),
  MAX_REQUEST_BYTES: positiveInt.default(10 * 1024 * 1024),
  UPSTREAM_TIMEOUT_SECONDS: z.coerce.number().positive().default(600),
  /**
   * Lane cooldowns (docs/behaviour.md): a lane failing for a retryable cause this many times within
   * LANE_COOLDOWN_WINDOW_SECONDS is skipped fleet-wide for a cooldown that starts at
   * LANE_COOLDOWN_BASE_SECONDS and doubles while it keeps failing, up to LANE_COOLDOWN_MAX_SECONDS.
   * 0 turns cooldowns off.
   */
  LANE_COOLDOWN_FAILURES: z.coerce.number().int().min(0).default(3),
  LANE_COOLDOWN_WINDOW_SECONDS: z.coerce.number().positive().default(30),
  LANE_COOLDOWN_BASE_SECONDS: z.coerce.number().positive().default(5),
  LANE_COOLDOWN_MAX_SECONDS: z.coerce.number().positive().default(300),
  /** SSE keep-alive: a `:` comment goes to a streaming client when the upstream was quiet this long. */
  KEEPALIVE_MS: positiveInt.default(15000),
  /**
   * Price of a model the pricing catalog does not know, on keys with a budget (USD per million
   * tokens). Conservative by default (the price of the dearest common flagship models) so an
   * unknown model is never free against a budget; the usage record marks such prices as estimated.
   */
  UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT: z.coerce.number().min(0).default(15),
  UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT: z.coerce.number().min(0).default(75),
  /** The operator's prices (CONTRACT §9): a JSON file read at start and on SIGHUP (money/operator-prices.ts). */
  PRICES_FILE: z.string().min(1).optional(),
  /**
   * Budget leases (docs/accounting.md): with Redis, an instance admits a hot budgeted key's
   * requests from a slice of its budget reserved ahead, without a round trip each. false: every
   * budgeted request is admitted in Redis.
   */
  BUDGET_LEASES: bool.default(true),
  /** A gateway instance silent this long is dead: its requests in flight become `interrupted` records. */
  INSTANCE_DEAD_AFTER_SECONDS: z.coerce.number().positive().default(15),
  /** Raw usage records older than this many months are dropped (whole month partitions); the daily rollup is kept. Unset: keep all. */
  USAGE_RETENTION_MONTHS: positiveInt.optional(),
  /** /blitz jobs: results are kept this long after a job ends, then deleted. */
  BLITZ_JOB_RESULT_TTL_HOURS: z.coerce.number().positive().default(168),
  /** /blitz jobs: prompts one instance runs at once, across every job (the key's own caps still apply). */
  BLITZ_JOB_CONCURRENCY: positiveInt.default(16),
  /** /blitz jobs on Redis: a running item whose instance stopped renewing its lock this long is redelivered. */
  BLITZ_JOB_LOCK_MS: positiveInt.default(30000),
  /** Webhooks: the first retry waits this long, each next one twice as long (at most an hour), for 24 hours. */
  WEBHOOK_RETRY_BASE_SECONDS: z.coerce.number().positive().default(10),
  /** Budget alerts: how often each instance compares its accounts' keys' month spend with their thresholds. */
  BUDGET_ALERT_CHECK_SECONDS: z.coerce.number().positive().default(15),
  EXPIRY_SWEEP_INTERVAL_SECONDS: z.coerce.number().positive().default(60),
  /** A cached routing key is re-read from Postgres after this long (invalidations apply at once regardless). */
  KEY_CACHE_TTL_SECONDS: z.coerce.number().positive().default(60),
  /** While Postgres is unreachable, a key read from it within this many seconds keeps being served from the cache. */
  KEY_CACHE_STALE_SECONDS: z.coerce.number().min(0).default(600),
  /** SIGTERM: how long in-flight requests (streams included) may take to finish before the listener closes anyway. */
  SHUTDOWN_TIMEOUT_SECONDS: z.coerce.number().positive().default(60),
  /** Response cache (docs/caching.md): the largest answer stored, in KiB; a larger one is served but not kept. */
  RESPONSE_CACHE_MAX_ENTRY_KB: z.coerce.number().int().positive().default(1024),
  /** Response cache without Redis: the in-process LRU's size, in MiB (least recently used entries go first). */
  RESPONSE_CACHE_MEMORY_MB: z.coerce.number().int().positive().default(64),
  /** Response cache: bytes one account's entries may hold, in Redis and in process (a write past it keeps nothing). */
  RESPONSE_CACHE_MAX_BYTES_PER_ACCOUNT: z.coerce.number().int().positive().default(32 * 1024 * 1024),
  /** Response cache in Redis: bytes all entries may hold. */
  RESPONSE_CACHE_MAX_BYTES: z.coerce.number().int().positive().default(256 * 1024 * 1024),
  /** Response cache on its own Redis (recommended, with maxmemory-policy allkeys-lru); unset: the gateway's Redis. */
  RESPONSE_CACHE_REDIS_URL: z.string().regex(/^rediss?:\/\//, "must be a redis:// URL").optional(),
  /** Response cache on a Redis that also holds budgets: writes stop while its used memory is above this percent of maxmemory. */
  RESPONSE_CACHE_REDIS_MEMORY_PERCENT: z.coerce.number().int().min(1).max(100).default(75),
  // Stripe API address (tests point it at a loopback server speaking the Stripe API).
  STRIPE_API_BASE_URL: url.optional(),
});


/** How to reach Redis, or null for the in-process KV. */
export type RedisTarget =
  | { mode: "url"; url: string }
  | { mode: "sentinel"; sentinels: Array<{ host: string; port: number }>; name: string; password?: string }
  | { mode: "cluster"; nodes: Array<{ host: string; port: number }>; password?: string };

export type Config = z.infer<typeof schema> & {
  redis: RedisTarget | null;
  baseUrl: string;
  siteUrl: string;
  providerBaseUrls: Record<ApiKeyProviderId, string>;
  production: boolean;
};

export class ConfigError extends Error {
  override name = "ConfigError";
}

function trimSlash(u: string) {
  return u.replace(/\/+$/, "");
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // Empty strings count as unset, the way shells and compose files often pass them.
  const clean: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined && v !== "") clean[k] = v;
  const parsed = schema.safeParse(clean);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message} (got ${JSON.stringify(clean[String(i.path[0])] ?? null)})`);
    throw new ConfigError(`Invalid configuration:\n  ${lines.join("\n  ")}`);
  }
  const c = parsed.data;
  const redisModes = ["REDIS_URL", "REDIS_SENTINELS", "REDIS_CLUSTER_NODES"].filter((k) => clean[k] !== undefined);
  if (redisModes.length > 1) throw new ConfigError(`Invalid configuration:\n  ${redisModes.join(", ")}: set one way to reach Redis, not several`);
  if (c.REDIS_SENTINELS && !c.REDIS_SENTINEL_MASTER) throw new ConfigError("Invalid configuration:\n  REDIS_SENTINEL_MASTER: required with REDIS_SENTINELS (the name the Sentinels monitor, e.g. mymaster)");
  if (c.REDIS_SENTINEL_MASTER && !c.REDIS_SENTINELS) throw new ConfigError("Invalid configuration:\n  REDIS_SENTINEL_MASTER: set without REDIS_SENTINELS");
  if (c.DATABASE_DIRECT_URL && !c.DATABASE_URL) throw new ConfigError("Invalid configuration:\n  DATABASE_DIRECT_URL: set without DATABASE_URL (it is the direct path beside a pooled DATABASE_URL)");
  const providerBaseUrls: Record<ApiKeyProviderId, string> = { ...DEFAULT_PROVIDER_BASE_URLS };
  for (const id of API_KEY_PROVIDER_IDS) {
    const name = baseUrlEnvName(id);
    const v = clean[name];
    if (v === undefined) continue;
    if (!url.safeParse(v).success) throw new ConfigError(`Invalid configuration:\n  ${name}: must be an http(s) URL (got ${JSON.stringify(v)})`);
    providerBaseUrls[id] = trimSlash(v);
  }
  const local = `http://localhost:${c.PORT}`;
  return {
    ...c,
    SUB_API_BASE_URL: trimSlash(c.SUB_API_BASE_URL),
    SUB_AUTH_BASE_URL: trimSlash(c.SUB_AUTH_BASE_URL),
    baseUrl: trimSlash(c.BASE_URL ?? local),
    siteUrl: trimSlash(c.SITE_URL ?? c.BASE_URL ?? local),
    providerBaseUrls,
    production: c.NODE_ENV === "production",
    redis: c.REDIS_SENTINELS ? { mode: "sentinel", sentinels: c.REDIS_SENTINELS, name: c.REDIS_SENTINEL_MASTER!, password: c.REDIS_PASSWORD }
      : c.REDIS_CLUSTER_NODES ? { mode: "cluster", nodes: c.REDIS_CLUSTER_NODES, password: c.REDIS_PASSWORD }
      : c.REDIS_URL ? { mode: "url", url: c.REDIS_URL }
      : null,
  };
}
