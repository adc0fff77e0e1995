// Account-token authentication on management paths (SPEC "Authentication", Errors table, and the
// order of checks in CONTRACT §8), exercised with accounts made by the real signup flow.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { addToken, startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { activateViaWebhook, proAccountViaApi, signupViaApi } from "../helpers/signup.ts";
import { accounts } from "../../src/store/db/schema/index.ts";

/** Every management path with each method it serves, and a body that would be valid. */
const MANAGEMENT_CALLS: Array<{ method: string; path: string; body?: unknown }> = [
  { method: "GET", path: "/v1/organizations/usage" },
  { method: "GET", path: "/v1/organizations/routing-keys" },
  { method: "POST", path: "/v1/organizations/routing-keys", body: { label: "x" } },
  { method: "PATCH", path: "/v1/organizations/routing-keys?id=rkey_x", body: { label: "y" } },
  { method: "GET", path: "/v1/organizations/bridges" },
  { method: "POST", path: "/v1/organizations/bridges", body: { base_url: "https://bridge.example.com", token: "12345678" } },
  { method: "GET", path: "/v1/organizations/sub-session" },
  { method: "POST", path: "/v1/organizations/sub-session", body: { auth_json: { tokens: { access_token: "a", refresh_token: "b" } } } },
  { method: "DELETE", path: "/v1/organizations/sub-session" },
  { method: "GET", path: "/v1/organizations/credentials" },
  { method: "POST", path: "/v1/organizations/credentials", body: { provider: "openai", api_key: "sk-test-123456789" } },
  { method: "GET", path: "/v1/organizations/tokens" },
  { method: "POST", path: "/v1/organizations/tokens", body: { scope: "read_only" } },
  { method: "DELETE", path: "/v1/organizations/tokens?id=tok_x" },
  { method: "GET", path: "/v1/organizations/webhook-secret" },
  { method: "POST", path: "/v1/organizations/webhook-secret" },
  { method: "GET", path: "/v1/organizations/budget-alerts" },
  { method: "POST", path: "/v1/organizations/budget-alerts", body: { thresholds_percent: [80], email: "ops@example.com" } },
  { method: "DELETE", path: "/v1/organizations/budget-alerts" },
];

