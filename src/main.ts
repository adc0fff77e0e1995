// Process entry: boot from process.env, drain gracefully on SIGTERM/SIGINT.
import { ConfigError } from "./config.ts";
import { startGateway } from "./gateway.ts";

try {
  const gw = await startGateway(process.env);
  let stopping = false;
  const stop = async (signal: string) => {
    if (stopping) return;
    stopping = true;
    gw.ctx.log.info({ signal }, "shutting down: draining requests, jobs and usage records");
    await gw.stop();
    process.exit(0);
  };
  process.on("SIGTERM", () => void stop("SIGTERM"));
  process.on("SIGINT", () => void stop("SIGINT"));
} catch (e) {
  if (e instanceof ConfigError) {
    console.error(e.message);
    process.exit(2);
  }
  console.error(e instanceof Error ? `Gateway failed to start: ${e.message}` : e);
  process.exit(1);
}
