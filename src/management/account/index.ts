import type { Elysia } from "elysia";
import type { Ctx } from "../../context.ts";
import { mount, MANAGEMENT } from "../../http/route.ts";
import { getMe } from "./service.ts";

export function accountRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/v1/organizations/me", { GET: ({ request }) => getMe(ctx, request) }, MANAGEMENT);
}
