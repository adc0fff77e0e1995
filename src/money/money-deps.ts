// What the money of an upstream call (money.ts) and its helpers use of their gateway: the stores
// of the month counters, this instance's id, the fallback price settings, a logger, and the
// per-instance services that hold reservations, settlements, records and limits. The whole
// instance (context.ts) fits this shape, so an edge hands it over as it is; a unit test builds
// just this (test/relay/money-call.test.ts).
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { SpendStores } from "../store/spend-counters.ts";
import type { RateLimits } from "../relay/limits/rate-limits.ts";
import type { UsageQueue } from "../relay/usage-queue.ts";
import type { Ledger } from "./ledger/index.ts";
import type { BudgetLeases } from "./leases.ts";
import type { SettleBatcher } from "./settle-batch.ts";
import type { OperatorPriceLookup } from "./operator-prices.ts";
import type { BudgetAlerts } from "../webhooks/budget-alerts.ts";

/** The settings the estimate reads: the price of a model the pricing catalog does not know. */
export type PriceConfig = Pick<Config, "UNKNOWN_MODEL_PRICE_USD_PER_MTOK_INPUT" | "UNKNOWN_MODEL_PRICE_USD_PER_MTOK_OUTPUT">;

export interface MoneyDeps extends SpendStores {
  /** Unique per process start: the prefix of every money call's id. */
  instanceId: string;
  config: PriceConfig;
  log: Pick<Logger, "warn">;
  services: {
    /** In-flight entries and the usage stream (Redis mode); null with the in-process KV. */
    ledger: Ledger | null;
    /** Budget leases of hot keys; null when off. */
    leases: BudgetLeases | null;
    settleBatcher: Pick<SettleBatcher, "settle">;
    usageQueue: Pick<UsageQueue, "push" | "refusal">;
    rateLimits: RateLimits;
    /** The operator's prices (money/operator-prices.ts); absent: the catalog's only. */
    prices?: OperatorPriceLookup;
    /** Told of a key's budget refusal before the 402 goes out (its 100 % alert); absent in unit tests. */
    budgetAlerts?: Pick<BudgetAlerts, "refused">;
  };
}
