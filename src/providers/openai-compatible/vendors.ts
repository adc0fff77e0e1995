// The ten OpenAI-compatible vendors (CONTRACT §3) as data: id, and the quirks that differ from
// OpenAI's Chat Completions. Base URLs come from config (PROVIDER_<ID>_BASE_URL or the vendor's
// documented OpenAI-compatible base); `/chat/completions` is appended.
import type { ApiKeyProviderId } from "../endpoints.ts";

export interface CompatibleVendor {
  id: ApiKeyProviderId;
  /** Provider id in the pricing catalog, when it differs. */
  pricingId?: string;
  /**
   * Whether the vendor accepts `stream_options` (how the relay asks for usage on streams).
   * False for vendors that reject unknown fields and report usage on the last chunk anyway.
   */
  streamOptions: boolean;
  /** Whether the vendor serves OpenAI's `/embeddings` at the same base (OpenAI-shaped request and answer). */
  embeddings?: boolean;
}

export const COMPATIBLE_VENDORS: readonly CompatibleVendor[] = [
  { id: "mistral", streamOptions: false, embeddings: true },
  { id: "groq", streamOptions: true },
  { id: "xai", pricingId: "x-ai", streamOptions: true },
  { id: "deepseek", streamOptions: true },
  { id: "together", streamOptions: true, embeddings: true },
  { id: "fireworks", streamOptions: true, embeddings: true },
  { id: "openrouter", streamOptions: true },
  { id: "cerebras", streamOptions: true },
  { id: "perplexity", streamOptions: true },
  { id: "cohere", streamOptions: true },
];
