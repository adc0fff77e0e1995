// `openai`: native Chat Completions and Responses (CONTRACT §3), the one API-key provider that
// accepts the lane setting `reasoning_effort`.
import type { Json, WireProtocol } from "../../protocols/types.ts";
import type { ProviderAdapter, ResolvedLane } from "../types.ts";
import { apiKeyOf, bearerCall, postJson } from "./http.ts";
import { fitChatBody } from "./chat-fit.ts";
import { wireJson } from "../../protocols/wire-json.ts";

/** Lane values → OpenAI's. `max` is the gateway's name for the top setting; OpenAI calls it `xhigh`. */
const EFFORT: Record<string, string> = { none: "none", low: "low", medium: "medium", high: "high", xhigh: "xhigh", max: "xhigh" };

export const openaiAdapter: ProviderAdapter = {
  id: "openai",
  kind: "api_key",
  protocols: ["chat", "responses", "embeddings"] as const,
  seat: false,
  // SPEC: the one API-key provider that accepts reasoning_effort.
  settings: ["reasoning_effort"],
  unavailable: () => null,
  applySettings(body: Json, lane: ResolvedLane, protocol: WireProtocol) {
    if (protocol === "embeddings") return;
    const effort = lane.reasoning_effort ? EFFORT[lane.reasoning_effort] ?? lane.reasoning_effort : null;
    if (!effort) return;
    // The key owner's lane setting wins over what the client sent.
    if (protocol === "responses") body.reasoning = { ...(body.reasoning ?? {}), effort };
    else body.reasoning_effort = effort;
  },
  fitTranslated(body: Json, protocol: WireProtocol, model: string) {
    if (protocol === "chat") fitChatBody(body, model);
  },
  prepare({ ctx, lane, protocol, body, stream }) {
    const base = ctx.config.providerBaseUrls.openai;
    const path = protocol === "responses" ? "/responses" : protocol === "embeddings" ? "/embeddings" : "/chat/completions";
    return bearerCall(base + path, apiKeyOf(ctx, lane), wireJson(body), stream);
  },
  send: (ctx, _lane, call, signal) => postJson(ctx, call, signal),
};
