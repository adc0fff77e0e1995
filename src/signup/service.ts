// Agent signup and verify (SPEC "Agent signup"). Decisions:
// - agent-signup only sends a code; the account row is created by the first successful
//   agent-verify. Its deadline is the signup time (the verified code's creation time) plus
//   UNPAID_ACCOUNT_TTL_SECONDS, i.e. exactly the `account_expires_at` that signup returned.
// - An email with a live account signs in: new_account false, that account's current deadline
//   (null once pro), nothing added. An account past its deadline counts as gone.
// - The owner notice (deadline + checkout link) is sent once, on the verify that created the
//   account; if that mail fails, the next verify retries it.
import type { Base } from "../base.ts";
import type { Services } from "../context.ts";
import { iso } from "../lib/time.ts";
import { isExpired, type Account } from "../management/guard.ts";
import { checkoutUrl, localCheckoutUrl, paymentBlock } from "../management/payment.ts";
import { issueAccountToken } from "../management/tokens/service.ts";
import { ownerNoticeMail, signupCodeMail } from "../mail/templates.ts";
import { consumeCode, createCode, discardCode } from "./codes.ts";
import { claimOwnerNotice, createFreeAccount, findLiveAccountByEmail, releaseOwnerNotice, removeExpiredAccount } from "./lifecycle.ts";
import { signupError } from "./model.ts";
import { countCodeForEmail, refundCodeForEmail } from "./rate-limit.ts";
import { createStripeCheckout, type CheckoutDeps } from "./stripe-checkout.ts";
import { publishInvalidation, type Publishing } from "../store/invalidation.ts";

export const SIGNUP_TOKEN_LABEL = "agent-signup";

/** Mails go out through the instance's mailer. */
type Mailing = Base & { services: Pick<Services, "mailer"> };

/** What signup and verify use: the stores and settings, the mailer, the Stripe client, and the key cache a removal invalidates. */
export type SignupDeps = Mailing & CheckoutDeps & Publishing;

/** The live, unexpired account of an email; an account past its deadline is removed on the spot. */
async function currentAccount(ctx: Base & Publishing, email: string, now: Date): Promise<Account | null> {
  const acct = await findLiveAccountByEmail(ctx.db, email);
  if (!acct) return null;
  if (!isExpired(acct, now.getTime())) return acct;
  if (await removeExpiredAccount(ctx.db, acct.id, now)) await publishInvalidation(ctx, { kind: "account", accountId: acct.id });
  return findLiveAccountByEmail(ctx.db, email); // null, unless it was activated in between
}

export async function agentSignup(ctx: Mailing & Publishing, p: { email: string; source: string | null; ip: string; requestId: string }) {
  const now = new Date();
  const existing = await currentAccount(ctx, p.email, now);
  await countCodeForEmail(ctx, p.email);
  const { row, code } = await createCode(ctx.db, { email: p.email, source: p.source, ip: p.ip, ttlSeconds: ctx.config.SIGNUP_CODE_TTL_SECONDS, now });
  try {
    const mail = signupCodeMail({ email: p.email, code, ttlSeconds: ctx.config.SIGNUP_CODE_TTL_SECONDS, existingAccount: existing !== null, siteUrl: ctx.config.siteUrl });
    await ctx.services.mailer.send({ ...mail, requestId: p.requestId });
  } catch {
    await discardCode(ctx.db, row.id).catch(() => {});
    await refundCodeForEmail(ctx, p.email).catch(() => {});
    throw signupError(502, "The verification email could not be sent. Check the address and try again in a few minutes.");
  }
  ctx.log.info({ requestId: p.requestId, codeId: row.id, newAccount: existing === null, source: p.source }, "signup code sent");
  return {
    ok: true,
    new_account: existing === null,
    account_expires_at: existing ? iso(existing.accountExpiresAt) : iso(new Date(now.getTime() + ctx.config.UNPAID_ACCOUNT_TTL_SECONDS * 1000)),
  };
}

export async function agentVerify(ctx: SignupDeps, p: { email: string; code: string; requestId: string }) {
  const now = new Date();
  const checked = await consumeCode(ctx.db, p.email, p.code, now);
  if (!checked.ok) {
    throw signupError(400, "The code is wrong or expired. Check the newest email, or request a new code with action=agent-signup.");
  }
  let account = await currentAccount(ctx, p.email, now);
  let created = false;
  if (!account) {
    const expiresAt = new Date(checked.row.createdAt.getTime() + ctx.config.UNPAID_ACCOUNT_TTL_SECONDS * 1000);
    account = await createFreeAccount(ctx.db, { email: p.email, source: checked.row.source, expiresAt, now });
    created = account !== null;
    account ??= await findLiveAccountByEmail(ctx.db, p.email);
    if (!account) throw signupError(400, "The account changed while signing in. Request a new code with action=agent-signup.");
  }
  const { row: token, raw } = await issueAccountToken(ctx.db, account.id, "read_write", SIGNUP_TOKEN_LABEL, now);
  if (created && account.plan === "free") {
    const url = await createStripeCheckout(ctx, account, p.requestId);
    if (url) account = { ...account, stripeCheckoutUrl: url };
  }
  if (account.plan === "free") await sendOwnerNotice(ctx, account, now, p.requestId);
  ctx.log.info({ requestId: p.requestId, accountId: account.id, newAccount: created, tokenId: token.id, prefix: token.prefix }, created ? "agent account created" : "agent signed in");
  const body: Record<string, unknown> = {
    user: { id: account.id, email: account.email },
    account_token: raw,
    token_prefix: token.prefix,
    token_scope: token.scope,
    plan: account.plan,
  };
  if (account.plan !== "pro") body.payment = paymentBlock(ctx, account);
  return body;
}

async function sendOwnerNotice(ctx: Mailing, account: Account, now: Date, requestId: string): Promise<void> {
  if (account.ownerNoticeSentAt || !(await claimOwnerNotice(ctx.db, account.id, now))) return;
  try {
    const mail = ownerNoticeMail({
      email: account.email, accountId: account.id, checkoutUrl: checkoutUrl(ctx, account), localCheckoutUrl: localCheckoutUrl(ctx, account.id),
      priceUsd: ctx.config.MEMBERSHIP_PRICE_USD, expiresAt: account.accountExpiresAt, siteUrl: ctx.config.siteUrl,
    });
    await ctx.services.mailer.send({ ...mail, requestId });
  } catch {
    await releaseOwnerNotice(ctx.db, account.id).catch(() => {});
    ctx.log.warn({ requestId, accountId: account.id }, "owner notice could not be sent; the next verify retries it");
  }
}
