// GET /metrics: Prometheus exposition of this instance's registry. No authentication, like most
// exporters: it carries counts and latencies only (no keys, accounts or prompts); keep the port
// off the public internet or filter the path at the proxy.
import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { mount, MANAGEMENT } from "../http/route.ts";

export function metricsRoutes(ctx: Ctx, app: Elysia): void {
  mount(ctx, app, "/metrics", {
    GET: async () => {
      const { body, contentType } = await ctx.services.metrics.render();
      return new Response(body, { headers: { "content-type": contentType, "cache-control": "no-store" } });
    },
  }, MANAGEMENT, {
    GET: {
      summary: "Prometheus metrics", tag: "Operations", auth: "none",
      responses: { "200": { description: "Prometheus text exposition.", contentType: "text/plain" } },
    },
  });
}
