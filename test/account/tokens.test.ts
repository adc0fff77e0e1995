// Account tokens (CONTRACT §6) and GET /v1/organizations/me (SPEC "Account").
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { proAccountViaApi, signupViaApi } from "../helpers/signup.ts";
import { accountTokens } from "../../src/store/db/schema/index.ts";
import { sha256Hex } from "../../src/lib/crypto.ts";
import { TOKEN_TOUCH_MS, touchAccountToken } from "../../src/management/guard.ts";

describe(`account tokens and /me (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({ BILLING_WEBHOOK_SECRET: "whsec_tokens_tests", SIGNUP_IP_LIMIT_PER_HOUR: "1000" }); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  const create = (token: string, body: unknown) => gw.call("/v1/organizations/tokens", { method: "POST", token, body });

  test("GET /v1/organizations/me while free: the Account object with payment block and relay message", async () => {
    const a = await signupViaApi(gw);
    const r = await gw.call("/v1/organizations/me", { token: a.token });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["email", "id", "message", "payment", "plan", "token_label", "token_scope"]);
    expect(r.body).toMatchObject({ id: a.accountId, email: a.email, plan: "free", token_scope: "read_write", token_label: "agent-signup" });
    expect(Object.keys(r.body.payment).sort()).toEqual(["account_expires_at", "checkout_url", "message", "poll", "price_usd"]);
    expect(r.body.payment.account_expires_at).toBe(a.signup.account_expires_at);
    expect(r.body.message).toContain(r.body.payment.checkout_url);
  });

  test("GET /v1/organizations/me once pro: no payment block, no message", async () => {
    const a = await proAccountViaApi(gw);
    const r = await gw.call("/v1/organizations/me", { token: a.token });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ id: a.accountId, email: a.email, plan: "pro", token_scope: "read_write", token_label: "agent-signup" });
  });

  test("GET /v1/organizations/me refuses query parameters it does not take (400 bad_request naming it)", async () => {
    const a = await signupViaApi(gw);
    const r = await gw.call("/v1/organizations/me?verbose=1", { token: a.token });
    expect(r.status).toBe(400);
    expect(r.body.code).toBe("bad_request");
    expect(r.body.error).toContain("verbose");
  });

  test("POST tokens {scope: read_only, label} → {token: {id, prefix, scope, label, created_at}, account_token rk_} shown once", async () => {
    const a = await proAccountViaApi(gw);
    const r = await create(a.token, { scope: "read_only", label: "dashboard" });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["account_token", "token"]);
    expect(Object.keys(r.body.token).sort()).toEqual(["created_at", "id", "label", "prefix", "scope"]);
    expect(r.body.account_token).toMatch(/^rk_[A-Za-z0-9]{40}$/);
    expect(r.body.token).toMatchObject({ scope: "read_only", label: "dashboard", prefix: r.body.account_token.slice(0, 10) });
    expect(Number.isNaN(Date.parse(r.body.token.created_at))).toBe(false);
    const me = await gw.call("/v1/organizations/me", { token: r.body.account_token });
    expect(me.body).toMatchObject({ id: a.accountId, token_scope: "read_only", token_label: "dashboard" });
    const list = await gw.call("/v1/organizations/tokens", { token: a.token });
    expect(JSON.stringify(list.body)).not.toContain(r.body.account_token);
  });

  test("POST tokens {scope: read_write} → an sk_ token with the default label", async () => {
    const a = await proAccountViaApi(gw);
    const r = await create(a.token, { scope: "read_write" });
    expect(r.status).toBe(200);
    expect(r.body.account_token).toMatch(/^sk_/);
    expect(r.body.token).toMatchObject({ scope: "read_write", label: "default" });
    // The new sk_ token can write.
    expect((await create(r.body.account_token, { scope: "read_only" })).status).toBe(200);
  });

  test("created tokens are stored as sha256 only", async () => {
    const a = await proAccountViaApi(gw);
    const r = await create(a.token, { scope: "read_only" });
    const [row] = await gw.ctx.db.select().from(accountTokens).where(eq(accountTokens.id, r.body.token.id));
    expect(row!.tokenHash).toBe(sha256Hex(r.body.account_token));
    expect(JSON.stringify(row)).not.toContain(r.body.account_token);
  });

  test("GET tokens lists the live tokens without the raw token (rk_ may list)", async () => {
    const a = await proAccountViaApi(gw);
    const ro = await create(a.token, { scope: "read_only", label: "reader" });
    const r = await gw.call("/v1/organizations/tokens", { token: ro.body.account_token });
    expect(r.status).toBe(200);
    expect(r.body.tokens.map((t: any) => t.label).sort()).toEqual(["agent-signup", "reader"]);
    for (const t of r.body.tokens) expect(Object.keys(t).sort()).toEqual(["created_at", "id", "label", "last_used_at", "prefix", "scope"]);
    expect(JSON.stringify(r.body)).not.toContain(ro.body.account_token);
    expect(JSON.stringify(r.body)).not.toContain(a.token);
  });

  test("account token last_used_at: a call with the token records when it was used, written at most once a minute per token (not once per request), and GET tokens shows it", async () => {
    const a = await proAccountViaApi(gw);
    const ro = await create(a.token, { scope: "read_only", label: "poller" });
    const id = ro.body.token.id as string;
    const stored = async () => (await gw.ctx.db.select().from(accountTokens).where(eq(accountTokens.id, id)))[0]!.lastUsedAt;
    const listed = async () => (await gw.call("/v1/organizations/tokens", { token: a.token })).body.tokens.find((t: any) => t.id === id).last_used_at;
    expect(await listed()).toBeNull();

    const t0 = Date.now();
    expect((await gw.call("/v1/organizations/me", { token: ro.body.account_token })).status).toBe(200);
    let first: Date | null = null;
    for (let i = 0; i < 200 && !first; i++) {
      first = await stored();
      if (!first) await Bun.sleep(10);
    }
    expect(first).not.toBeNull();
    expect(first!.getTime()).toBeGreaterThanOrEqual(t0 - 5);
    expect(first!.getTime()).toBeLessThanOrEqual(Date.now());
    expect(await listed()).toBe(first!.toISOString());

    // More calls within the minute write nothing: the stored time stays the first call's.
    await Bun.sleep(20);
    for (let i = 0; i < 10; i++) expect((await gw.call("/v1/organizations/tokens", { token: ro.body.account_token })).status).toBe(200);
    await Bun.sleep(100);
    expect((await stored())!.getTime()).toBe(first!.getTime());

    // A use a minute later is written again.
    const [row] = await gw.ctx.db.select().from(accountTokens).where(eq(accountTokens.id, id));
    const later = first!.getTime() + TOKEN_TOUCH_MS + 1_000;
    touchAccountToken(gw.ctx, row!, later - 2_000); // still within the minute: no write
    touchAccountToken(gw.ctx, row!, later);
    let next: Date | null = null;
    for (let i = 0; i < 200; i++) {
      next = await stored();
      if (next && next.getTime() !== first!.getTime()) break;
      await Bun.sleep(10);
    }
    expect(next!.getTime()).toBe(later);
  });

  test("DELETE tokens?id= revokes: the revoked token answers 401 invalid_account_token and leaves the list", async () => {
    const a = await proAccountViaApi(gw);
    const t = await create(a.token, { scope: "read_only", label: "temp" });
    const d = await gw.call(`/v1/organizations/tokens?id=${t.body.token.id}`, { method: "DELETE", token: a.token });
    expect(d.status).toBe(200);
    expect(d.body).toEqual({ revoked: true });
    const me = await gw.call("/v1/organizations/me", { token: t.body.account_token });
    expect(me.status).toBe(401);
    expect(me.body.code).toBe("invalid_account_token");
    const list = await gw.call("/v1/organizations/tokens", { token: a.token });
    expect(list.body.tokens.map((x: any) => x.id)).not.toContain(t.body.token.id);
  });

  test("the token issued by agent-verify can be revoked, by itself", async () => {
    const a = await proAccountViaApi(gw);
    const list = await gw.call("/v1/organizations/tokens", { token: a.token });
    const own = list.body.tokens.find((t: any) => t.label === "agent-signup");
    expect((await gw.call(`/v1/organizations/tokens?id=${own.id}`, { method: "DELETE", token: a.token })).status).toBe(200);
    const r = await gw.call("/v1/organizations/me", { token: a.token });
    expect(r.status).toBe(401);
    expect(r.body.code).toBe("invalid_account_token");
  });

  test("DELETE tokens with another account's token id answers 400 and that token keeps working", async () => {
    const a = await proAccountViaApi(gw);
    const b = await proAccountViaApi(gw);
    const bt = await create(b.token, { scope: "read_only" });
    const d = await gw.call(`/v1/organizations/tokens?id=${bt.body.token.id}`, { method: "DELETE", token: a.token });
    expect(d.status).toBe(400);
    expect(d.body.code).toBe("bad_request");
    expect((await gw.call("/v1/organizations/me", { token: bt.body.account_token })).status).toBe(200);
  });

  test("DELETE tokens without id answers 400 naming `id`", async () => {
    const a = await proAccountViaApi(gw);
    const d = await gw.call("/v1/organizations/tokens", { method: "DELETE", token: a.token });
    expect(d.status).toBe(400);
    expect(d.body.code).toBe("bad_request");
    expect(d.body.error).toContain("id");
  });

  test("POST tokens validation: unknown fields, bad scope, missing scope, long label → 400 bad_request naming the field", async () => {
    const a = await proAccountViaApi(gw);
    const cases: Array<[unknown, string]> = [
      [{ scope: "read_only", account_id: "acct_x" }, "account_id"],
      [{ scope: "admin" }, "scope"],
      [{}, "scope"],
      [{ scope: "read_only", label: "x".repeat(61) }, "label"],
      [{ scope: "read_only", label: 5 }, "label"],
      [{ scope: ["read_only"] }, "scope"],
    ];
    for (const [body, field] of cases) {
      const r = await create(a.token, body);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
      expect(r.body.error).toContain(field);
    }
  });

  test("tokens endpoints refuse unknown query parameters (400 naming them)", async () => {
    const a = await proAccountViaApi(gw);
    const g = await gw.call("/v1/organizations/tokens?all=1", { token: a.token });
    expect(g.status).toBe(400);
    expect(g.body.error).toContain("all");
    const p = await gw.call("/v1/organizations/tokens?x=1", { method: "POST", token: a.token, body: { scope: "read_only" } });
    expect(p.status).toBe(400);
    expect(p.body.error).toContain("x");
    const d = await gw.call("/v1/organizations/tokens?id=tok_a&y=2", { method: "DELETE", token: a.token });
    expect(d.status).toBe(400);
    expect(d.body.error).toContain("y");
  });

  test("an rk_ token gets 403 read_only_token on POST and DELETE tokens", async () => {
    const a = await proAccountViaApi(gw);
    const ro = await create(a.token, { scope: "read_only" });
    const p = await create(ro.body.account_token, { scope: "read_write" });
    expect(p.status).toBe(403);
    expect(p.body.code).toBe("read_only_token");
    const d = await gw.call(`/v1/organizations/tokens?id=${ro.body.token.id}`, { method: "DELETE", token: ro.body.account_token });
    expect(d.status).toBe(403);
    expect(d.body.code).toBe("read_only_token");
  });

  test("plan gate: creating a token answers 402 payment_required with the payment block while free (listing and revoking stay open, CONTRACT §8)", async () => {
    const a = await signupViaApi(gw);
    for (const [method, path, body] of [["POST", "/v1/organizations/tokens", { scope: "read_only" }]] as const) {
      const r = await gw.call(path, { method, token: a.token, body });
      expect(r.status).toBe(402);
      expect(r.body.code).toBe("payment_required");
      expect(r.body.payment.checkout_url).toContain(a.accountId);
      expect(typeof r.body.message).toBe("string");
    }
    expect((await gw.call("/v1/organizations/tokens", { token: a.token })).status).toBe(200);
    expect((await gw.call("/v1/organizations/tokens?id=tok_x", { method: "DELETE", token: a.token })).status).toBe(400);
  });

  test("no raw account token appears in any log line", async () => {
    const a = await proAccountViaApi(gw);
    const r = await create(a.token, { scope: "read_only" });
    const all = gw.logs.join("");
    expect(all).not.toContain(a.token);
    expect(all).not.toContain(r.body.account_token);
    expect(all).toContain(r.body.token.prefix);
  });
});
