// The stores and settings of one gateway instance, built first in gateway.ts. Modules below the
// edges take these (or a part of them), never the whole instance (context.ts).
import type { Config } from "./config.ts";
import type { DbHandle, Db } from "./store/db/client.ts";
import type { KV } from "./store/kv/index.ts";
import type { Logger } from "./logger.ts";
import type { SecretBox } from "./secrets.ts";

/** The stores and settings every service is built from (src/services.ts builds the services from these). */
export interface Base {
  config: Config;
  db: Db;
  dbh: DbHandle;
  kv: KV;
  log: Logger;
  secrets: SecretBox;
  /** Unique per process start; prefixes request ids. */
  instanceId: string;
  /** Called in reverse order on shutdown, after the server stops accepting requests. */
  onShutdown(fn: () => Promise<void> | void): void;
}
