// Agent signup and verify (SPEC "Agent signup", "Account plan"), with the codes read out of a
// real SMTP server on loopback.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { startTestGateway, storesLabel, REAL_STORES, type TestGateway } from "../helpers/gateway.ts";
import { randomEmail, randomIp, signupCall, signupViaApi, startSmtpSink, activateViaWebhook, type SmtpSink } from "../helpers/signup.ts";
import { accounts, accountTokens, signupCodes } from "../../src/store/db/schema/index.ts";
import { sha256Hex } from "../../src/lib/crypto.ts";

const TTL = 172800;

describe(`agent signup and verify (${storesLabel})`, () => {
  let sink: SmtpSink;
  let gw: TestGateway;
  beforeAll(async () => {
    sink = await startSmtpSink();
    gw = await startTestGateway({ SMTP_URL: sink.url, BILLING_WEBHOOK_SECRET: "whsec_signup_tests", SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
  }, 60_000);
  afterAll(async () => { await gw?.stop(); await sink?.close(); }, 60_000);

  const signup = (body: unknown, ip?: string) => signupCall(gw, "agent-signup", body, ip);
  const verify = (body: unknown, ip?: string) => signupCall(gw, "agent-verify", body, ip);

  test("agent-signup answers {ok, new_account: true, account_expires_at = signup time + UNPAID_ACCOUNT_TTL_SECONDS}", async () => {
    const before = Date.now();
    const r = await signup({ email: randomEmail() });
    const after = Date.now();
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(["account_expires_at", "new_account", "ok"]);
    expect(r.body.ok).toBe(true);
    expect(r.body.new_account).toBe(true);
    const deadline = Date.parse(r.body.account_expires_at);
    expect(deadline).toBeGreaterThanOrEqual(before + TTL * 1000);
    expect(deadline).toBeLessThanOrEqual(after + TTL * 1000);
  });

  test("the signup email carries a 6-digit code and says an AI agent started the signup", async () => {
    const email = randomEmail();
    expect((await signup({ email })).status).toBe(200);
    const mails = sink.to(email);
    expect(mails.length).toBe(1);
    const text = mails[0]!.raw.replace(/=\r?\n/g, "");
    expect(text).toMatch(/Verification code: \d{6}\b/);
    expect(text).toContain("An AI agent started a signup");
  });

  test("agent-verify answers {user, account_token (sk_, once), token_prefix, token_scope read_write, plan free, payment}", async () => {
    const email = randomEmail();
    const s = await signup({ email });
    const v = await verify({ email, code: sink.lastCode(email) });
    expect(v.status).toBe(200);
    expect(Object.keys(v.body).sort()).toEqual(["account_token", "payment", "plan", "token_prefix", "token_scope", "user"]);
    expect(v.body.user).toEqual({ id: expect.stringMatching(/^acct_/), email });
    expect(v.body.account_token).toMatch(/^sk_[A-Za-z0-9]{40}$/);
    expect(v.body.account_token.startsWith(v.body.token_prefix)).toBe(true);
    expect(v.body.token_scope).toBe("read_write");
    expect(v.body.plan).toBe("free");
    expect(v.body.payment.checkout_url).toBe(`${gw.ctx.config.siteUrl}/checkout?account=${v.body.user.id}`);
    expect(v.body.payment.price_usd).toBe(20);
    expect(v.body.payment.account_expires_at).toBe(s.body.account_expires_at);
    expect(v.body.payment.poll).toContain("GET /v1/organizations/me");
    expect(v.body.payment.message).toContain(v.body.payment.checkout_url);
  });

  test("the account row is created at the first verify, with the deadline that signup returned", async () => {
    const email = randomEmail();
    const s = await signup({ email });
    expect(await gw.ctx.db.select().from(accounts).where(eq(accounts.email, email))).toEqual([]);
    const v = await verify({ email, code: sink.lastCode(email) });
    const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.email, email));
    expect(row!.id).toBe(v.body.user.id);
    expect(row!.plan).toBe("free");
    expect(row!.accountExpiresAt!.toISOString()).toBe(s.body.account_expires_at);
  });

  test("source is stored for attribution and changes nothing else", async () => {
    const email = randomEmail();
    const s = await signup({ email, source: "readme-quickstart" });
    expect(s.status).toBe(200);
    expect(s.body.new_account).toBe(true);
    await verify({ email, code: sink.lastCode(email) });
    const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.email, email));
    expect(row!.source).toBe("readme-quickstart");
  });

  test("an email is matched case-insensitively: one mailbox, one account", async () => {
    const email = randomEmail();
    const a = await signupViaApi(gw, { email, sink });
    const b = await signupViaApi(gw, { email: email.toUpperCase(), sink });
    expect(b.accountId).toBe(a.accountId);
  });

  test("disposable email domains are refused with 400 {error} and no code is sent", async () => {
    for (const email of [`bot-${Date.now()}@mailinator.com`, `bot-${Date.now()}@eu.mailinator.com`, `x${Date.now()}@yopmail.com`]) {
      const before = sink.mails.length;
      const r = await signup({ email });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["error"]);
      expect(r.body.error).toMatch(/[Dd]isposable/);
      expect(sink.mails.length).toBe(before);
      expect(await gw.ctx.db.select().from(signupCodes).where(eq(signupCodes.email, email))).toEqual([]);
    }
  });

  test("missing or invalid email answers 400 {error} without a code field", async () => {
    for (const body of [{}, { email: "" }, { email: "not-an-email" }, { email: 42 }, { email: "a@b" }, { email: `${"x".repeat(250)}@example.com` }]) {
      const r = await signup(body);
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["error"]);
      expect(r.body.error).toContain("email");
    }
  });

  test("at most 3 codes per email per hour: the 4th agent-signup answers 429 {error}", async () => {
    const email = randomEmail();
    for (let i = 0; i < 3; i++) expect((await signup({ email }, randomIp())).status).toBe(200);
    const r = await signup({ email }, randomIp());
    expect(r.status).toBe(429);
    expect(Object.keys(r.body)).toEqual(["error"]);
    expect(sink.to(email).length).toBe(3);
  });

  test("a wrong code answers 400 {error} without a code field", async () => {
    const email = randomEmail();
    await signup({ email });
    const right = sink.lastCode(email);
    const wrong = right === "000000" ? "111111" : "000000";
    const r = await verify({ email, code: wrong });
    expect(r.status).toBe(400);
    expect(Object.keys(r.body)).toEqual(["error"]);
    expect((await verify({ email, code: right })).status).toBe(200);
  });

  test("verify for an email that never signed up answers 400", async () => {
    const r = await verify({ email: randomEmail(), code: "123456" });
    expect(r.status).toBe(400);
    expect(Object.keys(r.body)).toEqual(["error"]);
  });

  test("verify validates its body: code must be 6 digits as a string", async () => {
    const email = randomEmail();
    for (const code of [undefined, "", "12345", "1234567", "abcdef", 123456, null, ["123456"]]) {
      const r = await verify({ email, code });
      expect(r.status).toBe(400);
      expect(r.body.error).toContain("code");
      expect(r.body.code).toBeUndefined();
    }
  });

  test("a code dies after 5 wrong guesses, even the right one afterwards", async () => {
    const email = randomEmail();
    await signup({ email });
    const right = sink.lastCode(email);
    const wrong = (n: number) => String((Number(right) + n) % 1_000_000).padStart(6, "0");
    for (let i = 1; i <= 5; i++) expect((await verify({ email, code: wrong(i) })).status).toBe(400);
    expect((await verify({ email, code: right })).status).toBe(400);
  });

  test("four wrong guesses still leave the code usable", async () => {
    const email = randomEmail();
    await signup({ email });
    const right = sink.lastCode(email);
    const wrong = (n: number) => String((Number(right) + n) % 1_000_000).padStart(6, "0");
    for (let i = 1; i <= 4; i++) expect((await verify({ email, code: wrong(i) })).status).toBe(400);
    expect((await verify({ email, code: right })).status).toBe(200);
  });

  test("a code is single use", async () => {
    const email = randomEmail();
    await signup({ email });
    const code = sink.lastCode(email);
    expect((await verify({ email, code })).status).toBe(200);
    const again = await verify({ email, code });
    expect(again.status).toBe(400);
  });

  test("a code is single use under concurrency: two verifies racing with one code give one token", async () => {
    const email = randomEmail();
    await signup({ email });
    const code = sink.lastCode(email);
    const rs = await Promise.all([verify({ email, code }), verify({ email, code }), verify({ email, code })]);
    expect(rs.map((r) => r.status).sort()).toEqual([200, 400, 400]);
  });

  test("only the newest code is valid", async () => {
    const email = randomEmail();
    await signup({ email });
    const first = sink.lastCode(email);
    await signup({ email });
    const second = sink.lastCode(email);
    if (first !== second) expect((await verify({ email, code: first })).status).toBe(400);
    expect((await verify({ email, code: second })).status).toBe(200);
  });

  test("an existing email signs in: new_account false, its current deadline, no deadline added, same account", async () => {
    const first = await signupViaApi(gw, { sink });
    const [before] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, first.accountId));
    const s = await signup({ email: first.email });
    expect(s.status).toBe(200);
    expect(s.body).toEqual({ ok: true, new_account: false, account_expires_at: before!.accountExpiresAt!.toISOString() });
    const text = sink.to(first.email).at(-1)!.raw.replace(/=\r?\n/g, "");
    expect(text).toContain("An AI agent asked to sign in");
    const v = await verify({ email: first.email, code: sink.lastCode(first.email) });
    expect(v.status).toBe(200);
    expect(v.body.user.id).toBe(first.accountId);
    expect(v.body.account_token).not.toBe(first.token);
    expect(v.body.payment.account_expires_at).toBe(before!.accountExpiresAt!.toISOString());
    const [after] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, first.accountId));
    expect(after!.accountExpiresAt!.getTime()).toBe(before!.accountExpiresAt!.getTime());
    // Both tokens work.
    expect((await gw.call("/v1/organizations/me", { token: first.token })).status).toBe(200);
    expect((await gw.call("/v1/organizations/me", { token: v.body.account_token })).status).toBe(200);
  });

  test("an existing pro account: signup returns account_expires_at null, verify answers plan pro without payment", async () => {
    const acct = await signupViaApi(gw, { sink });
    await activateViaWebhook(gw, acct.accountId);
    const s = await signup({ email: acct.email });
    expect(s.body).toEqual({ ok: true, new_account: false, account_expires_at: null });
    const v = await verify({ email: acct.email, code: sink.lastCode(acct.email) });
    expect(v.status).toBe(200);
    expect(v.body.plan).toBe("pro");
    expect(v.body.payment).toBeUndefined();
  });

  test("the owner gets one email with the deadline and checkout link, on the first verify only", async () => {
    const acct = await signupViaApi(gw, { sink });
    await signupViaApi(gw, { email: acct.email, sink });
    const notices = sink.to(acct.email).filter((m) => /Subject: Activate/.test(m.raw));
    expect(notices.length).toBe(1);
    const text = notices[0]!.raw.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
    expect(text).toContain(acct.verify.payment.account_expires_at);
    expect(text).toContain(`${gw.ctx.config.siteUrl}/checkout?account=${acct.accountId}`);
  });

  test("account tokens and codes are stored as sha256 only", async () => {
    const email = randomEmail();
    await signup({ email });
    const code = sink.lastCode(email);
    const [c] = await gw.ctx.db.select().from(signupCodes).where(eq(signupCodes.email, email));
    expect(JSON.stringify(c)).not.toContain(code);
    const v = await verify({ email, code });
    const rows = await gw.ctx.db.select().from(accountTokens).where(eq(accountTokens.accountId, v.body.user.id));
    expect(rows.length).toBe(1);
    expect(rows[0]!.tokenHash).toBe(sha256Hex(v.body.account_token));
    expect(JSON.stringify(rows[0])).not.toContain(v.body.account_token);
  });

  test("unknown or missing action answers 400 {error}", async () => {
    for (const path of ["/api/auth?action=agent-login", "/api/auth", "/api/auth?action=", "/api/auth?action=agent-signup&x=1", "/api/auth?action=agent-signup&action=agent-verify"]) {
      const r = await gw.call(path, { method: "POST", body: { email: randomEmail() }, headers: { "x-forwarded-for": randomIp() } });
      expect(r.status).toBe(400);
      expect(Object.keys(r.body)).toEqual(["error"]);
    }
  });

  test("wrong method on /api/auth answers 405", async () => {
    const r = await gw.call("/api/auth?action=agent-signup", { method: "GET" });
    expect(r.status).toBe(405);
  });

  test("signup and verify logs carry the request id but never the code or the token", async () => {
    const acct = await signupViaApi(gw, { sink });
    const codes = sink.to(acct.email).map((m) => /Verification code: (\d{6})/.exec(m.raw.replace(/=\r?\n/g, ""))?.[1]).filter(Boolean) as string[];
    expect(codes.length).toBeGreaterThan(0);
    const all = gw.logs.join("");
    for (const c of codes) expect(all).not.toContain(c);
    expect(all).not.toContain(acct.token);
    expect(all).not.toContain(acct.token.slice(10));
    expect(gw.logs.some((l) => l.includes("signup code sent") && l.includes("requestId"))).toBe(true);
  });
});

