import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";

/** Everything under /v1/organizations/ and its legacy aliases. */
export function managementRoutes(ctx: Ctx, app: Elysia): void {
  void ctx; void app;
}
