import type { Elysia } from "elysia";
import type { Ctx } from "../context.ts";
import { ANTHROPIC, INFERENCE, mount } from "../http/route.ts";
import { blitzRoutes } from "./blitz.ts";
import { keyInfo } from "./key-info.ts";
import { listModels } from "./models.ts";
import { handleCountTokens } from "./count-tokens.ts";
import { handleInference } from "./pipeline.ts";
import { transcriptionRoutes } from "./transcriptions.ts";

/** The inference endpoints: the hot path. */
export function relayRoutes(ctx: Ctx, app: Elysia): void {
  const created = Math.floor(Date.now() / 1000);
  mount(ctx, app, "/v1/chat/completions", { POST: (rc) => handleInference(ctx, rc, "chat") }, INFERENCE);
  mount(ctx, app, "/v1/responses", { POST: (rc) => handleInference(ctx, rc, "responses") }, INFERENCE);
  mount(ctx, app, "/v1/messages", { POST: (rc) => handleInference(ctx, rc, "anthropic") }, ANTHROPIC);
  mount(ctx, app, "/v1/messages/count_tokens", { POST: (rc) => handleCountTokens(ctx, rc) }, ANTHROPIC);
  mount(ctx, app, "/v1/models", { GET: (rc) => listModels(ctx, rc.request, created) }, INFERENCE);
  mount(ctx, app, "/v1/key", { GET: (rc) => keyInfo(ctx, rc.request) }, INFERENCE);
  blitzRoutes(ctx, app);
  transcriptionRoutes(ctx, app);
}