describe(`management authentication (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({ BILLING_WEBHOOK_SECRET: "whsec_auth_tests", SIGNUP_IP_LIMIT_PER_HOUR: "1000" }); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  const me = (headers: Record<string, string> = {}) => gw.call("/v1/organizations/me", { headers });

  test("management with no token answers 401 with no code", async () => {
    for (const h of [{}, { authorization: "" }, { authorization: "Bearer" }, { authorization: "Bearer    " }] as Array<Record<string, string>>) {
      const r = await me(h);
      expect(r.status).toBe(401);
      expect(Object.keys(r.body)).toEqual(["error"]);
    }
  });

  test("the Bearer prefix is optional: `Authorization: sk_…` and `Authorization: Bearer sk_…` both work", async () => {
    const a = await signupViaApi(gw);
    expect((await me({ authorization: a.token })).status).toBe(200);
    expect((await me({ authorization: `Bearer ${a.token}` })).status).toBe(200);
    expect((await me({ authorization: `bearer ${a.token}` })).status).toBe(200);
  });

  test("an unknown account token answers 401 invalid_account_token", async () => {
    for (const t of ["sk_doesnotexist0000000000000000000000000000", "rk_nope", "gw_notanaccounttoken", "sk-upstream-provider-key", "x".repeat(5000)]) {
      const r = await me({ authorization: `Bearer ${t}` });
      expect(r.status).toBe(401);
      expect(r.body.code).toBe("invalid_account_token");
    }
  });

  test("a revoked account token answers 401 invalid_account_token", async () => {
    const a = await proAccountViaApi(gw);
    const c = await gw.call("/v1/organizations/tokens", { method: "POST", token: a.token, body: { scope: "read_write" } });
    await gw.call(`/v1/organizations/tokens?id=${c.body.token.id}`, { method: "DELETE", token: a.token });
    const r = await me({ authorization: c.body.account_token });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("invalid_account_token");
  });

  test("405 method_not_allowed on management paths, with an Allow header, before any auth", async () => {
    for (const [method, path] of [["PUT", "/v1/organizations/me"], ["POST", "/v1/organizations/me"], ["DELETE", "/v1/organizations/me"], ["PATCH", "/v1/organizations/tokens"], ["PUT", "/v1/organizations/tokens"]] as const) {
      const r = await gw.call(path, { method });
      expect(r.status).toBe(405);
      expect(r.body.code).toBe("method_not_allowed");
      expect(r.headers.get("allow")).toBeTruthy();
    }
  });

  test("403 read_only_token: an rk_ token on POST/PATCH/DELETE of every management path", async () => {
    const a = await proAccountViaApi(gw);
    const rk = await addToken(gw, a.accountId, "read_only");
    for (const c of MANAGEMENT_CALLS.filter((c) => c.method !== "GET")) {
      const r = await gw.call(c.path, { method: c.method, token: rk, body: c.body });
      expect({ path: c.path, method: c.method, status: r.status, code: r.body.code }).toEqual({ path: c.path, method: c.method, status: 403, code: "read_only_token" });
    }
  });

  test("402 payment_required on every management path except GET /me and listing or revoking account tokens (CONTRACT §8) while the plan is free", async () => {
    const a = await signupViaApi(gw);
    const open = (c: { method: string; path: string }) => c.path.startsWith("/v1/organizations/tokens") && c.method !== "POST";
    for (const c of MANAGEMENT_CALLS.filter((c) => !open(c))) {
      const r = await gw.call(c.path, { method: c.method, token: a.token, body: c.body });
      expect({ path: c.path, method: c.method, status: r.status, code: r.body.code }).toEqual({ path: c.path, method: c.method, status: 402, code: "payment_required" });
      expect(Object.keys(r.body).sort()).toEqual(["code", "error", "message", "payment"]);
    }
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(200);
    expect((await gw.call("/v1/organizations/tokens", { token: a.token })).status).toBe(200);
  });

  test("after activation the plan gate opens on every management path", async () => {
    const a = await signupViaApi(gw);
    await activateViaWebhook(gw, a.accountId);
    for (const c of MANAGEMENT_CALLS.filter((c) => c.method === "GET")) {
      const r = await gw.call(c.path, { token: a.token });
      expect({ path: c.path, status: r.status }).toEqual({ path: c.path, status: 200 });
    }
  });

  test("order of checks: 405 → 401 → 410 → 403 → 402 → 400", async () => {
    // 405 before 401: wrong method, no token.
    expect((await gw.call("/v1/organizations/tokens", { method: "PUT" })).status).toBe(405);
    // 401 before everything else: no token on a write with a bad body.
    expect((await gw.call("/v1/organizations/tokens", { method: "POST", body: "{" })).status).toBe(401);
    // 403 before 402: rk_ of a free account on a write.
    const free = await signupViaApi(gw);
    const rk = await addToken(gw, free.accountId, "read_only");
    const w = await gw.call("/v1/organizations/tokens", { method: "POST", token: rk, body: { scope: "read_only" } });
    expect(w.body.code).toBe("read_only_token");
    // 402 before 400: sk_ of a free account with an invalid body.
    const p = await gw.call("/v1/organizations/tokens", { method: "POST", token: free.token, body: { nope: true } });
    expect(p.body.code).toBe("payment_required");
    // 410 before 403: rk_ of a removed account on a write.
    await gw.ctx.db.update(accounts).set({ removedAt: new Date() }).where(eq(accounts.id, free.accountId));
    const g = await gw.call("/v1/organizations/tokens", { method: "POST", token: rk, body: { scope: "read_only" } });
    expect(g.status).toBe(410);
    expect(g.body.code).toBe("account_expired");
  });
});

describe(`GATEWAY_SECRET_KEY missing in production (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => {
    gw = await startTestGateway({ NODE_ENV: "production", GATEWAY_SECRET_KEY: "", BILLING_WEBHOOK_SECRET: "whsec_env_missing", SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
  }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("signup, verify, /me and activation work without the key; saving a credential answers 500 env_missing", async () => {
    expect(gw.ctx.secrets.available).toBe(false);
    const a = await signupViaApi(gw);
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(200);
    await activateViaWebhook(gw, a.accountId);
    const r = await gw.call("/v1/organizations/credentials", { method: "POST", token: a.token, body: { provider: "openai", api_key: "sk-test-envmissing-123456" } });
    expect(r.status).toBe(500);
    expect(r.body.code).toBe("env_missing");
    expect(r.body.error).toContain("GATEWAY_SECRET_KEY");
    expect(gw.logs.join("")).not.toContain("sk-test-envmissing-123456");
  });
});
