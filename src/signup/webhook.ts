// POST {site_url}/api/billing/webhook (CONTRACT §6): a Stripe-signed event. Verified with the
// stripe package (HMAC-SHA256 of "<t>.<raw body>", 5-minute tolerance both ways), applied once
// per event id: the billing_events row and the activation commit together, so a replay, or two
// deliveries racing, change the account once and answer the same outcome.
import type Stripe from "stripe";
import { eq } from "drizzle-orm";
import type { Base } from "../base.ts";
import { badRequest, envMissing } from "../errors.ts";
import type { Db } from "../store/db/client.ts";
import { billingEvents } from "../store/db/schema/index.ts";
import { nestsDeeperThan, MAX_JSON_DEPTH, readText } from "../http/body.ts";
import { activateAccount, type ActivationOutcome } from "./lifecycle.ts";

export const SIGNATURE_TOLERANCE_SECONDS = 300;
const MAX_WEBHOOK_BYTES = 1024 * 1024;

type Outcome = ActivationOutcome | "ignored" | "no_account_reference" | "awaiting_payment";

interface CheckoutSessionLike {
  client_reference_id?: unknown;
  metadata?: { account_id?: unknown } | null;
  payment_status?: unknown;
}

/** Event types that mean "the human paid"; the async one follows a delayed payment method. */
const ACTIVATING = new Set(["checkout.session.completed", "checkout.session.async_payment_succeeded"]);

export async function handleBillingWebhook(ctx: Base, request: Request, requestId: string) {
  const secret = ctx.config.BILLING_WEBHOOK_SECRET;
  if (!secret) throw envMissing("BILLING_WEBHOOK_SECRET");
  // The raw text is what the signature covers; its nesting is checked before stripe parses it.
  const raw = (await readText(request, Math.min(MAX_WEBHOOK_BYTES, ctx.config.MAX_REQUEST_BYTES))).text;
  if (nestsDeeperThan(raw, MAX_JSON_DEPTH)) throw badRequest(`The webhook body nests JSON deeper than ${MAX_JSON_DEPTH} levels; nothing was changed.`);
  const header = request.headers.get("stripe-signature");
  if (!header) throw badRequest("The Stripe-Signature header is missing; nothing was changed.");
  // Stripe's own check only refuses old timestamps; a timestamp far in the future is refused too.
  const t = Number(/(?:^|,)\s*t=(\d+)/.exec(header)?.[1] ?? NaN);
  if (Number.isFinite(t) && t - Math.floor(Date.now() / 1000) > SIGNATURE_TOLERANCE_SECONDS) {
    throw badRequest("The Stripe-Signature timestamp is outside the 5-minute tolerance; nothing was changed.");
  }
  let event: Stripe.Event;
  try {
    // The stripe package is imported on the first webhook, not at boot (~8 MB of RSS; idle memory has a budget, README).
    const { default: StripeSdk } = await import("stripe");
    event = await StripeSdk.webhooks.constructEventAsync(raw, header, secret, SIGNATURE_TOLERANCE_SECONDS);
  } catch (e) {
    if (e instanceof SyntaxError) throw badRequest("The webhook body is not a JSON event; nothing was changed.");
    const timestamp = e instanceof Error && /tolerance/i.test(e.message);
    ctx.log.warn({ requestId, reason: timestamp ? "timestamp" : "signature" }, "billing webhook refused");
    throw badRequest(timestamp
      ? "The Stripe-Signature timestamp is outside the 5-minute tolerance; nothing was changed."
      : "The Stripe-Signature header does not match the body under the configured webhook secret; nothing was changed.");
  }
  if (!event || typeof event !== "object" || typeof event.id !== "string" || !/^[A-Za-z0-9_.:-]{1,255}$/.test(event.id) || typeof event.type !== "string") {
    throw badRequest("The event has no `id` or `type`; nothing was changed.");
  }
  const obj = ((event as { data?: { object?: unknown } }).data?.object ?? {}) as CheckoutSessionLike;
  const given = typeof obj.client_reference_id === "string" && obj.client_reference_id
    ? obj.client_reference_id
    : typeof obj.metadata?.account_id === "string" ? obj.metadata.account_id : null;
  // Text the database can store; a reference that cannot be an account id matches no account.
  const ref = given === null ? null : given.replace(/\u0000/g, "").slice(0, 255);
  const type = event.type.replace(/\u0000/g, "").slice(0, 200);

  const result = await ctx.db.transaction(async (tx) => {
    const db = tx as unknown as Db;
    const claimed = await db.insert(billingEvents)
      .values({ id: event.id, type, accountId: ref, outcome: "processing" })
      .onConflictDoNothing()
      .returning({ id: billingEvents.id });
    if (!claimed.length) {
      const [prev] = await db.select().from(billingEvents).where(eq(billingEvents.id, event.id)).limit(1);
      return { outcome: (prev?.outcome ?? "processing") as Outcome, duplicate: true };
    }
    let outcome: Outcome;
    if (!ACTIVATING.has(type)) outcome = "ignored";
    else if (!ref) outcome = "no_account_reference";
    else if (type === "checkout.session.completed" && obj.payment_status === "unpaid") outcome = "awaiting_payment";
    else outcome = await activateAccount(db, ref);
    await db.update(billingEvents).set({ outcome }).where(eq(billingEvents.id, event.id));
    return { outcome, duplicate: false };
  });
  const level = result.outcome === "account_removed" || result.outcome === "unknown_account" ? "warn" : "info";
  ctx.log[level]({ requestId, eventId: event.id, type, accountId: ref, outcome: result.outcome, duplicate: result.duplicate },
    result.outcome === "account_removed" ? "payment for a removed account: not revived, refund it" : "billing event applied");
  return { received: true, outcome: result.outcome, duplicate: result.duplicate };
}
