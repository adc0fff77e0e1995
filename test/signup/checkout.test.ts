// The checkout page for the human ({site_url}/checkout?account=<id>) and real Stripe Checkout
// Sessions, created against a loopback server that speaks the Stripe API.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { activateViaWebhook, outboxMails, signupViaApi } from "../helpers/signup.ts";
import { accounts } from "../../src/store/db/schema/index.ts";
import { newId } from "../../src/lib/ids.ts";
import { randomToken } from "../../src/lib/crypto.ts";

async function page(gw: TestGateway, query: string) {
  const r = await gw.req(`/checkout${query}`);
  return { status: r.status, html: await r.text(), headers: r.headers };
}

describe(`checkout page (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({ BILLING_WEBHOOK_SECRET: "whsec_checkout_tests", MEMBERSHIP_PRICE_USD: "25", SIGNUP_IP_LIMIT_PER_HOUR: "1000" }); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("a free account's page states the price, the deadline and what happens next, as HTML", async () => {
    const a = await signupViaApi(gw);
    const p = await page(gw, `?account=${a.accountId}`);
    expect(p.status).toBe(200);
    expect(p.headers.get("content-type")).toBe("text/html; charset=utf-8");
    expect(p.headers.get("content-security-policy")).toContain("default-src 'none'");
    expect(p.html).toContain("$25 per month");
    expect(p.html).toContain(new Date(a.signup.account_expires_at).toUTCString());
    expect(p.html).toContain("What happens next");
    expect(p.html).toContain(`npm run admin -- activate ${a.accountId}`);
    // The email is masked: the link alone does not reveal the address.
    expect(p.html).not.toContain(a.email);
    expect(p.html).toContain(`${a.email[0]}•••@example.com`);
  });

  test("the page follows the account: active once pro, gone once removed, 404 unknown, 400 without an account", async () => {
    const a = await signupViaApi(gw);
    await activateViaWebhook(gw, a.accountId);
    const pro = await page(gw, `?account=${a.accountId}`);
    expect(pro.status).toBe(200);
    expect(pro.html).toContain("Membership active");
    const b = await signupViaApi(gw);
    await gw.ctx.db.update(accounts).set({ removedAt: new Date() }).where(eq(accounts.id, b.accountId));
    expect((await page(gw, `?account=${b.accountId}`)).status).toBe(410);
    // Past its deadline but not yet swept: already gone for the human too.
    const c = await signupViaApi(gw);
    await gw.ctx.db.update(accounts).set({ accountExpiresAt: new Date(Date.now() - 1000) }).where(eq(accounts.id, c.accountId));
    expect((await page(gw, `?account=${c.accountId}`)).status).toBe(410);
    expect((await page(gw, `?account=acct_${randomToken(20)}`)).status).toBe(404);
    expect((await page(gw, "")).status).toBe(400);
    expect((await page(gw, "?account=")).status).toBe(400);
    expect((await page(gw, `?account=a&account=b`)).status).toBe(400);
  });

  test("the page escapes everything it shows", async () => {
    const hostile = `<script>alert(1)</script>"'\`=&`;
    const p = await page(gw, `?account=${encodeURIComponent(hostile)}`);
    expect(p.status).toBe(404);
    expect(p.html).not.toContain("<script>");
    expect(p.html).toContain("&lt;script&gt;alert(1)&lt;/script&gt;&quot;&#39;&#96;&#61;&amp;");
    // An account row whose stored email carries markup (inserted directly: the API refuses such emails).
    const id = newId("acct");
    await gw.ctx.db.insert(accounts).values({ id, email: `<img src=x onerror=alert(1)>@example.com`, plan: "free", accountExpiresAt: new Date(Date.now() + 3600_000) });
    const q = await page(gw, `?account=${id}`);
    expect(q.status).toBe(200);
    expect(q.html).not.toContain("<img");
    expect(q.html).toContain("&lt;•••@example.com");
  });

  test("wrong method on /checkout answers 405", async () => {
    expect((await gw.call("/checkout?account=x", { method: "POST", body: {} })).status).toBe(405);
  });
});