describe(`signup code lifetime and per-IP limit (${storesLabel})`, () => {
  let sink: SmtpSink;
  let gw: TestGateway;
  let peer: TestGateway | null = null;
  beforeAll(async () => {
    sink = await startSmtpSink();
    gw = await startTestGateway({ SMTP_URL: sink.url, SIGNUP_CODE_TTL_SECONDS: "1", SIGNUP_IP_LIMIT_PER_HOUR: "3" });
    // A second instance over the same Postgres + Redis: the per-IP count must be shared.
    if (REAL_STORES) peer = await startTestGateway({ SMTP_URL: sink.url, SIGNUP_CODE_TTL_SECONDS: "1", SIGNUP_IP_LIMIT_PER_HOUR: "3" }, { shareWith: gw });
  }, 60_000);
  afterAll(async () => { await peer?.stop(); await gw?.stop(); await sink?.close(); }, 60_000);

  test("an expired code (past SIGNUP_CODE_TTL_SECONDS) answers 400", async () => {
    const email = randomEmail();
    expect((await signupCall(gw, "agent-signup", { email })).status).toBe(200);
    const code = sink.lastCode(email);
    await Bun.sleep(1300);
    const r = await signupCall(gw, "agent-verify", { email, code });
    expect(r.status).toBe(400);
    expect(Object.keys(r.body)).toEqual(["error"]);
  });

  test("per-IP limit SIGNUP_IP_LIMIT_PER_HOUR answers 429 {error}, counted in the KV across instances", async () => {
    const ip = randomIp();
    const second = peer ?? gw;
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, ip)).status).toBe(200);
    expect((await signupCall(second, "agent-signup", { email: randomEmail() }, ip)).status).toBe(200);
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, ip)).status).toBe(200);
    const r = await signupCall(second, "agent-signup", { email: randomEmail() }, ip);
    expect(r.status).toBe(429);
    expect(Object.keys(r.body)).toEqual(["error"]);
    // Another address is not affected.
    expect((await signupCall(second, "agent-signup", { email: randomEmail() }, randomIp())).status).toBe(200);
  });

  test("the per-IP limit counts the client IP from X-Forwarded-For under TRUST_PROXY", async () => {
    const ip = randomIp();
    for (let i = 0; i < 3; i++) await signupCall(gw, "agent-signup", { email: randomEmail() }, `${randomIp()}, ${ip}`);
    expect((await signupCall(gw, "agent-signup", { email: randomEmail() }, ip)).status).toBe(429);
  });
});

