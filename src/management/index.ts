import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { accountRoutes } from "./account/index.ts";
import { tokenRoutes } from "./tokens/index.ts";
import { routingKeyRoutes } from "./routing-keys/index.ts";
import { credentialRoutes } from "./credentials/index.ts";
import { bridgeRoutes } from "./bridges/index.ts";
import { subSessionRoutes } from "./sub-session/index.ts";
import { usageRoutes } from "./usage/index.ts";
import { blitzJobsRoutes } from "./blitz-jobs/index.ts";
import { legacyRoutes } from "./legacy/index.ts";
import { webhookSecretRoutes } from "./webhooks/secret-routes.ts";
import { budgetAlertRoutes } from "./webhooks/budget-alert-routes.ts";

/** Everything under /v1/organizations/ and its legacy aliases. */
export function managementRoutes(ctx: Ctx, app: Elysia): void {
  void ctx; void app;
  accountRoutes(ctx, app);
  tokenRoutes(ctx, app);
  routingKeyRoutes(ctx, app);
  credentialRoutes(ctx, app);
  bridgeRoutes(ctx, app);
  subSessionRoutes(ctx, app);
  usageRoutes(ctx, app);
  webhookSecretRoutes(ctx, app);
  budgetAlertRoutes(ctx, app);
  blitzJobsRoutes(ctx, app);
  legacyRoutes(ctx, app);
}
