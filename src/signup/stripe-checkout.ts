// A real Stripe Checkout Session per new account when STRIPE_SECRET_KEY is set. The account id
// travels as client_reference_id and comes back in the checkout.session.completed webhook.
// Any failure leaves the account on the local checkout page ({site_url}/checkout?account=…).
import { createRequire } from "node:module";
import type Stripe from "stripe";
import type { Config } from "../config.ts";
import type { Base } from "../base.ts";
import type { Services } from "../context.ts";
import type { Account } from "../management/guard.ts";
import { localCheckoutUrl, STRIPE_SESSION_FRESH_MS } from "../management/payment.ts";
import { setStripeCheckoutUrl } from "./lifecycle.ts";

// Stripe lets a Checkout Session live between 30 minutes and 24 hours.
const MAX_SESSION_SECONDS = 24 * 3600 - 60;
const MIN_SESSION_SECONDS = 31 * 60;

/** The Stripe client when STRIPE_SECRET_KEY is set (built at boot as `ctx.services.stripe`; no I/O until used). */
export function createStripeClient(config: Config): Stripe | null {
  const key = config.STRIPE_SECRET_KEY;
  if (!key) return null;
  const opts: Record<string, unknown> = { maxNetworkRetries: 1, timeout: 10_000, telemetry: false };
  if (config.STRIPE_API_BASE_URL) {
    const u = new URL(config.STRIPE_API_BASE_URL);
    opts.protocol = u.protocol.replace(":", "");
    opts.host = u.hostname;
    opts.port = u.port || (u.protocol === "https:" ? "443" : "80");
  }
  // Required only when a key is set: without Stripe the package (~8 MB of RSS) never loads.
  const StripeSdk = createRequire(import.meta.url)("stripe") as typeof Stripe;
  return new StripeSdk(key, opts as ConstructorParameters<typeof Stripe>[1]);
}

/** What a checkout session needs: the stores and settings, and the Stripe client built at boot. */
export type CheckoutDeps = Base & { services: Pick<Services, "stripe"> };

const freshKey = (accountId: string) => `gw:stripe-checkout:${accountId}`;

/**
 * A Checkout Session URL that still works for a while: the one made at verify while it is fresh
 * (its age is the account's), the last one this page made (remembered in the KV for its fresh
 * window), or a new one.
 * Null when Stripe is not configured or refuses.
 */
export async function freshStripeCheckout(ctx: CheckoutDeps, account: Account, requestId?: string): Promise<string | null> {
  if (!ctx.config.STRIPE_SECRET_KEY) return null;
  if (account.stripeCheckoutUrl && Date.now() - account.createdAt.getTime() < STRIPE_SESSION_FRESH_MS) return account.stripeCheckoutUrl;
  const remembered = await ctx.kv.get(freshKey(account.id)).catch(() => null);
  if (remembered) return remembered;
  const url = await createStripeCheckout(ctx, account, requestId);
  if (url) await ctx.kv.set(freshKey(account.id), url, Math.floor(STRIPE_SESSION_FRESH_MS / 1000)).catch(() => {});
  return url;
}

/** Creates the session and stores its URL on the account; returns the URL, or null (logged) on failure. */
export async function createStripeCheckout(ctx: CheckoutDeps, account: Account, requestId?: string): Promise<string | null> {
  const stripe = ctx.services.stripe;
  if (!stripe) return null;
  const local = localCheckoutUrl(ctx, account.id);
  const lineItem = ctx.config.STRIPE_PRICE_ID
    ? { price: ctx.config.STRIPE_PRICE_ID, quantity: 1 }
    : {
        quantity: 1,
        price_data: {
          currency: "usd",
          unit_amount: Math.round(ctx.config.MEMBERSHIP_PRICE_USD * 100),
          recurring: { interval: "month" as const },
          product_data: { name: "Model Gateway membership" },
        },
      };
  const now = Math.floor(Date.now() / 1000);
  const untilDeadline = account.accountExpiresAt ? Math.floor(account.accountExpiresAt.getTime() / 1000) - now : MAX_SESSION_SECONDS;
  const lifetime = Math.max(MIN_SESSION_SECONDS, Math.min(MAX_SESSION_SECONDS, untilDeadline));
  try {
    const session = await stripe.checkout.sessions.create({
      mode: "subscription",
      line_items: [lineItem],
      client_reference_id: account.id,
      customer_email: account.email,
      metadata: { account_id: account.id },
      subscription_data: { metadata: { account_id: account.id } },
      success_url: local,
      cancel_url: local,
      expires_at: now + lifetime,
    });
    if (!session.url) throw new Error("the session has no url");
    await setStripeCheckoutUrl(ctx.db, account.id, session.url);
    ctx.log.info({ requestId, accountId: account.id, session: session.id }, "stripe checkout session created");
    return session.url;
  } catch (e) {
    const err = e as { type?: string; statusCode?: number; message?: string };
    ctx.log.warn({ requestId, accountId: account.id, stripeError: err.type ?? null, status: err.statusCode ?? null, reason: scrub(err.message ?? String(e), ctx.config.STRIPE_SECRET_KEY) }, "stripe checkout session could not be created; the local checkout page is used instead");
    return null;
  }
}

function scrub(text: string, secret: string | undefined): string {
  return secret ? text.split(secret).join("[redacted]") : text;
}
