// Process entry: boot from process.env, drain gracefully on SIGTERM/SIGINT. A second Ctrl-C
// (SIGINT) or SIGTERM during the drain stops at once: whoever presses it twice means it, and
// requests still in flight are cut (their reservations expire; the usage queue loses nothing it
// already wrote). Either way the gateway says when it has stopped.
import { ConfigError } from "./config.ts";
import { startGateway } from "./gateway.ts";
import { logStrayRejections } from "./stray-rejections.ts";

// SIGHUP reads PRICES_FILE again (CONTRACT §9); an invalid file is logged and the previous prices
// stay. Caught from the start: one that arrives during boot (which reads the file anyway) must not
// end the process, as SIGHUP's default action would.
let reloadPrices = () => {};
process.on("SIGHUP", () => reloadPrices());

try {
  const gw = await startGateway(process.env);
  const log = gw.ctx.log;
  logStrayRejections(log);
  // A terminal also gets plain sentences (the JSON lines are for log collectors).
  const say = (line: string) => { if (process.stdout.isTTY) console.error(line); };
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) {
      log.warn({ signal }, "second signal during the drain: stopping now, requests still in flight are cut");
      log.flush?.();
      say("Stopped at once (second signal); requests in flight were cut.");
      process.exit(130);
    }
    stopping = true;
    log.info({ signal, timeoutSeconds: gw.ctx.config.SHUTDOWN_TIMEOUT_SECONDS }, `shutting down: draining requests, jobs and usage records (${signal === "SIGINT" ? "Ctrl-C again" : "a second signal"} stops at once)`);
    say(`Stopping: finishing requests in flight (up to ${gw.ctx.config.SHUTDOWN_TIMEOUT_SECONDS} s). ${signal === "SIGINT" ? "Press Ctrl-C again" : "Send the signal again"} to stop at once.`);
    try {
      await gw.stop();
    } catch (e) {
      log.error({ err: e instanceof Error ? e.message : String(e) }, "shutdown did not finish cleanly");
      log.flush?.();
      process.exit(1);
    }
    log.info({ signal }, "gateway stopped");
    log.flush?.();
    say("Gateway stopped.");
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
  reloadPrices = () => { gw.ctx.services.prices.reloadFile(); };
} catch (e) {
  if (e instanceof ConfigError) {
    console.error(e.message);
    process.exit(2);
  }
  console.error(e instanceof Error ? `Gateway failed to start: ${e.message}` : e);
  process.exit(1);
}
