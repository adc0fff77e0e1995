// GET {site_url}/checkout?account=<id>: the page a human opens from the relay message or the
// owner email. It states the price, the deadline and what happens next, and links to Stripe
// Checkout when one was created. Every interpolated value is HTML-escaped; the page loads nothing.
import { isExpired } from "../management/guard.ts";
import { findAccount } from "./lifecycle.ts";
import { freshStripeCheckout, type CheckoutDeps } from "./stripe-checkout.ts";

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;", "`": "&#96;", "=": "&#61;" };
export function escapeHtml(s: string): string {
  return s.replace(/[&<>"'`=]/g, (c) => ESCAPES[c]!);
}

/** j•••@example.com: enough for the owner to recognise, not a directory for whoever holds the link. */
export function maskEmail(email: string): string {
  const at = email.lastIndexOf("@");
  if (at <= 0) return "•••";
  return `${email[0]}•••${email.slice(at)}`;
}

function page(status: number, title: string, bodyHtml: string): Response {
  const html = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="robots" content="noindex"><title>${escapeHtml(title)}</title>
<style>body{font-family:system-ui,sans-serif;max-width:40rem;margin:3rem auto;padding:0 1rem;line-height:1.5;color:#222}
.button{display:inline-block;padding:.7rem 1.2rem;background:#2d5be3;color:#fff;border-radius:.4rem;text-decoration:none}
code{background:#f2f2f2;padding:.1rem .3rem;border-radius:.2rem}.muted{color:#666}</style></head>
<body><h1>${escapeHtml(title)}</h1>
${bodyHtml}
</body></html>
`;
  return new Response(html, {
    status,
    headers: {
      "content-type": "text/html; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      "x-frame-options": "DENY",
      "referrer-policy": "no-referrer",
      "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    },
  });
}

export async function checkoutPage(ctx: CheckoutDeps, request: Request, requestId?: string): Promise<Response> {
  const params = new URL(request.url).searchParams;
  const ids = params.getAll("account");
  const id = ids.length === 1 ? ids[0]!.trim() : "";
  if (!id || id.length > 200) {
    return page(400, "Account missing", `<p>This link has no account in it. Open the exact link from the email or from the agent's message; it ends in <code>?account=acct_…</code>.</p>`);
  }
  // Account ids are short and alphanumeric; anything else cannot name one (and must not reach the database).
  const account = /^[A-Za-z0-9_-]+$/.test(id) ? await findAccount(ctx.db, id) : null;
  if (!account) {
    return page(404, "Account not found", `<p>No account <code>${escapeHtml(id)}</code> exists here. Check that the link was copied completely.</p>`);
  }
  const who = `<p>Account <code>${escapeHtml(account.id)}</code> for <strong>${escapeHtml(maskEmail(account.email))}</strong>.</p>`;
  if (isExpired(account)) {
    const when = account.removedAt ?? account.accountExpiresAt ?? new Date();
    return page(410, "This account was removed", `${who}
<p>It was not activated before its deadline, so it and everything in it were removed on ${escapeHtml(when.toISOString())}. Its tokens no longer work.</p>
<p>To start over, let the agent sign up again with the same email address.</p>`);
  }
  if (account.plan === "pro") {
    return page(200, "Membership active", `${who}
<p>The membership is active. The agent that created the account now has the full management API; it notices by polling <code>GET /v1/organizations/me</code>.</p>`);
  }
  const price = ctx.config.MEMBERSHIP_PRICE_USD;
  const deadline = account.accountExpiresAt
    ? `<p>Activate it before <strong>${escapeHtml(account.accountExpiresAt.toUTCString())}</strong>. If it is not activated by then, the account and everything in it are removed and its tokens stop working.</p>`
    : "";
  const adminHint = `<code>npm run admin -- activate ${escapeHtml(account.id)}</code>`;
  let action: string;
  if (ctx.config.STRIPE_SECRET_KEY) {
    const url = await freshStripeCheckout(ctx, account, requestId);
    action = url && /^https?:\/\//i.test(url)
      ? `<p><a class="button" href="${escapeHtml(url)}" rel="noopener noreferrer">Pay $${escapeHtml(String(price))} per month with Stripe</a></p>`
      : `<p class="muted">Online payment is unavailable right now. Reload this page in a minute, or ask the gateway's operator to activate the account with ${adminHint}.</p>`;
  } else {
    action = `<p class="muted">This gateway has no online payment configured. Ask its operator to activate the account with ${adminHint}.</p>`;
  }
  return page(200, "Activate your Model Gateway account", `${who}
<p>An AI agent created this account with your email address and needs an active membership to manage routing keys.</p>
<p>Membership: <strong>$${escapeHtml(String(price))} per month</strong>.</p>
${deadline}
${action}
<h2>What happens next</h2>
<ol><li>You complete the payment.</li><li>The account's plan becomes <code>pro</code> and the deadline is cleared for good.</li>
<li>The agent, which polls <code>GET /v1/organizations/me</code>, sees <code>plan: "pro"</code> and continues on its own.</li></ol>
<p class="muted">If you did not ask an agent to do this, ignore this page; the account is removed at its deadline.</p>`);
}
