// The payment block and relay-ready sentence shown while an account is unpaid (plan `free`).
import type { Base } from "../base.ts";
import type { accounts } from "../store/db/schema/index.ts";
import { iso } from "../lib/time.ts";

type Account = typeof accounts.$inferSelect;

/**
 * A Stripe Checkout Session lives 24 hours at most, the unpaid account 48. The session made at
 * the first verify (= account creation) is handed out for 23 hours; after that the local checkout
 * page, which creates a fresh session when a human opens it.
 */
export const STRIPE_SESSION_FRESH_MS = 23 * 3600_000;

export function localCheckoutUrl(ctx: Base, accountId: string): string {
  return `${ctx.config.siteUrl}/checkout?account=${encodeURIComponent(accountId)}`;
}

export function checkoutUrl(ctx: Base, account: Account, now = Date.now()): string {
  if (account.stripeCheckoutUrl && now - account.createdAt.getTime() < STRIPE_SESSION_FRESH_MS) return account.stripeCheckoutUrl;
  return localCheckoutUrl(ctx, account.id);
}

export function relayMessage(ctx: Base, account: Account): string {
  const url = checkoutUrl(ctx, account);
  const price = ctx.config.MEMBERSHIP_PRICE_USD;
  const deadline = account.accountExpiresAt
    ? ` If it is not activated by ${account.accountExpiresAt.toISOString()}, the account and everything in it will be removed.`
    : "";
  return `An AI agent created a Model Gateway account for ${account.email}. A human needs to activate the membership ($${price}/month) at ${url} before routing keys can be managed.${deadline}`;
}

export function paymentBlock(ctx: Base, account: Account) {
  return {
    checkout_url: checkoutUrl(ctx, account),
    price_usd: ctx.config.MEMBERSHIP_PRICE_USD,
    account_expires_at: iso(account.accountExpiresAt),
    poll: "Poll GET /v1/organizations/me with the account token until plan is \"pro\"; then the full management API is available.",
    message: relayMessage(ctx, account),
  };
}