/** A loopback server speaking the part of the Stripe API the gateway uses. */
function startStripeApi(opts: { fail?: boolean } = {}) {
  const requests: Array<{ path: string; auth: string | null; form: URLSearchParams }> = [];
  const server = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    async fetch(req) {
      const url = new URL(req.url);
      const form = new URLSearchParams(await req.text());
      requests.push({ path: url.pathname, auth: req.headers.get("authorization"), form });
      if (req.method !== "POST" || url.pathname !== "/v1/checkout/sessions") {
        return Response.json({ error: { type: "invalid_request_error", message: `Unrecognized request URL (${req.method}: ${url.pathname}).` } }, { status: 404 });
      }
      if (opts.fail) {
        return Response.json({ error: { type: "invalid_request_error", code: "resource_missing", message: "No such price: 'price_missing'", param: "line_items[0][price]" } }, { status: 400 });
      }
      const id = `cs_test_${randomToken(24)}`;
      return Response.json({
        id, object: "checkout.session", mode: form.get("mode"), status: "open", payment_status: "unpaid",
        client_reference_id: form.get("client_reference_id"), customer_email: form.get("customer_email"),
        expires_at: Number(form.get("expires_at")), url: `https://checkout.stripe.com/c/pay/${id}`,
      });
    },
  });
  return { url: `http://127.0.0.1:${server.port}`, requests, stop: () => server.stop(true) };
}

