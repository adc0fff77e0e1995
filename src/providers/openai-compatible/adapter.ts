// One adapter per OpenAI-compatible vendor, built from its data row: Chat Completions (and
// `/embeddings` where the row says the vendor serves it),
// bearer auth, no per-lane settings (reasoning_effort belongs to `openai` lanes).
import type { Json } from "../../protocols/types.ts";
import type { ProviderAdapter } from "../types.ts";
import { apiKeyOf, bearerCall, postJson } from "../openai/http.ts";
import type { CompatibleVendor } from "./vendors.ts";
import { wireJson } from "../../protocols/wire-json.ts";

export function compatibleAdapter(v: CompatibleVendor): ProviderAdapter {
  return {
    id: v.id,
    kind: "api_key",
    protocols: v.embeddings ? ["chat", "embeddings"] as const : ["chat"] as const,
    seat: false,
    pricingId: v.pricingId,
    unavailable: () => null,
    applySettings(body: Json) {
      if (!v.streamOptions && body.stream_options) {
        const { include_usage: _relayAsked, ...rest } = body.stream_options as Json;
        if (Object.keys(rest).length) body.stream_options = rest;
        else delete body.stream_options;
      }
    },
    prepare({ ctx, lane, body, stream, protocol }) {
      const path = protocol === "embeddings" ? "/embeddings" : "/chat/completions";
      return bearerCall(`${ctx.config.providerBaseUrls[v.id]}${path}`, apiKeyOf(ctx, lane), wireJson(body), stream);
    },
    send: (ctx, _lane, call, signal) => postJson(ctx, call, signal),
  };
}
