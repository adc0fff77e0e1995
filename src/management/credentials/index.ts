// /v1/organizations/credentials: saved API keys for the 13 API-key providers (CONTRACT §6).
import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { badRequest } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { authenticate } from "../guard.ts";
import { readBody, readQuery } from "../zod-input.ts";
import { createCredentialBody, idQuery, noQuery } from "./model.ts";
import { createCredential, deleteCredential, listCredentials, presentCredential } from "./service.ts";

export function credentialHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      readQuery(request, noQuery);
      const rows = await listCredentials(ctx.db, account.id);
      return { credentials: rows.map(presentCredential) };
    },
    POST: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const body = await readBody(ctx, request, createCredentialBody);
      const row = await createCredential(ctx, account.id, body);
      ctx.log.info({ accountId: account.id, credentialId: row.id, provider: row.provider, fingerprint: row.keyFingerprint }, "credential saved");
      return { credential: presentCredential(row) };
    },
    DELETE: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      const { id } = readQuery(request, idQuery);
      if (!(await deleteCredential(ctx, account.id, id))) {
        throw badRequest(`No saved key with id ${id} in this account. List yours with GET /v1/organizations/credentials.`);
      }
      return { deleted: true };
    },
  };
}

export const credentialDocs: RouteDocs = {
  GET: { summary: "List saved provider keys", tag: "Credentials", auth: "account-read", query: noQuery, responses: { "200": { description: "`{credentials: [...]}` (fingerprints only, never the key)." } } },
  POST: {
    summary: "Save a provider API key", tag: "Credentials", auth: "account-write", query: noQuery, body: createCredentialBody,
    description: "Stored encrypted; lanes of that provider name it with `credential_id`.",
    responses: { "200": { description: "`{credential}`" } },
  },
  DELETE: { summary: "Delete a saved key", tag: "Credentials", auth: "account-write", query: idQuery, responses: { "200": { description: "`{deleted: true}`" } } },
};

export function credentialRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/credentials", credentialHandlers(ctx), MANAGEMENT, credentialDocs);
}
