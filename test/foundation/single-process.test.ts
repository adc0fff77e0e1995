// One process per address and per embedded data directory, and the admin command beside a
// running gateway, with real gateway processes (`bun src/main.ts`). The embedded database is what
// these rules protect, so they run on the embedded suite only (the real-stores suite skips them).
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import { startGateway } from "../../src/gateway.ts";
import { LOCK_FILE } from "../../src/store/db/data-dir-lock.ts";
import { ADMIN_FILE } from "../../src/admin/access-file.ts";
import { createAccount, REAL_STORES } from "../helpers/gateway.ts";
import { spawnGateway, type ChildGateway } from "../relay/child-gateway.ts";

const ROOT = join(import.meta.dir, "..", "..");
const BUN = join(ROOT, "node_modules", ".bin", "bun");
const run = REAL_STORES ? describe.skip : describe;
const label = REAL_STORES ? "skipped on the real-stores suite: the embedded database is what these rules protect" : "embedded database, gateway processes";

function baseEnv(extra: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? "", HOME: process.env.HOME ?? "", HOST: "127.0.0.1", LOG_LEVEL: "silent", NODE_ENV: "test", ...extra };
}

/** Runs a command to its end; returns exit code and output. */
async function runToEnd(cmd: string[], env: Record<string, string>) {
  const p = Bun.spawn(cmd, { cwd: ROOT, env, stdout: "pipe", stderr: "pipe" });
  const [stdout, stderr, code] = await Promise.all([new Response(p.stdout).text(), new Response(p.stderr).text(), p.exited]);
  return { code, stdout, stderr: stderr.split("\n").filter((l) => !l.includes("npm warn")).join("\n") };
}

run(`one process per address and data directory (${label})`, () => {
  const dataDir = mkdtempSync(join(tmpdir(), "gw-single-"));
  const otherDir = mkdtempSync(join(tmpdir(), "gw-single-"));
  const secret = randomBytes(32).toString("hex");
  let first: ChildGateway;
  let account: { id: string; email: string };

  beforeAll(async () => {
    // An unpaid account in the data directory, created before the gateway process owns it.
    const seed = await startGateway({ DATA_DIR: dataDir, GATEWAY_SECRET_KEY: secret, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
    account = await createAccount(seed, { plan: "free" });
    await seed.stop();
    first = await spawnGateway({ DATA_DIR: dataDir, GATEWAY_SECRET_KEY: secret });
  }, 60_000);
  afterAll(async () => {
    await first?.terminate();
    rmSync(dataDir, { recursive: true, force: true });
    rmSync(otherDir, { recursive: true, force: true });
  }, 60_000);

  test("CONTRACT §1 a second start on the same port fails with 'address in use' and exit code 1 (no reusePort)", async () => {
    const port = new URL(first.url).port;
    const r = await runToEnd([BUN, "src/main.ts"], baseEnv({ PORT: port, DATA_DIR: otherDir, GATEWAY_SECRET_KEY: secret }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(`address in use: 127.0.0.1:${port}`);
    // The first gateway still serves, alone.
    expect((await fetch(first.url + "/healthz")).status).toBe(200);
  }, 30_000);

  test("CONTRACT §1 a second process on the same embedded DATA_DIR fails with 'data directory in use' naming the holder's PID", async () => {
    const r = await runToEnd([BUN, "src/main.ts"], baseEnv({ PORT: "0", DATA_DIR: dataDir, GATEWAY_SECRET_KEY: secret }));
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("data directory in use");
    expect(r.stderr).toMatch(/PID \d+/);
  }, 30_000);

  test("CONTRACT §1 a lock left by a process that is gone is stale: the next gateway takes the directory over", async () => {
    const dead = Bun.spawn(["true"]);
    await dead.exited;
    writeFileSync(join(otherDir, LOCK_FILE), `${dead.pid}\n`);
    const gw = await startGateway({ DATA_DIR: otherDir, GATEWAY_SECRET_KEY: secret, PORT: "0", HOST: "127.0.0.1", LOG_LEVEL: "silent" });
    try {
      expect((await fetch(gw.url + "/healthz")).status).toBe(200);
    } finally {
      await gw.stop();
    }
  }, 30_000);

  test("admin command beside a running gateway on the embedded database runs through the gateway's loopback admin endpoint; after the gateway stops it opens the database itself", async () => {
    const env = baseEnv({ DATA_DIR: dataDir, GATEWAY_SECRET_KEY: secret });
    // Beside the running gateway: the gateway runs it (the embedded database allows one process).
    const activated = await runToEnd(["npm", "run", "--silent", "admin", "--", "activate", account.email], env);
    expect(activated.stderr).toBe("");
    expect(activated.code).toBe(0);
    expect(activated.stdout).toContain(`Activated ${account.id}`);
    const again = await runToEnd(["npm", "run", "--silent", "admin", "--", "activate", account.id], env);
    expect(again.stdout).toContain("already pro");
    const missing = await runToEnd(["npm", "run", "--silent", "admin", "--", "show", "nobody@example.com"], env);
    expect(missing.code).toBe(1);
    expect(missing.stderr).toContain("No live account with email nobody@example.com");

    // The endpoint wants the secret of DATA_DIR/admin.json (mode 0600), and nothing else will do.
    const access = JSON.parse(readFileSync(join(dataDir, ADMIN_FILE), "utf8"));
    expect(statSync(join(dataDir, ADMIN_FILE)).mode & 0o077).toBe(0);
    expect(access.url).toBe(first.url);
    for (const headers of [{}, { "x-admin-secret": "wrong" }, { "x-admin-secret": access.secret.slice(1) }] as Array<Record<string, string>>) {
      const r = await fetch(`${first.url}/admin/commands`, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify({ args: ["list"] }) });
      expect(r.status).toBe(401);
      expect(JSON.stringify(await r.json())).not.toContain(account.email);
    }
    const ok = await fetch(`${first.url}/admin/commands`, { method: "POST", headers: { "content-type": "application/json", "x-admin-secret": access.secret }, body: JSON.stringify({ args: ["list"] }) });
    expect(ok.status).toBe(200);
    expect(((await ok.json()) as { stdout: string[] }).stdout.join("\n")).toContain(account.email);

    // A gateway that wrote no admin file (older, or the file removed): refused with what to do, nothing written.
    rmSync(join(dataDir, ADMIN_FILE));
    const refused = await runToEnd(["npm", "run", "--silent", "admin", "--", "activate", account.id], env);
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain("stop the gateway");
    expect(refused.stderr).toContain("DATABASE_URL");

    // The gateway stopped: the command opens the database itself, and sees what the gateway wrote.
    expect(await first.terminate()).toBe(0);
    expect(existsSync(join(dataDir, ADMIN_FILE))).toBe(false);
    const shown = await runToEnd(["npm", "run", "--silent", "admin", "--", "show", account.id], env);
    expect(shown.code).toBe(0);
    expect(shown.stdout).toContain(`${account.id}  ${account.email}  pro`);
  }, 60_000);
});
