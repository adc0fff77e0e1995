// Starts real gateways for tests: real HTTP on loopback, real Postgres/Redis when DATABASE_URL /
// REDIS_URL are set (each gateway gets a fresh database,
// copied from a migrated template: template-db.ts), embedded PGlite + in-process KV otherwise.
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Writable } from "node:stream";
import { randomBytes } from "node:crypto";
import postgres from "postgres";
import { startGateway, type Gateway } from "../../src/gateway.ts";
import { randomToken, sha256Hex } from "../../src/lib/crypto.ts";
import { newId } from "../../src/lib/ids.ts";
import { accounts, accountTokens } from "../../src/store/db/schema/index.ts";
import { postgresTemplate, seedPgliteDataDir } from "./template-db.ts";

export const REAL_STORES = Boolean(process.env.DATABASE_URL && process.env.REDIS_URL);
export const storesLabel = REAL_STORES ? "postgres+redis" : "pglite+memory";

export interface TestGateway extends Gateway {
  env: Record<string, string>;
  /** Every log line this gateway wrote, as text (tests search it for secrets). */
  logs: string[];
  req(path: string, init?: { method?: string; token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<Response>;
  /** req() then parse JSON; returns status and body. */
  call(path: string, init?: { method?: string; token?: string | null; body?: unknown; headers?: Record<string, string> }): Promise<{ status: number; body: any; headers: Headers }>;
}

async function freshDatabase(baseUrl: string): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `gwt_${randomToken(10).toLowerCase()}`;
  const template = await postgresTemplate(baseUrl);
  const admin = postgres(baseUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name} template ${template}`);
  await admin.end();
  const u = new URL(baseUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    drop: async () => {
      const a = postgres(baseUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`drop database if exists ${name} with (force)`).catch(() => {});
      await a.end();
    },
  };
}

export interface StartOptions {
  /** Share another gateway's stores (two instances over one Postgres + Redis). */
  shareWith?: TestGateway;
}

export async function startTestGateway(env: Record<string, string> = {}, opts: StartOptions = {}): Promise<TestGateway> {
  const dataDir = mkdtempSync(join(tmpdir(), "gw-test-"));
  let drop: (() => Promise<void>) | null = null;
  const base: Record<string, string> = {
    PORT: "0",
    HOST: "127.0.0.1",
    DATA_DIR: dataDir,
    LOG_LEVEL: "info",
    NODE_ENV: "test",
    TRUST_PROXY: "1",
    ALLOW_PRIVATE_UPSTREAMS: "true",
    // Lane cooldowns off: a file's tests share their saved keys (lanes), and one test's failures
    // would cool the lanes the next one expects to be tried. The cooldown tests turn them on.
    LANE_COOLDOWN_FAILURES: "0",
  };
  if (opts.shareWith) {
    const s = opts.shareWith.env;
    for (const k of ["DATABASE_URL", "REDIS_URL", "GATEWAY_SECRET_KEY", "DATA_DIR"]) if (s[k]) base[k] = s[k]!;
  } else if (process.env.DATABASE_URL) {
    const db = await freshDatabase(process.env.DATABASE_URL);
    base.DATABASE_URL = db.url;
    drop = db.drop;
  }
  if (!opts.shareWith && process.env.REDIS_URL) base.REDIS_URL = process.env.REDIS_URL;
  if (!base.GATEWAY_SECRET_KEY) base.GATEWAY_SECRET_KEY = randomBytes(32).toString("hex");
  const full = { ...base, ...env };
  // A fresh embedded database starts as a copy of the migrated template (template-db.ts); a data
  // directory that already holds one (a test reopening its own) is left as it is.
  if (!opts.shareWith && !full.DATABASE_URL && full.DATA_DIR && !existsSync(join(full.DATA_DIR, "pg"))) await seedPgliteDataDir(full.DATA_DIR);
  const logs: string[] = [];
  const dest = new Writable({ write(chunk, _enc, cb) { logs.push(String(chunk)); cb(); } });
  const gw = await startGateway(full, { logDestination: dest as any });
  const req: TestGateway["req"] = (path, init = {}) => {
    const headers: Record<string, string> = { ...init.headers };
    if (init.token) headers.authorization = `Bearer ${init.token}`;
    let body: string | undefined;
    if (init.body !== undefined) {
      body = typeof init.body === "string" ? init.body : JSON.stringify(init.body);
      headers["content-type"] ??= "application/json";
    }
    return fetch(gw.url + path, { method: init.method ?? (body !== undefined ? "POST" : "GET"), headers, body });
  };
  const t: TestGateway = {
    ...gw,
    env: full,
    logs,
    req,
    async call(path, init) {
      const r = await req(path, init);
      const text = await r.text();
      let parsed: unknown = text;
      try { parsed = JSON.parse(text); } catch {}
      return { status: r.status, body: parsed, headers: r.headers };
    },
    async stop() {
      await gw.stop();
      if (drop) await drop();
      if (!opts.shareWith) rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return t;
}

/**
 * Test fixture: an account with an `sk_` token, inserted directly (the signup flow has its own
 * tests; other suites only need a caller). `plan: "pro"` by default so management opens.
 */
export async function createAccount(gw: Gateway, opts: { plan?: "free" | "pro"; email?: string; scope?: "read_write" | "read_only" } = {}) {
  const id = newId("acct");
  const email = opts.email ?? `${id.toLowerCase()}@example.com`;
  const plan = opts.plan ?? "pro";
  await gw.ctx.db.insert(accounts).values({
    id, email, plan,
    accountExpiresAt: plan === "free" ? new Date(Date.now() + 48 * 3600_000) : null,
    activatedAt: plan === "pro" ? new Date() : null,
  });
  const token = await addToken(gw, id, opts.scope ?? "read_write");
  return { id, email, token };
}

export async function addToken(gw: Gateway, accountId: string, scope: "read_write" | "read_only"): Promise<string> {
  const token = `${scope === "read_write" ? "sk" : "rk"}_${randomToken(40)}`;
  await gw.ctx.db.insert(accountTokens).values({
    id: newId("tok"), accountId, tokenHash: sha256Hex(token), prefix: token.slice(0, 10), scope, label: "test",
  });
  return token;
}
