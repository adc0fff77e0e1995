// Anthropic's Message Batches (https://docs.anthropic.com/en/api/creating-message-batches): its
// paths and headers, relative to the vendor's base URL (no /v1). The one place they live.
import { ANTHROPIC_VERSION } from "./adapter.ts";
export const ANTHROPIC_BATCH = {
  batches: (base: string) => `${base}/v1/messages/batches`,
  batch: (base: string, id: string) => `${base}/v1/messages/batches/${encodeURIComponent(id)}`,
  cancel: (base: string, id: string) => `${base}/v1/messages/batches/${encodeURIComponent(id)}/cancel`,
  /** Anthropic's documented discount on batch work where the catalog names no batch price. */
  discount: 0.5,
} as const;

export const anthropicBatchHeaders = (apiKey: string): Record<string, string> => ({ "x-api-key": apiKey, "anthropic-version": ANTHROPIC_VERSION });
