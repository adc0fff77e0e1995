// The payment block and relay-ready sentence shown while an account is unpaid (plan `free`).
import type { Ctx } from "../context.ts";
import type { accounts } from "../store/db/schema/index.ts";
import { iso } from "../lib/time.ts";

type Account = typeof accounts.$inferSelect;

export function checkoutUrl(ctx: Ctx, account: Account): string {
  return account.stripeCheckoutUrl ?? `${ctx.config.siteUrl}/checkout?account=${encodeURIComponent(account.id)}`;
}

export function relayMessage(ctx: Ctx, account: Account): string {
  const url = checkoutUrl(ctx, account);
  const price = ctx.config.MEMBERSHIP_PRICE_USD;
  const deadline = account.accountExpiresAt
    ? ` If it is not activated by ${account.accountExpiresAt.toISOString()}, the account and everything in it will be removed.`
    : "";
  return `An AI agent created a Model Gateway account for ${account.email}. A human needs to activate the membership ($${price}/month) at ${url} before routing keys can be managed.${deadline}`;
}

export function paymentBlock(ctx: Ctx, account: Account) {
  return {
    checkout_url: checkoutUrl(ctx, account),
    price_usd: ctx.config.MEMBERSHIP_PRICE_USD,
    account_expires_at: iso(account.accountExpiresAt),
    poll: "Poll GET /v1/organizations/me with the account token until plan is \"pro\"; then the full management API is available.",
    message: relayMessage(ctx, account),
  };
}
