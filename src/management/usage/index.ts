// GET /v1/organizations/usage (AT): the account's 30-day usage rollup (CONTRACT §6).
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT, type Handler, type Method } from "../../http/route.ts";
import { authenticate } from "../guard.ts";
import { readQuery } from "../zod-input.ts";
import { usageRollup } from "./service.ts";

const noQuery = z.strictObject({});

export function usageHandlers(ctx: Ctx): Partial<Record<Method, Handler>> {
  return {
    GET: async ({ request }) => {
      const { account } = await authenticate(ctx, request, { write: false });
      readQuery(request, noQuery);
      return usageRollup(ctx.db, account.id);
    },
  };
}

export function usageRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/usage", usageHandlers(ctx), MANAGEMENT, {
    GET: { summary: "Usage of the last 30 days", tag: "Usage", auth: "account-read", query: noQuery, responses: { "200": { description: "The account's 30-day rollup." } } },
  });
}
