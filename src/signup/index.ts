import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";

/** Agent signup and verify, checkout page, billing webhook (all at {site_url}). */
export function signupRoutes(ctx: Ctx, app: Elysia): void {
  void ctx; void app;
}
