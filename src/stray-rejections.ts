// A promise rejected where nobody waits for it (a library's internal command failing as its Redis
// connection closes during a failover, say) would end the process: Bun, like Node, exits on an
// unhandled rejection. For a gateway that means every stream in flight cut because of a promise
// none of them depended on. The entry point logs such a rejection at error level instead, under
// a message operators can alert on, and keeps serving. Exceptions thrown synchronously still end
// the process: the state they leave is unknown.
import type { Logger } from "./logger.ts";

/** The message of the log line, to search and alert on. */
export const STRAY_REJECTION = "unhandled promise rejection (logged; the gateway keeps serving)";

export function logStrayRejections(log: Logger): void {
  process.on("unhandledRejection", (reason) => {
    const err = reason instanceof Error ? reason : null;
    log.error({
      err: (err ? `${err.name}: ${err.message}` : String(reason)).slice(0, 500),
      // Where it came from: the stack's first frames (file and line, never values).
      at: err?.stack?.split("\n").slice(1, 4).map((l) => l.trim()),
    }, STRAY_REJECTION);
  });
}
