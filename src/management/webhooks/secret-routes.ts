// /v1/organizations/webhook-secret (CONTRACT §8): the secret that signs the account's webhooks.
// GET shows it (created on first read), POST rotates it; `sk_` tokens only, since it lets its
// holder forge deliveries. Never logged.
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { GatewayError } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { rotateWebhookSecret, webhookSecret } from "../../webhooks/secret.ts";
import { authenticate, type GuardDeps } from "../guard.ts";
import { readQuery } from "../zod-input.ts";

const noQuery = z.strictObject({});
const secretShape = z.strictObject({ secret: z.string().meta({ description: "`whsec_…`: the HMAC-SHA256 key of the Gateway-Signature header." }) });

async function writeCaller(ctx: GuardDeps, request: Request) {
  const caller = await authenticate(ctx, request, { write: false });
  if (caller.token.scope !== "read_write") {
    throw new GatewayError(403, "The webhook secret is shown to read_write account tokens (sk_) only: it can sign webhooks in the gateway's name.", { code: "read_only_token" });
  }
  readQuery(request, noQuery);
  return caller;
}

export function webhookSecretHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await writeCaller(ctx, request);
      return { secret: await webhookSecret(ctx, account.id) };
    },
    POST: async ({ request }) => {
      const { account } = await writeCaller(ctx, request);
      const secret = await rotateWebhookSecret(ctx, account.id);
      ctx.log.info({ accountId: account.id }, "webhook secret rotated");
      return { secret };
    },
  };
}

export const webhookSecretDocs: RouteDocs = {
  GET: {
    summary: "The webhook signing secret", tag: "Webhooks", auth: "account-write", query: noQuery,
    description: "Created on first read. Every webhook (job ends, budget alerts) carries `Gateway-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of \"<t>.<raw body>\">` under this secret; reject a timestamp older than 5 minutes. `sk_` tokens only.",
    responses: { "200": { description: "`{secret: \"whsec_…\"}`", schema: secretShape } },
  },
  POST: {
    summary: "Rotate the webhook signing secret", tag: "Webhooks", auth: "account-write", query: noQuery,
    description: "Deliveries sent from now on (retries included) are signed with the new secret.",
    responses: { "200": { description: "`{secret: \"whsec_…\"}`: the new secret.", schema: secretShape } },
  },
};

export function webhookSecretRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/webhook-secret", webhookSecretHandlers(ctx), MANAGEMENT, webhookSecretDocs);
}
