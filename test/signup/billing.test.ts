// Activation through the billing webhook (CONTRACT §6): Stripe-style signatures made with the
// stripe package, 5-minute tolerance, idempotency on the event id, no revival of a removed
// account, and one outcome when activation races removal.
import { afterAll, beforeAll, describe, expect, test } from "bun:test";
import { eq } from "drizzle-orm";
import { startTestGateway, storesLabel, type TestGateway } from "../helpers/gateway.ts";
import { activateViaWebhook, checkoutCompletedEvent, postWebhook, signedEvent, signupViaApi } from "../helpers/signup.ts";
import { accounts, billingEvents } from "../../src/store/db/schema/index.ts";
import { sweepExpiredAccounts } from "../../src/jobs/account-expiry.ts";
import { randomToken } from "../../src/lib/crypto.ts";

const SECRET = "whsec_billing_tests_secret";

describe(`billing webhook (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({ BILLING_WEBHOOK_SECRET: SECRET, SIGNUP_IP_LIMIT_PER_HOUR: "1000" }); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  const account = async (id: string) => (await gw.ctx.db.select().from(accounts).where(eq(accounts.id, id)))[0]!;
  const send = async (event: Record<string, unknown>, opts: { secret?: string; timestamp?: number } = {}) => {
    const { payload, header } = await signedEvent(opts.secret ?? SECRET, event, opts.timestamp);
    return postWebhook(gw, payload, header);
  };
  /** Puts the account's deadline in the past, as if 48 hours had gone by. */
  const pastDeadline = (id: string) => gw.ctx.db.update(accounts).set({ accountExpiresAt: new Date(Date.now() - 1000) }).where(eq(accounts.id, id));

  test("checkout.session.completed with client_reference_id moves the account to pro and clears the deadline", async () => {
    const a = await signupViaApi(gw);
    const r = await send(checkoutCompletedEvent(a.accountId));
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ received: true, outcome: "activated", duplicate: false });
    const row = await account(a.accountId);
    expect(row.plan).toBe("pro");
    expect(row.accountExpiresAt).toBeNull();
    expect(row.activatedAt).not.toBeNull();
    const me = await gw.call("/v1/organizations/me", { token: a.token });
    expect(me.body.plan).toBe("pro");
    expect(me.body.payment).toBeUndefined();
    expect((await gw.call("/v1/organizations/tokens", { token: a.token })).status).toBe(200);
  });

  test("a bad signature answers 400 and nothing changes", async () => {
    const a = await signupViaApi(gw);
    const { payload, header } = await signedEvent(SECRET, checkoutCompletedEvent(a.accountId));
    const tampered = payload.replace('"paid"', '"paid" ');
    const cases: Array<[string, string | null]> = [
      [payload, null],
      [payload, ""],
      [payload, "t=123"],
      [payload, header.replace(/v1=[0-9a-f]{6}/, "v1=000000")],
      [tampered, header],
      [payload, (await signedEvent("whsec_someone_else", checkoutCompletedEvent(a.accountId))).header],
    ];
    for (const [body, h] of cases) {
      const r = await postWebhook(gw, body, h);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
    }
    expect((await account(a.accountId)).plan).toBe("free");
    expect(await gw.ctx.db.select().from(billingEvents).where(eq(billingEvents.accountId, a.accountId))).toEqual([]);
  });

  test("5-minute tolerance: a signature 4 minutes old is accepted, 6 minutes old or 6 minutes ahead is refused", async () => {
    const now = Math.floor(Date.now() / 1000);
    const a = await signupViaApi(gw);
    expect((await send(checkoutCompletedEvent(a.accountId), { timestamp: now - 360 })).status).toBe(400);
    expect((await send(checkoutCompletedEvent(a.accountId), { timestamp: now + 360 })).status).toBe(400);
    expect((await account(a.accountId)).plan).toBe("free");
    const ok = await send(checkoutCompletedEvent(a.accountId), { timestamp: now - 240 });
    expect(ok.status).toBe(200);
    expect((await account(a.accountId)).plan).toBe("pro");
  });

  test("replays are idempotent on the event id: same answer, one billing_events row", async () => {
    const a = await signupViaApi(gw);
    const event = checkoutCompletedEvent(a.accountId);
    const first = await send(event);
    const again = await send(event);
    const concurrent = await Promise.all([send(event), send(event)]);
    expect(first.body).toEqual({ received: true, outcome: "activated", duplicate: false });
    for (const r of [again, ...concurrent]) expect(r.body).toEqual({ received: true, outcome: "activated", duplicate: true });
    const rows = await gw.ctx.db.select().from(billingEvents).where(eq(billingEvents.id, event.id));
    expect(rows.length).toBe(1);
    expect(rows[0]!.outcome).toBe("activated");
  });

  test("the same event delivered twice at once applies once", async () => {
    const a = await signupViaApi(gw);
    const event = checkoutCompletedEvent(a.accountId);
    const rs = await Promise.all([send(event), send(event), send(event)]);
    expect(rs.map((r) => r.status)).toEqual([200, 200, 200]);
    expect(rs.filter((r) => r.body.duplicate === false).length).toBe(1);
    expect(rs.every((r) => r.body.outcome === "activated")).toBe(true);
  });

  test("a deleted account is not revived by a later payment", async () => {
    const a = await signupViaApi(gw);
    await pastDeadline(a.accountId);
    expect(await sweepExpiredAccounts(gw.ctx)).toContain(a.accountId);
    const r = await send(checkoutCompletedEvent(a.accountId));
    expect(r.status).toBe(200);
    expect(r.body.outcome).toBe("account_removed");
    const row = await account(a.accountId);
    expect(row.removedAt).not.toBeNull();
    expect(row.plan).toBe("free");
    expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(410);
  });

  test("activation racing removal has exactly one outcome per account", async () => {
    const accts = await Promise.all(Array.from({ length: 6 }, () => signupViaApi(gw)));
    for (const a of accts) await pastDeadline(a.accountId);
    const events = accts.map((a) => checkoutCompletedEvent(a.accountId));
    const [sweep, ...hooks] = await Promise.all([
      sweepExpiredAccounts(gw.ctx),
      ...events.map((e) => send(e)),
    ]);
    for (let i = 0; i < accts.length; i++) {
      const a = accts[i]!;
      const row = await account(a.accountId);
      const hook = hooks[i]!;
      expect(hook.status).toBe(200);
      const [ev] = await gw.ctx.db.select().from(billingEvents).where(eq(billingEvents.id, events[i]!.id));
      if (hook.body.outcome === "activated") {
        // Activation won: pro, never removed, the sweep did not count it.
        expect(row.plan).toBe("pro");
        expect(row.removedAt).toBeNull();
        expect(sweep).not.toContain(a.accountId);
        expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(200);
      } else {
        // Removal won: removed, still free, the payment recorded as for a removed account.
        expect(hook.body.outcome).toBe("account_removed");
        expect(row.removedAt).not.toBeNull();
        expect(row.plan).toBe("free");
        expect(sweep).toContain(a.accountId);
        expect((await gw.call("/v1/organizations/me", { token: a.token })).status).toBe(410);
      }
      expect(ev!.outcome).toBe(hook.body.outcome);
    }
    // Whatever lost stays lost: a second sweep and a replay change nothing.
    expect(await sweepExpiredAccounts(gw.ctx)).toEqual([]);
    for (let i = 0; i < accts.length; i++) expect((await send(events[i]!)).body.outcome).toBe(hooks[i]!.body.outcome);
  });

  test("activation that lands first wins over a later sweep; a sweep that lands first wins over a later activation", async () => {
    const a = await signupViaApi(gw);
    const b = await signupViaApi(gw);
    await pastDeadline(a.accountId);
    await pastDeadline(b.accountId);
    expect((await send(checkoutCompletedEvent(a.accountId))).body.outcome).toBe("activated");
    const removed = await sweepExpiredAccounts(gw.ctx);
    expect(removed).not.toContain(a.accountId);
    expect(removed).toContain(b.accountId);
    expect((await send(checkoutCompletedEvent(b.accountId))).body.outcome).toBe("account_removed");
  });

  test("an account that is already pro stays pro (outcome already_active)", async () => {
    const a = await signupViaApi(gw);
    await activateViaWebhook(gw, a.accountId);
    const r = await send(checkoutCompletedEvent(a.accountId));
    expect(r.body.outcome).toBe("already_active");
  });

  test("unknown accounts, other event types, and sessions not yet paid change nothing", async () => {
    const a = await signupViaApi(gw);
    const unknown = await send(checkoutCompletedEvent(`acct_${randomToken(20)}`));
    expect(unknown.body.outcome).toBe("unknown_account");
    const other = await send({ ...checkoutCompletedEvent(a.accountId), type: "invoice.paid" });
    expect(other.body.outcome).toBe("ignored");
    const noRef = checkoutCompletedEvent(a.accountId);
    delete (noRef.data.object as Record<string, unknown>).client_reference_id;
    expect((await send(noRef)).body.outcome).toBe("no_account_reference");
    const unpaid = checkoutCompletedEvent(a.accountId);
    unpaid.data.object.payment_status = "unpaid";
    expect((await send(unpaid)).body.outcome).toBe("awaiting_payment");
    expect((await account(a.accountId)).plan).toBe("free");
    // The delayed payment succeeding activates.
    const later = await send({ ...checkoutCompletedEvent(a.accountId), type: "checkout.session.async_payment_succeeded" });
    expect(later.body.outcome).toBe("activated");
    expect((await account(a.accountId)).plan).toBe("pro");
  });

  test("a correctly signed body that is not an event answers 400", async () => {
    const { default: Stripe } = await import("stripe");
    for (const payload of ["not json", "[]", "{}", "null", JSON.stringify({ id: 5, type: "x" }), JSON.stringify({ id: "evt_1" })]) {
      const header = await Stripe.webhooks.generateTestHeaderStringAsync({ payload, secret: SECRET });
      const r = await postWebhook(gw, payload, header);
      expect(r.status).toBe(400);
      expect(r.body.code).toBe("bad_request");
    }
  });

  test("webhook logs carry no signature and no secret", async () => {
    const a = await signupViaApi(gw);
    const { payload, header } = await signedEvent(SECRET, checkoutCompletedEvent(a.accountId));
    await postWebhook(gw, payload, header);
    const all = gw.logs.join("");
    expect(all).not.toContain(SECRET);
    expect(all).not.toContain(/v1=([0-9a-f]+)/.exec(header)![1]!);
  });
});

describe(`billing webhook without BILLING_WEBHOOK_SECRET (${storesLabel})`, () => {
  let gw: TestGateway;
  beforeAll(async () => { gw = await startTestGateway({}); }, 60_000);
  afterAll(async () => { await gw?.stop(); }, 60_000);

  test("answers 500 env_missing and changes nothing", async () => {
    const { payload, header } = await signedEvent("whsec_any", checkoutCompletedEvent("acct_x"));
    const r = await postWebhook(gw, payload, header);
    expect(r.status).toBe(500);
    expect(r.body.code).toBe("env_missing");
    expect(r.body.error).toContain("BILLING_WEBHOOK_SECRET");
  });
});
