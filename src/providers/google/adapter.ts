// `google`: the Gemini API, native (CONTRACT §3): POST {base}/models/{model}:generateContent, or
// :streamGenerateContent?alt=sse for streams, with the key in `x-goog-api-key` (never in the URL,
// where it would reach access logs). The model travels in the path, not the body. Embeddings:
// POST {base}/models/{model}:batchEmbedContents. Counts: POST {base}/models/{model}:countTokens.
import { geminiCountBody } from "../../protocols/gemini/index.ts";
import type { ProviderAdapter } from "../types.ts";
import { apiKeyOf, postJson } from "../openai/http.ts";
import { catalogHints } from "../catalog-hints.ts";

/** `gemini-2.5-flash` or `models/gemini-2.5-flash` → the path segment. */
export function modelPath(model: string): string {
  return `models/${encodeURIComponent(model.replace(/^models\//, ""))}`;
}

export const googleAdapter: ProviderAdapter = {
  id: "google",
  kind: "api_key",
  protocols: ["gemini", "gemini-embeddings"] as const,
  seat: false,
  unavailable: () => null,
  applySettings: () => {},
  modelHints: (model) => catalogHints("google", model),
  prepare({ ctx, lane, model, body, stream, protocol }) {
    const method = protocol === "gemini-embeddings" ? "batchEmbedContents" : stream ? "streamGenerateContent?alt=sse" : "generateContent";
    return {
      url: `${ctx.config.providerBaseUrls.google}/${modelPath(model)}:${method}`,
      headers: {
        "x-goog-api-key": apiKeyOf(ctx, lane),
        "content-type": "application/json",
        accept: stream ? "text/event-stream" : "application/json",
      },
      body: JSON.stringify(body),
    };
  },
  // A Gemini client's countTokens (CONTRACT §9): exact, and free at Google.
  countTokens({ ctx, lane, body }) {
    const model = String(body.model ?? "");
    return {
      url: `${ctx.config.providerBaseUrls.google}/${modelPath(model)}:countTokens`,
      headers: { "x-goog-api-key": apiKeyOf(ctx, lane), "content-type": "application/json", accept: "application/json" },
      body: JSON.stringify(geminiCountBody(body, model)),
    };
  },
  send: (ctx, _lane, call, signal) => postJson(ctx, call, signal),
};
