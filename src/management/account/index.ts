import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT } from "../../http/route.ts";
import { getMe } from "./service.ts";

export function accountRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/me", { GET: ({ request }) => getMe(ctx, request) }, MANAGEMENT, {
    GET: {
      summary: "The account behind the token", tag: "Account", auth: "account-read",
      responses: { "200": { description: "The account; while unpaid, how to pay." } },
    },
  });
}
