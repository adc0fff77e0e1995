// /v1/organizations/bridges: register (POST, SK), list (GET, AT) and revoke (DELETE ?id=, SK)
// self-hosted coding-agent bridges (SPEC "Bridge", CONTRACT §5 and §8).
import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { badRequest } from "../../errors.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import type { RouteDocs } from "../../http/openapi.ts";
import { authenticate } from "../guard.ts";
import { readBody, readQuery } from "../zod-input.ts";
import { createBridgeBody, idQuery, noQuery } from "./model.ts";
import { createBridge, listBridges, presentBridge, revokeBridge } from "./service.ts";

export function bridgeHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      readQuery(request, noQuery);
      const rows = await listBridges(ctx.db, account.id);
      return { bridges: rows.map(presentBridge) };
    },
    POST: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      readQuery(request, noQuery);
      const body = await readBody(ctx, request, createBridgeBody);
      const row = await createBridge(ctx, account.id, body);
      ctx.log.info({ accountId: account.id, bridgeId: row.id, tokenFingerprint: row.tokenFingerprint }, "bridge registered");
      return { bridge: presentBridge(row) };
    },
    DELETE: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: true });
      const { id } = readQuery(request, idQuery);
      if (!(await revokeBridge(ctx, account.id, id))) {
        throw badRequest(`No bridge with id ${id} in this account. List yours with GET /v1/organizations/bridges.`);
      }
      return { revoked: true };
    },
  };
}

export const bridgeDocs: RouteDocs = {
  GET: { summary: "List bridges", tag: "Bridges", auth: "account-read", query: noQuery, responses: { "200": { description: "`{bridges: [...]}`" } } },
  POST: {
    summary: "Register a bridge", tag: "Bridges", auth: "account-write", query: noQuery, body: createBridgeBody,
    description: "A self-hosted coding-agent bridge: its base URL and the bearer token the gateway sends it (stored encrypted, never shown again).",
    responses: { "200": { description: "`{bridge}`" } },
  },
  DELETE: { summary: "Revoke a bridge", tag: "Bridges", auth: "account-write", query: idQuery, responses: { "200": { description: "`{revoked: true}`" } } },
};

export function bridgeRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/bridges", bridgeHandlers(ctx), MANAGEMENT, bridgeDocs);
}
