// Boots one gateway instance from an environment: config → stores → services → HTTP → jobs.
// main.ts calls it with process.env; tests call it with their own environment.
import { createServer } from "node:net";
import type { DestinationStream } from "pino";
import { loadConfig } from "./config.ts";
import type { Base } from "./base.ts";
import type { Ctx } from "./context.ts";
import { createLogger } from "./logger.ts";
import { loadSecretBox } from "./secrets.ts";
import { openDb } from "./store/db/client.ts";
import { openKv } from "./store/kv/index.ts";
import { buildApp } from "./app.ts";
import { randomToken } from "./lib/crypto.ts";
import type { Job } from "./jobs/job.ts";
import { buildServices, startServices } from "./services.ts";
import { announce, fetchConcurrencyWarning, startupFacts } from "./banner.ts";
import { removeAdminAccess, writeAdminAccess } from "./admin/access-file.ts";
import { within } from "./lib/time.ts";

/** How long a shutdown's graceful listener close waits with no request coming in before it cuts the connections left. */
const LISTENER_QUIET_MS = 1000;

export interface Gateway {
  ctx: Ctx;
  /** The HTTP app (its route table is what the OpenAPI test compares the document with). */
  app: ReturnType<typeof buildApp>;
  url: string;
  port: number;
  jobs: Job[];
  /** Graceful: stop accepting, finish jobs, drain queues, close stores. */
  stop(): Promise<void>;
}

export interface GatewayOptions {
  logDestination?: DestinationStream;
}

export async function startGateway(env: Record<string, string | undefined>, opts: GatewayOptions = {}): Promise<Gateway> {
  const config = loadConfig(env);
  // Before opening any store: a second start on a taken address fails at once, not after boot.
  if (config.PORT !== 0) await assertAddressFree(config.HOST, config.PORT);
  const log = createLogger(config.LOG_LEVEL, opts.logDestination);
  const secrets = loadSecretBox(config);
  const dbh = await openDb({ databaseUrl: config.DATABASE_URL, directUrl: config.DATABASE_DIRECT_URL, dataDir: config.DATA_DIR, log });
  const kv = await openKv(config.redis);
  const shutdown: Array<() => Promise<void> | void> = [];
  const base: Base = {
    config, db: dbh.db, dbh, kv, log, secrets,
    instanceId: randomToken(6),
    onShutdown: (fn) => { shutdown.push(fn); },
  };
  const ctx: Ctx = { ...base, services: await buildServices(base) };
  const lifecycle = ctx.services.lifecycle;
  const jobs = await startServices(ctx);
  // The embedded database allows one process: `npm run admin` reaches it through this gateway.
  const adminSecret = dbh.kind === "pglite" ? randomToken(40) : null;
  const app = buildApp(ctx, () => adminSecret);
  try {
    // No reusePort (the check above can race; this cannot): a second gateway on the same address must fail, not silently take a share
    // of the traffic (and of the embedded database).
    app.listen({ port: config.PORT, hostname: config.HOST, idleTimeout: 255, reusePort: false });
  } catch (e) {
    for (const fn of shutdown.reverse()) await Promise.resolve(fn()).catch(() => {});
    await kv.close().catch(() => {});
    await dbh.close().catch(() => {});
    if ((e as { code?: string }).code === "EADDRINUSE") throw addressInUse(config.HOST, config.PORT);
    throw e;
  }
  const server = app.server!;
  const port = server.port!;
  const host = config.HOST === "0.0.0.0" ? "127.0.0.1" : config.HOST;
  for (const j of jobs) j.start();
  if (adminSecret) writeAdminAccess(config.DATA_DIR, { pid: process.pid, url: `http://${host}:${port}`, secret: adminSecret });
  log.info({ port, database: dbh.kind, kv: kv.kind, secretKey: secrets.available ? "set" : "missing" }, "gateway listening");
  // A terminal gets the banner; tests and containers (a log destination, no TTY) one log line.
  announce(log, startupFacts(config, `http://${config.HOST === "0.0.0.0" ? "localhost" : host}:${port}`, { database: dbh.kind, kv: kv.kind }), !opts.logDestination && process.stdout.isTTY === true);
  // Bun reads its fetch ceiling from the process's own environment when it starts.
  const lowFetchCeiling = fetchConcurrencyWarning(process.env);
  if (lowFetchCeiling) log.warn({ maxHttpRequests: lowFetchCeiling.value }, lowFetchCeiling.message);
  let stopped: Promise<void> | null = null;
  return {
    ctx, app, jobs, port,
    url: `http://${host}:${port}`,
    stop() {
      stopped ??= (async () => {
        // Graceful and visible: /readyz answers 503 from now on, while the listener keeps serving
        // what is in flight (streams included) for up to SHUTDOWN_TIMEOUT_SECONDS; then the
        // listener closes, finishing what arrived before it did (a load balancer sends work
        // until its next health check); then the jobs stop and the usage queue drains. Closing
        // the listener only after the jobs cut the requests that came in meanwhile.
        lifecycle.draining = true;
        if (adminSecret) removeAdminAccess(config.DATA_DIR, adminSecret);
        const deadline = Date.now() + config.SHUTDOWN_TIMEOUT_SECONDS * 1000;
        while (server.pendingRequests > 0 && Date.now() < deadline) await Bun.sleep(20);
        // A load balancer keeps sending on the connections it holds until its next health check:
        // each such request is served and Bun closes its connection after the answer. But a
        // graceful close also waits for connections holding half a request head (a stalled or
        // hostile client), which Bun keeps for its 255 s idle timeout: once no request has come
        // in for LISTENER_QUIET_MS, what is left is cut.
        const closed = app.stop(false).then(() => true);
        const tracker = ctx.services.requestTracker;
        let seen = tracker.opened;
        let quietSince = Date.now();
        let done = false;
        while (!(done = (await within(closed, 20)) === true) && Date.now() < deadline) {
          if (tracker.opened !== seen || server.pendingRequests > 0) [seen, quietSince] = [tracker.opened, Date.now()];
          else if (Date.now() - quietSince >= LISTENER_QUIET_MS) break;
        }
        if (!done) await app.stop(true);
        for (const j of jobs) await j.stop();
        for (const fn of shutdown.reverse()) await fn();
        await kv.close();
        await dbh.close();
      })();
      return stopped;
    },
  };
}

const addressInUse = (host: string, port: number) =>
  new Error(`address in use: ${host}:${port} is already taken (another gateway?). Stop it or set PORT to a free port.`);

/** Binds and releases host:port once; throws the "address in use" error when it is taken. */
async function assertAddressFree(host: string, port: number): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    const probe = createServer();
    probe.once("error", (e: NodeJS.ErrnoException) => reject(e.code === "EADDRINUSE" ? addressInUse(host, port) : e));
    probe.listen({ host, port, exclusive: true }, () => probe.close(() => resolve()));
  });
}
