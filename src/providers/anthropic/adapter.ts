// `anthropic`: the Anthropic Messages API, native (CONTRACT §3): POST {base}/v1/messages with
// `x-api-key` and `anthropic-version: 2023-06-01`. Either client shape is translated to Messages
// by the anthropic codec (src/protocols/anthropic) and back.
import type { AdapterEnv } from "../env.ts";
import type { ProviderAdapter, ResolvedLane } from "../types.ts";
import { apiKeyOf, postJson } from "../openai/http.ts";
import { catalogHints } from "../catalog-hints.ts";

export const ANTHROPIC_VERSION = "2023-06-01";

function headersFor(ctx: AdapterEnv, lane: ResolvedLane, stream: boolean, clientHeaders: Record<string, string> | undefined): Record<string, string> {
  const headers: Record<string, string> = {
    "x-api-key": apiKeyOf(ctx, lane),
    // A Messages client's own version and beta flags win: the body it sent was written for them.
    "anthropic-version": clientHeaders?.["anthropic-version"] ?? ANTHROPIC_VERSION,
    "content-type": "application/json",
    accept: stream ? "text/event-stream" : "application/json",
  };
  if (clientHeaders?.["anthropic-beta"]) headers["anthropic-beta"] = clientHeaders["anthropic-beta"];
  return headers;
}

export const anthropicAdapter: ProviderAdapter = {
  id: "anthropic",
  kind: "api_key",
  protocols: ["anthropic"] as const,
  seat: false,
  unavailable: () => null,
  // No per-lane settings apply: reasoning_effort, verbosity and service_tier belong to other lanes.
  applySettings: () => {},
  modelHints: (model) => catalogHints("anthropic", model),
  prepare({ ctx, lane, body, stream, clientHeaders }) {
    return { url: `${ctx.config.providerBaseUrls.anthropic}/v1/messages`, headers: headersFor(ctx, lane, stream, clientHeaders), body: JSON.stringify(body) };
  },
  countTokens({ ctx, lane, body, clientHeaders }) {
    return { url: `${ctx.config.providerBaseUrls.anthropic}/v1/messages/count_tokens`, headers: headersFor(ctx, lane, false, clientHeaders), body: JSON.stringify(body) };
  },
  send: (ctx, _lane, call, signal) => postJson(ctx, call, signal),
};
