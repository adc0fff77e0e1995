// Everything a request or job needs, built once per gateway instance in gateway.ts.
// No module-level singletons: tests run several gateways in one process.
import type { Config } from "./config.ts";
import type { DbHandle, Db } from "./store/db/client.ts";
import type { KV } from "./store/kv/index.ts";
import type { Logger } from "./logger.ts";
import type { SecretBox } from "./secrets.ts";

export interface Ctx {
  config: Config;
  db: Db;
  dbh: DbHandle;
  kv: KV;
  log: Logger;
  secrets: SecretBox;
  /** Unique per process start; prefixes request ids. */
  instanceId: string;
  /** Services that feature modules register at boot (usage queue, key cache, mailer, metrics…). */
  services: Services;
  /** Called in reverse order on shutdown, after the server stops accepting requests. */
  onShutdown(fn: () => Promise<void> | void): void;
}

/** Filled by the feature modules at boot; each field is owned by the module named beside it. */
export interface Services {
  [name: string]: unknown;
}
