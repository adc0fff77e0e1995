// /v1/organizations/tokens: create (SK), list (AT), revoke (SK). Listing and revoking work while the
// account is unpaid (SPEC signup rule 5: tokens can be revoked at any time; CONTRACT §8); creating
// stays behind the plan gate.
import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT } from "../../http/route.ts";
import { readBody, readQuery } from "../zod-input.ts";
import { authenticate } from "../guard.ts";
import { createTokenBody, deleteTokenQuery, noQuery, tokenListView, tokenView } from "./model.ts";
import { issueAccountToken, listAccountTokens, revokeAccountToken } from "./service.ts";

export function tokenRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/tokens", {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false, allowUnpaid: true });
      readQuery(request, noQuery);
      const rows = await listAccountTokens(ctx.db, account.id);
      return { tokens: rows.map(tokenListView) };
    },
    POST: async ({ request, requestId }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const body = await readBody(ctx, request, createTokenBody);
      const { row, raw } = await issueAccountToken(ctx.db, account.id, body.scope, body.label ?? "default");
      ctx.log.info({ requestId, accountId: account.id, tokenId: row.id, prefix: row.prefix, scope: row.scope }, "account token created");
      return { token: tokenView(row), account_token: raw };
    },
    DELETE: async ({ request, requestId }) => {
      const { account } = await authenticate(ctx, request, { write: true, allowUnpaid: true });
      const q = readQuery(request, deleteTokenQuery);
      await revokeAccountToken(ctx.db, account.id, q.id);
      ctx.log.info({ requestId, accountId: account.id, tokenId: q.id }, "account token revoked");
      return { revoked: true };
    },
  }, MANAGEMENT, {
    GET: { summary: "List account tokens", tag: "Account tokens", auth: "account-read", query: noQuery, responses: { "200": { description: "`{tokens: [...]}` (prefixes only)." } } },
    POST: {
      summary: "Create an account token", tag: "Account tokens", auth: "account-write", query: noQuery, body: createTokenBody,
      description: "`read_write` issues an sk_ token, `read_only` an rk_ token. The token is shown once.",
      responses: { "200": { description: "`{token, account_token}`" } },
    },
    DELETE: { summary: "Revoke an account token", tag: "Account tokens", auth: "account-write", query: deleteTokenQuery, responses: { "200": { description: "`{revoked: true}`" } } },
  });
}