describe(`Stripe Checkout Sessions (${storesLabel})`, () => {
  const stripe = startStripeApi();
  const broken = startStripeApi({ fail: true });
  let gw: TestGateway;
  let gwNoPrice: TestGateway;
  let gwBroken: TestGateway;
  const KEY = `sk_test_${randomToken(24)}`;
  beforeAll(async () => {
    [gw, gwNoPrice, gwBroken] = await Promise.all([
      startTestGateway({ STRIPE_SECRET_KEY: KEY, STRIPE_PRICE_ID: "price_membership", STRIPE_API_BASE_URL: stripe.url, SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
      startTestGateway({ STRIPE_SECRET_KEY: KEY, STRIPE_API_BASE_URL: stripe.url, MEMBERSHIP_PRICE_USD: "20", SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
      startTestGateway({ STRIPE_SECRET_KEY: KEY, STRIPE_PRICE_ID: "price_missing", STRIPE_API_BASE_URL: broken.url, SIGNUP_IP_LIMIT_PER_HOUR: "1000" }),
    ]);
  }, 60_000);
  afterAll(async () => { await gw?.stop(); await gwNoPrice?.stop(); await gwBroken?.stop(); stripe.stop(); broken.stop(); }, 60_000);

  test("with STRIPE_SECRET_KEY the first verify creates a Checkout Session (client_reference_id = account id) and checkout_url is its URL", async () => {
    const before = stripe.requests.length;
    const a = await signupViaApi(gw);
    const sent = stripe.requests.slice(before);
    expect(sent.length).toBe(1);
    const form = sent[0]!.form;
    expect(sent[0]!.auth).toBe(`Bearer ${KEY}`);
    expect(form.get("mode")).toBe("subscription");
    expect(form.get("client_reference_id")).toBe(a.accountId);
    expect(form.get("customer_email")).toBe(a.email);
    expect(form.get("line_items[0][price]")).toBe("price_membership");
    expect(form.get("line_items[0][quantity]")).toBe("1");
    expect(form.get("success_url")).toBe(`${gw.ctx.config.siteUrl}/checkout?account=${a.accountId}`);
    const expiresAt = Number(form.get("expires_at"));
    expect(expiresAt - Date.now() / 1000).toBeLessThanOrEqual(24 * 3600);
    expect(a.verify.payment.checkout_url).toMatch(/^https:\/\/checkout\.stripe\.com\/c\/pay\/cs_test_/);
    const [row] = await gw.ctx.db.select().from(accounts).where(eq(accounts.id, a.accountId));
    expect(row!.stripeCheckoutUrl).toBe(a.verify.payment.checkout_url);
    // /me, the owner email and the checkout page all point at the session.
    expect((await gw.call("/v1/organizations/me", { token: a.token })).body.payment.checkout_url).toBe(a.verify.payment.checkout_url);
    const notice = outboxMails(gw, a.email).find((m) => m.includes("Subject: Activate"))!.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
    expect(notice).toContain(a.verify.payment.checkout_url);
    const p = await page(gw, `?account=${a.accountId}`);
    expect(p.html).toContain(`href="${a.verify.payment.checkout_url}"`);
  });

  test("a later sign-in with the same email creates no second session", async () => {
    const a = await signupViaApi(gw);
    const before = stripe.requests.length;
    const again = await signupViaApi(gw, { email: a.email });
    expect(stripe.requests.length).toBe(before);
    expect(again.verify.payment.checkout_url).toBe(a.verify.payment.checkout_url);
  });

  test("without STRIPE_PRICE_ID the session carries a monthly price of MEMBERSHIP_PRICE_USD", async () => {
    const before = stripe.requests.length;
    await signupViaApi(gwNoPrice);
    const form = stripe.requests[before]!.form;
    expect(form.get("line_items[0][price_data][currency]")).toBe("usd");
    expect(form.get("line_items[0][price_data][unit_amount]")).toBe("2000");
    expect(form.get("line_items[0][price_data][recurring][interval]")).toBe("month");
  });

  test("when Stripe refuses, verify still succeeds with the local checkout page, and the failure is logged without the key", async () => {
    const a = await signupViaApi(gwBroken);
    expect(a.verify.payment.checkout_url).toBe(`${gwBroken.ctx.config.siteUrl}/checkout?account=${a.accountId}`);
    const [row] = await gwBroken.ctx.db.select().from(accounts).where(eq(accounts.id, a.accountId));
    expect(row!.stripeCheckoutUrl).toBeNull();
    const logs = gwBroken.logs.join("");
    expect(logs).toContain("stripe checkout session could not be created");
    expect(logs).not.toContain(KEY);
    // The checkout page tries again when a human opens it, and says so plainly when Stripe still refuses.
    const before = broken.requests.length;
    const p = await page(gwBroken, `?account=${a.accountId}`);
    expect(broken.requests.length).toBe(before + 1);
    expect(p.html).toContain("Online payment is unavailable right now");
  });

  test("after 23 hours the verify-time session is no longer handed out: /me points at the local page, which makes a fresh session once", async () => {
    const a = await signupViaApi(gw);
    await gw.ctx.db.update(accounts).set({ createdAt: new Date(Date.now() - 24 * 3600_000) }).where(eq(accounts.id, a.accountId));
    const me = await gw.call("/v1/organizations/me", { token: a.token });
    const local = `${gw.ctx.config.siteUrl}/checkout?account=${a.accountId}`;
    expect(me.body.payment.checkout_url).toBe(local);
    expect(me.body.message).toContain(local);
    const before = stripe.requests.length;
    const first = await page(gw, `?account=${a.accountId}`);
    expect(stripe.requests.length).toBe(before + 1);
    const fresh = /href="(https:\/\/checkout\.stripe\.com\/c\/pay\/[^"]+)"/.exec(first.html)![1]!;
    expect(fresh).not.toBe(a.verify.payment.checkout_url);
    const second = await page(gw, `?account=${a.accountId}`);
    expect(stripe.requests.length).toBe(before + 1);
    expect(second.html).toContain(`href="${fresh}"`);
  });

  test("the owner email offers the local page as the fallback once the 24-hour payment link has expired", async () => {
    const a = await signupViaApi(gw);
    const notice = outboxMails(gw, a.email).find((m) => m.includes("Subject: Activate"))!.replace(/=\r?\n/g, "").replace(/=3D/g, "=");
    expect(notice).toContain(`this page gives a fresh one: ${gw.ctx.config.siteUrl}/checkout?account=${a.accountId}`);
  });

  test("a stored checkout URL is escaped in the page, and one that is not http(s) is never linked", async () => {
    const id = newId("acct");
    await gw.ctx.db.insert(accounts).values({ id, email: `${id.toLowerCase()}@example.com`, plan: "free", accountExpiresAt: new Date(Date.now() + 3600_000), stripeCheckoutUrl: `https://checkout.example.com/pay?a="><script>alert(2)</script>` });
    const q = await page(gw, `?account=${id}`);
    expect(q.html).not.toContain("<script>");
    expect(q.html).toContain("href=\"https://checkout.example.com/pay?a&#61;&quot;&gt;&lt;script&gt;");
    const id2 = newId("acct");
    await gw.ctx.db.insert(accounts).values({ id: id2, email: `${id2.toLowerCase()}@example.com`, plan: "free", accountExpiresAt: new Date(Date.now() + 3600_000), stripeCheckoutUrl: "javascript:alert(1)" });
    const p = await page(gw, `?account=${id2}`);
    expect(p.html).not.toContain("javascript:");
  });
});
