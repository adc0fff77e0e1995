// The operator command `npm run admin -- activate <account id or email>` (and list/show), run as a
// separate process against the gateway's own configuration.
import { afterAll, describe, expect, test } from "bun:test";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { REAL_STORES, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { signupViaApi } from "../helpers/signup.ts";

const ROOT = join(import.meta.dir, "..", "..");

async function admin(env: Record<string, string>, ...args: string[]) {
  const childEnv: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined && k !== "DATABASE_URL" && k !== "REDIS_URL") childEnv[k] = v;
  Object.assign(childEnv, env, { LOG_LEVEL: "silent" });
  const p = Bun.spawn(["npm", "run", "--silent", "admin", "--", ...args], { cwd: ROOT, env: childEnv, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr: stderr.split("\n").filter((l) => !l.includes("npm warn")).join("\n") };
}

describe(`admin command (${storesLabel})`, () => {
  // The embedded database allows one process: the gateway is stopped while the command runs,
  // then a new gateway opens the same DATA_DIR. With Postgres both run side by side.
  const dataDir = mkdtempSync(join(tmpdir(), "gw-admin-"));
  const key = randomBytes(32).toString("hex");
  const base = { DATA_DIR: dataDir, GATEWAY_SECRET_KEY: key, SIGNUP_IP_LIMIT_PER_HOUR: "1000" };
  let gw: TestGateway | null = null;
  afterAll(async () => { await gw?.stop(); rmSync(dataDir, { recursive: true, force: true }); }, 60_000);

  async function withStoresFree<T>(fn: (env: Record<string, string>) => Promise<T>): Promise<T> {
    if (REAL_STORES) return fn({ DATABASE_URL: gw!.env.DATABASE_URL! });
    await gw!.stop();
    try {
      return await fn({ DATA_DIR: dataDir });
    } finally {
      gw = await startTestGateway(base);
    }
  }

  test("activate <account id> moves the account to pro and prints what it did; list and show print it", async () => {
    gw = await startTestGateway(base);
    const a = await signupViaApi(gw);
    const b = await signupViaApi(gw);
    const out = await withStoresFree(async (env) => ({
      activate: await admin(env, "activate", a.accountId),
      again: await admin(env, "activate", a.accountId),
      byEmail: await admin(env, "activate", b.email.toUpperCase()),
      list: await admin(env, "list"),
      show: await admin(env, "show", a.accountId),
    }));
    expect(out.activate.code).toBe(0);
    expect(out.activate.stdout).toContain(`Activated ${a.accountId} (${a.email}): plan pro, deadline cleared.`);
    expect(out.again.code).toBe(0);
    expect(out.again.stdout).toContain("already pro");
    expect(out.byEmail.code).toBe(0);
    expect(out.byEmail.stdout).toContain(`Activated ${b.accountId}`);
    expect(out.list.stdout).toContain(a.accountId);
    expect(out.list.stdout).toContain(b.email);
    expect(out.show.stdout).toContain(`${a.accountId}  ${a.email}  pro`);
    const me = await gw!.call("/v1/organizations/me", { token: a.token });
    expect(me.body.plan).toBe("pro");
    expect((await gw!.call("/v1/organizations/tokens", { token: b.token })).status).toBe(200);
  }, 120_000);

  test("unknown accounts and bad usage exit non-zero with a message", async () => {
    const out = await withStoresFree(async (env) => ({
      unknown: await admin(env, "activate", "acct_doesnotexist"),
      noArg: await admin(env, "activate"),
      bogus: await admin(env, "frobnicate"),
    }));
    expect(out.unknown.code).toBe(1);
    expect(out.unknown.stderr).toContain("No account with id acct_doesnotexist");
    expect(out.noArg.code).toBe(2);
    expect(out.noArg.stderr).toContain("Usage: npm run admin");
    expect(out.bogus.code).toBe(2);
  }, 120_000);
});
