// Everything at {site_url}: agent signup and verify, the checkout page, the billing webhook.
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../context.ts";
import { GatewayError } from "../errors.ts";
import { mount, MANAGEMENT, type RequestContext } from "../http/route.ts";
import { clientIp, queryOf } from "../http/request.ts";
import { readJsonObject } from "../http/body.ts";
import { checkoutPage } from "./checkout-page.ts";
import { parseSignup, signupBody, signupError, verifyBody } from "./model.ts";
import { countSignupFromIp } from "./rate-limit.ts";
import { agentSignup, agentVerify, type SignupDeps } from "./service.ts";
import { handleBillingWebhook } from "./webhook.ts";

const ACTIONS = ["agent-signup", "agent-verify"];
const actionQueryDoc = z.strictObject({ action: z.enum(ACTIONS as [string, ...string[]]) });

/** Signup errors carry no `code` (SPEC Errors table): a shared helper's 400 loses its code here. */
function codeless(e: unknown): never {
  if (e instanceof GatewayError && e.status === 400 && e.code !== undefined) throw signupError(400, e.message);
  throw e;
}

/** A body refusal in the signup shape (no code). */
const plain = (message: string) => signupError(400, message);

async function authAction(ctx: SignupDeps, { request, socketIp, requestId }: RequestContext) {
  let action: string | undefined;
  try {
    const q = queryOf(request);
    for (const k of Object.keys(q)) if (k !== "action") throw signupError(400, `Unknown query parameter \`${k}\`. Use ?action=agent-signup or ?action=agent-verify.`);
    action = q.action;
  } catch (e) { codeless(e); }
  if (!action || !ACTIONS.includes(action)) {
    throw signupError(400, `${action ? `Unknown action \`${action.slice(0, 40)}\`.` : "The query parameter `action` is missing."} Use ?action=agent-signup or ?action=agent-verify.`);
  }
  if (action === "agent-signup") {
    // Every agent-signup request counts against its IP, valid or not.
    await countSignupFromIp(ctx, clientIp(request, socketIp, ctx.config.TRUST_PROXY));
    const body = parseSignup(signupBody, (await readJsonObject(request, ctx.config.MAX_REQUEST_BYTES, plain)).value);
    return agentSignup(ctx, { email: body.email, source: body.source, ip: clientIp(request, socketIp, ctx.config.TRUST_PROXY), requestId });
  }
  const body = parseSignup(verifyBody, (await readJsonObject(request, ctx.config.MAX_REQUEST_BYTES, plain)).value);
  return agentVerify(ctx, { email: body.email, code: body.code, requestId });
}

/** Agent signup and verify, checkout page, billing webhook (all at {site_url}). */
export function signupRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/api/auth", { POST: (rc) => authAction(ctx, rc) }, MANAGEMENT, {
    POST: {
      summary: "Agent signup and verify", tag: "Signup", auth: "none", query: actionQueryDoc, body: z.union([signupBody, verifyBody]),
      description: "`?action=agent-signup` with `{email, source?}` mails a 6-digit code to the human; `?action=agent-verify` with `{email, code}` answers the account token.",
      responses: { "200": { description: "Signup: the code was sent. Verify: the account and its token." } },
    },
  });
  mount(ctx, app, "/api/billing/webhook", { POST: ({ request, requestId }) => handleBillingWebhook(ctx, request, requestId) }, MANAGEMENT, {
    POST: {
      summary: "Billing webhook (Stripe)", tag: "Signup", auth: "none",
      description: "Signed with BILLING_WEBHOOK_SECRET (the `Stripe-Signature` header); a paid checkout activates the account.",
      rawBody: { contentType: "application/json", schema: { type: "object", description: "A Stripe event." } },
      responses: { "200": { description: "The event was handled (or ignored)." } },
    },
  });
  mount(ctx, app, "/checkout", { GET: ({ request, requestId }) => checkoutPage(ctx, request, requestId) }, MANAGEMENT, {
    GET: { summary: "Checkout page for an unpaid account", tag: "Signup", auth: "none", responses: { "200": { description: "An HTML page.", contentType: "text/html" } } },
  });
}
