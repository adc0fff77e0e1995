// The `bridge` lane: a registered self-hosted coding-agent bridge serving OpenAI-compatible
// `POST {base_url}/v1/chat/completions` (CONTRACT §5); `bridge/coding-agent` resolves to a model
// its `GET /v1/models` lists (models.ts). The call carries ONLY the bridge's own
// bearer token (decrypted with aad `bridges:<id>`): the headers are built from scratch, so the
// caller's routing key, provider keys and any client header never reach the bridge. An
// `unhealthy` (or revoked) bridge is skipped by fallback.
import type { Json, WireProtocol } from "../../protocols/types.ts";
import type { ProviderAdapter, ResolvedLane, UpstreamCall } from "../types.ts";
import { bridgeFailure, bridgeFetch } from "./connect.ts";
import { BRIDGE_ALIAS, bridgeModels, resolveBridgeModel } from "./models.ts";

export function bridgeUnavailable(lane: ResolvedLane): string | null {
  const b = lane.bridge;
  if (!b) return "The bridge lane's bridge is revoked or no longer registered.";
  if (b.status === "unhealthy") return "The bridge is unhealthy (its last health check failed); it is skipped until a check succeeds.";
  return null;
}

export const bridgeAdapter: ProviderAdapter = {
  id: "bridge",
  kind: "bridge",
  protocols: ["chat"] as const,
  seat: false,
  catalogAliases: [BRIDGE_ALIAS],

  unavailable: bridgeUnavailable,

  /**
   * GET /v1/models: the lane's model, what the bridge lists at its own GET /v1/models (the same
   * pinned path and token as inference) and `bridge/coding-agent` when it resolves to one of them.
   * Nothing while the bridge cannot serve; a bridge that cannot be asked drops its listed models.
   */
  async models(ctx, lane) {
    if (bridgeUnavailable(lane) !== null) return [];
    const ids = lane.model ? [lane.model] : [];
    const listed = await bridgeModels(ctx, lane);
    if (listed && listed.length > 0) ids.push(...listed, BRIDGE_ALIAS);
    return ids;
  },

  applySettings(_body: Json, _lane: ResolvedLane, _protocol: WireProtocol) {
    // Bridges take no per-lane settings.
  },

  async prepare({ ctx, lane, body, model }): Promise<UpstreamCall> {
    const b = lane.bridge!;
    let token: string;
    try {
      token = ctx.secrets.open(b.tokenCiphertext, `bridges:${b.id}`);
    } catch {
      throw bridgeFailure("The bridge's stored token could not be decrypted; register the bridge again.");
    }
    // `bridge/coding-agent` is the model the bridge serves (its GET /v1/models).
    body.model = await resolveBridgeModel(ctx, lane, model);
    return {
      url: `${b.baseUrl.replace(/\/+$/, "")}/v1/chat/completions`,
      headers: {
        authorization: `Bearer ${token}`,
        "content-type": "application/json",
        accept: body.stream === true ? "text/event-stream" : "application/json",
      },
      body: JSON.stringify(body),
    };
  },

  async send(ctx, _lane, call, signal) {
    const res = await bridgeFetch(ctx, call.url, { method: "POST", headers: call.headers, body: call.body, signal });
    // The bridge refusing its own token is the bridge's problem, not the client's request.
    if (res.status === 401 || res.status === 403) {
      await res.body?.cancel().catch(() => {});
      throw bridgeFailure(`The bridge refused its token (HTTP ${res.status}); register the bridge again with its current token.`);
    }
    return res;
  },
};
