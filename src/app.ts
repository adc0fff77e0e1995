// Builds the HTTP app from the feature modules. The inference routes (relay/) are the hot path;
// everything else hangs off to the side.
import { Elysia } from "elysia";
import type { Ctx } from "./context.ts";
import { errorResponse, GatewayError } from "./errors.ts";
import { docsRoutes } from "./http/docs.ts";
import { answerUnrouted } from "./http/route.ts";
import { healthRoutes } from "./http/health.ts";
import { signupRoutes } from "./signup/index.ts";
import { managementRoutes } from "./management/index.ts";
import { relayRoutes } from "./relay/routes.ts";
import { metricsRoutes } from "./metrics/routes.ts";
import { dashboardRoutes } from "./dashboard/routes.ts";
import { adminRoutes } from "./admin/local-endpoint.ts";

/** `adminSecret`: the secret of the loopback admin endpoint, null when the gateway offers none. */
export function buildApp(ctx: Ctx, adminSecret: () => string | null = () => null): Elysia {
  const app = new Elysia();
  relayRoutes(ctx, app);
  managementRoutes(ctx, app);
  signupRoutes(ctx, app);
  healthRoutes(ctx, app);
  metricsRoutes(ctx, app);
  docsRoutes(ctx, app);
  dashboardRoutes(ctx, app);
  adminRoutes(ctx, app, adminSecret);
  app.onError(({ code, path, request }) => {
    if (code === "NOT_FOUND") {
      const nested = path.startsWith("/v1/") && !path.startsWith("/v1/organizations");
      // Google's clients read Google's error shape (CONTRACT §9).
      const shape = path.startsWith("/v1beta/") ? "google" : nested ? "nested" : "flat";
      const res = errorResponse(new GatewayError(404, `No route for ${path}. The API reference at /docs lists the available paths.`, { code: "not_found" }), shape);
      // The access line's route is not the raw path (unbounded values): unknown paths share one.
      return answerUnrouted(ctx, request, "(no route)", res);
    }
    return errorResponse(new GatewayError(400, "The request could not be read. Send a well-formed HTTP request with a JSON body.", { code: "bad_request" }), "flat");
  });
  return app as unknown as Elysia;
}