describe(`owner notice delivery failure (${storesLabel})`, () => {
  let sink: SmtpSink;
  let gw: TestGateway;
  let refuseNotices = true;
  beforeAll(async () => {
    sink = await startSmtpSink({ refuseData: (raw) => refuseNotices && /^Subject: Activate/m.test(raw) });
    gw = await startTestGateway({ SMTP_URL: sink.url, SIGNUP_IP_LIMIT_PER_HOUR: "1000" });
  }, 60_000);
  afterAll(async () => { await gw?.stop(); await sink?.close(); }, 60_000);

  test("verify still succeeds when the owner notice cannot be sent, and the next verify sends it (once)", async () => {
    const a = await signupViaApi(gw, { sink });
    expect(a.verify.plan).toBe("free");
    expect(sink.to(a.email).filter((m) => /^Subject: Activate/m.test(m.raw)).length).toBe(0);
    expect(gw.logs.some((l) => l.includes("owner notice could not be sent") && l.includes(a.accountId))).toBe(true);
    refuseNotices = false;
    await signupViaApi(gw, { email: a.email, sink });
    await signupViaApi(gw, { email: a.email, sink });
    expect(sink.to(a.email).filter((m) => /^Subject: Activate/m.test(m.raw)).length).toBe(1);
  });
});
