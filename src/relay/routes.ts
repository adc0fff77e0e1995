import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";

/** The inference endpoints: the hot path. */
export function relayRoutes(ctx: Ctx, app: Elysia): void {
  void ctx; void app;
}
