// What a provider adapter receives of its gateway: its own settings, the secret box that opens
// saved keys and sign-in files, the stores of the sub sign-ins and their cross-instance refresh
// lock, a logger, and the provider state built at boot. Nothing else of the instance (the mailer,
// Stripe, the budget ledger stay out of reach). The whole instance (context.ts) fits this shape,
// so an edge hands it over as it is.
import type { Config } from "../config.ts";
import type { Logger } from "../logger.ts";
import type { SecretBox } from "../secrets.ts";
import type { Db } from "../store/db/client.ts";
import type { KV } from "../store/kv/types.ts";
import type { BridgeModelState } from "./bridge/model-state.ts";
import type { SubState } from "./sub/state.ts";

/** The settings adapters read: vendor base URLs, the sub backend, whether private upstreams are allowed. */
export type ProviderConfig = Pick<Config, "providerBaseUrls" | "SUB_API_BASE_URL" | "SUB_AUTH_BASE_URL" | "ALLOW_PRIVATE_UPSTREAMS">;

export interface AdapterEnv {
  config: ProviderConfig;
  secrets: SecretBox;
  db: Db;
  kv: KV;
  log: Logger;
  services: { subLanes: SubState; bridgeModels: BridgeModelState };
}
