// Unpaid agent-created accounts are removed at their deadline (SPEC "Account plan"): the job in
// src/jobs/account-expiry.ts, the 410 that follows, and a fresh signup with the same email.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { activateViaWebhook, signupCall, signupViaApi } from "../helpers/signup.ts";
import { accounts, bridges, credentials, routingKeys, subSessions } from "../../src/store/db/schema/index.ts";
import { newId } from "../../src/lib/ids.ts";
import { randomToken, sha256Hex } from "../../src/lib/crypto.ts";
import type { Invalidation } from "../../src/store/invalidation.ts";

const TTL_SECONDS = 2;

/** Rows an account can hold; a free account cannot create them through the API (402), so they are inserted. */
async function giveHoldings(gw: TestGateway, accountId: string) {
  const db = gw.ctx.db;
  const key = `gw_${randomToken(40)}`;
  await db.insert(routingKeys).values({ id: newId("rkey"), accountId, label: "k", keyHash: sha256Hex(key), keyPrefix: key.slice(0, 10) });
  const credId = newId("cred");
  await db.insert(credentials).values({ id: credId, accountId, provider: "openai", label: "c", keyCiphertext: gw.ctx.secrets.seal("sk-test-holding", `credentials:${credId}`), keyFingerprint: "ding" });
  const brId = newId("br");
  await db.insert(bridges).values({ id: brId, accountId, label: "b", baseUrl: "https://bridge.example.com", tokenCiphertext: gw.ctx.secrets.seal("bridge-token", `bridges:${brId}`), tokenFingerprint: "oken" });
  await db.insert(subSessions).values({ id: newId("sub"), accountId, status: "connected" });
}

async function holdings(gw: TestGateway, accountId: string) {
  const db = gw.ctx.db;
  return {
    routingKeys: (await db.select().from(routingKeys).where(eq(routingKeys.accountId, accountId))).length,
    credentials: (await db.select().from(credentials).where(eq(credentials.accountId, accountId))).length,
    bridges: (await db.select().from(bridges).where(eq(bridges.accountId, accountId))).length,
    subSessions: (await db.select().from(subSessions).where(eq(subSessions.accountId, accountId))).length,
  };
}

describe(`account expiry (${storesLabel})`, () => {
  let gw: TestGateway;
  const invalidations: Invalidation[] = [];
  beforeAll(async () => {
    // The sweep interval is long: these tests run the job by hand to see each step.
    gw = await startTestGateway({ UNPAID_ACCOUNT_TTL_SECONDS: String(TTL_SECONDS), EXPIRY_SWEEP_INTERVAL_SECONDS: "3600", BILLING_WEBHOOK_SECRET: "whsec_expiry_tests", SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
    await gw.ctx.kv.subscribe("gw:invalidate", (m) => invalidations.push(JSON.parse(m)));
  }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  const job = () => gw.jobs.find((j) => j.name === "account-expiry")!;

  test("the account-expiry job is registered at boot", () => {
    expect(job()).toBeDefined();
  });

  test("a free account is removed at its deadline: tombstone, holdings deleted, invalidation published, every token answers 410 account_expired", async () => {
    const a = await signupViaApi(gw);
    const rk = await addToken(gw, a.accountId, "read_only");
    await giveHoldings(gw, a.accountId);
    // Before the deadline the sweep leaves it alone.
    await job().runOnce();
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(200);

    await Bun.sleep(TTL_SECONDS * 1000 + 200);
    await job().runOnce();
    const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, a.accountId));
    expect(row!.removedAt).not.toBeNull();
    expect(await holdings(gw, a.accountId)).toEqual({ routingKeys: 0, credentials: 0, bridges: 0, subSessions: 0 });
    for (let i = 0; i < 50 && !invalidations.some((m) => m.kind === "account" && m.accountId === a.accountId); i++) await Bun.sleep(20);
    expect(invalidations).toContainEqual({ kind: "account", accountId: a.accountId });
    for (const token of [a.token, rk]) {
      for (const [method, path] of [["GET", "/v1/organizations/me"], ["GET", "/v1/organizations/tokens"], ["POST", "/v1/organizations/tokens"]] as const) {
        const r = await gw.call(path, { method, token, body: method === "POST" ? { scope: "read_only" } : undefined });
        expect(r.status).toBe(410);
        expect(r.body.code).toBe("account_expired");
      }
    }
  });

  test("past the deadline the token answers 410 even before the sweep runs", async () => {
    const a = await signupViaApi(gw);
    await Bun.sleep(TTL_SECONDS * 1000 + 200);
    const r = await gw.call("/v1/organizations/me", { token: a.token });
    expect(r.status).toBe(410);
    expect(r.body.code).toBe("account_expired");
  });

  test("after removal the same email signs up again from scratch: new account, new deadline, the old token stays 410", async () => {
    const a = await signupViaApi(gw);
    await Bun.sleep(TTL_SECONDS * 1000 + 200);
    await job().runOnce();
    const s = await signupCall(gw, "agent-signup", { email: a.email });
    expect(s.status).toBe(200);
    expect(s.body.new_account).toBe(true);
    expect(Date.parse(s.body.account_expires_at)).toBeGreaterThan(Date.parse(a.signup.account_expires_at));
    const b = await signupViaApi(gw, { email: a.email });
    expect(b.accountId).not.toBe(a.accountId);
    expect(b.verify.plan).toBe("free");
    expect((await gw.call("/v1/organizations/me", { token: b.token })).body.id).toBe(b.accountId);
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(410);
  });

  test("an email whose account passed its deadline (not yet swept) signs up from scratch too", async () => {
    const a = await signupViaApi(gw);
    await Bun.sleep(TTL_SECONDS * 1000 + 200);
    const b = await signupViaApi(gw, { email: a.email });
    expect(b.signup.new_account).toBe(true);
    expect(b.accountId).not.toBe(a.accountId);
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(410);
  });

  test("an activated account is never removed: the deadline is cleared for good", async () => {
    const a = await signupViaApi(gw);
    await activateViaWebhook(gw, a.accountId);
    await Bun.sleep(TTL_SECONDS * 1000 + 200);
    await job().runOnce();
    const r = await gw.call("/v1/organizations/me", { token: a.token });
    expect(r.status).toBe(200);
    expect(r.body.plan).toBe("pro");
    const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, a.accountId));
    expect(row!.removedAt).toBeNull();
    expect(row!.accountExpiresAt).toBeNull();
  });
});

describe(`account expiry on its own interval (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ UNPAID_ACCOUNT_TTL_SECONDS: "1", EXPIRY_SWEEP_INTERVAL_SECONDS: "0.2", SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
  }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("the job runs every EXPIRY_SWEEP_INTERVAL_SECONDS and removes the account without being called", async () => {
    const a = await signupViaApi(gw);
    let removedAt: Date | null = null;
    for (let i = 0; i < 100 && !removedAt; i++) {
      await Bun.sleep(100);
      const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, a.accountId));
      removedAt = row!.removedAt;
    }
    expect(removedAt).not.toBeNull();
    expect(removedAt!.getTime()).toBeGreaterThanOrEqual(Date.parse(a.signup.account_expires_at));
  });
});
