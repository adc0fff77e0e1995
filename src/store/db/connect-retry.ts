// Boot-time connections to Postgres that a busy server may answer late. CONNECT_TIMEOUT_SECONDS is
// short so that requests fail fast during an outage (CONTRACT §7); at boot a slow connection is not
// an outage: the migrations' session and the LISTEN session are retried with a growing pause for a
// while instead of failing the start. Errors Postgres itself answered fail at once.
import { isDatabaseConnectionError, loggableError } from "../../errors.ts";
import type { Logger } from "../../logger.ts";

/** How long boot keeps trying to open one of its sessions before giving up. */
export const BOOT_CONNECT_RETRY_MS = 15_000;

/** Runs `open` until it does not fail to connect, for at most BOOT_CONNECT_RETRY_MS; `what` names it in the log. */
export async function retryConnecting<T>(what: string, open: () => Promise<T>, log?: Logger): Promise<T> {
  const until = Date.now() + BOOT_CONNECT_RETRY_MS;
  for (let attempt = 1; ; attempt++) {
    try {
      return await open();
    } catch (e) {
      if (!isDatabaseConnectionError(e) || Date.now() >= until) throw e;
      log?.warn({ err: loggableError(e), attempt }, `${what} could not connect to Postgres; retrying`);
      await Bun.sleep(Math.min(250 * attempt, 2_000));
    }
  }
}
