// What an operator needs right after `npm start`: where the gateway answers, the base URL to give
// an SDK, which stores and mail sink are in use, and what to run next. A terminal gets a few
// readable lines; anything else (a container, a log collector) gets the same facts as one
// structured log line. Passwords in store URLs are never printed.
import { describeRedis } from "./store/kv/connect.ts";
import { resolve } from "node:path";
import type { Config } from "./config.ts";
import type { Logger } from "./logger.ts";
import { outboxDir } from "./mail/mailer.ts";

export interface StartupFacts {
  url: string;
  sdkBaseUrl: string;
  docs: string;
  database: string;
  kv: string;
  mail: string;
  next: string;
}

/** A store URL without its credentials: scheme, host, port, path. */
export function withoutCredentials(raw: string): string {
  try {
    const u = new URL(raw);
    return `${u.protocol}//${u.host}${u.pathname === "/" ? "" : u.pathname}`;
  } catch {
    return "(unparseable URL)";
  }
}

export function startupFacts(config: Config, localUrl: string, kinds: { database: string; kv: string }): StartupFacts {
  const url = config.BASE_URL ?? localUrl;
  return {
    url,
    sdkBaseUrl: `${url}/v1`,
    docs: `${url}/docs`,
    database: config.DATABASE_URL ? `${kinds.database} ${withoutCredentials(config.DATABASE_URL)}` : `${kinds.database} (embedded) in ${resolve(config.DATA_DIR, "pg")}`,
    kv: config.redis?.mode === "url" ? `${kinds.kv} ${withoutCredentials(config.redis.url)}` : config.redis ? `${kinds.kv} ${describeRedis(config.redis)}` : `${kinds.kv} (in-process, single instance)`,
    mail: config.SMTP_URL ? `SMTP ${withoutCredentials(config.SMTP_URL)}` : `written to ${resolve(outboxDir(config.DATA_DIR))} (set SMTP_URL to send)`,
    next: `curl -X POST '${url}/api/auth?action=agent-signup' -d '{"email":"you@example.com"}'`,
  };
}

export function bannerText(f: StartupFacts): string {
  return [
    "",
    `  Model Gateway listening on ${f.url}`,
    "",
    `  SDK base URL   ${f.sdkBaseUrl}`,
    `  API reference  ${f.docs}`,
    `  Database       ${f.database}`,
    `  KV             ${f.kv}`,
    `  Mail           ${f.mail}`,
    "",
    "  Next: sign up (the code arrives by mail), then follow the README's quick tour:",
    `    ${f.next}`,
    "",
  ].join("\n");
}

/** Bun's own ceiling on simultaneous outgoing fetch requests when BUN_CONFIG_MAX_HTTP_REQUESTS is unset. */
export const BUN_DEFAULT_MAX_HTTP_REQUESTS = 256;
/** Below this, the warning at boot: every stream holds one upstream request for its whole length. */
export const MIN_MAX_HTTP_REQUESTS = 4096;

/**
 * Bun's fetch runs at most BUN_CONFIG_MAX_HTTP_REQUESTS requests at once (256 unless set, at most
 * 65535) and queues the rest: past that many streams in flight, a new stream waits for one to end
 * and chunks of the others arrive late. The ceiling is read when the process starts, so only the
 * environment can raise it; the gateway says so once at boot when it is unset or low.
 */
export function fetchConcurrencyWarning(env: Record<string, string | undefined>): { value: number; message: string } | null {
  const raw = env.BUN_CONFIG_MAX_HTTP_REQUESTS?.trim();
  const n = raw ? Number(raw) : NaN;
  const value = Number.isInteger(n) && n > 0 ? Math.min(n, 65535) : BUN_DEFAULT_MAX_HTTP_REQUESTS;
  if (value >= MIN_MAX_HTTP_REQUESTS) return null;
  return {
    value,
    message: `Bun's fetch allows ${value} upstream requests at once${raw ? "" : " (BUN_CONFIG_MAX_HTTP_REQUESTS unset)"}: more concurrent streams than that queue and stall; set BUN_CONFIG_MAX_HTTP_REQUESTS=65535 in the gateway's environment`,
  };
}

/** Banner on a terminal, one structured line otherwise. */
export function announce(log: Logger, facts: StartupFacts, tty: boolean): void {
  if (tty) process.stdout.write(`${bannerText(facts)}\n`);
  else log.info({ url: facts.url, sdk_base_url: facts.sdkBaseUrl, docs: facts.docs, database: facts.database, kv: facts.kv, mail: facts.mail, next: facts.next }, "gateway ready");
}
