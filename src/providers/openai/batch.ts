// OpenAI's Batch API (https://platform.openai.com/docs/api-reference/batch): its paths and headers,
// relative to a lane's base URL (…/v1). The one place the Batch API's vendor constants live.
export const OPENAI_BATCH = {
  files: (base: string) => `${base}/files`,
  fileContent: (base: string, id: string) => `${base}/files/${encodeURIComponent(id)}/content`,
  batches: (base: string) => `${base}/batches`,
  batch: (base: string, id: string) => `${base}/batches/${encodeURIComponent(id)}`,
  cancel: (base: string, id: string) => `${base}/batches/${encodeURIComponent(id)}/cancel`,
  /** The only completion window OpenAI offers. */
  completionWindow: "24h",
  /** Batch statuses after which nothing more changes. */
  finalStatuses: ["completed", "expired", "cancelled", "failed"] as readonly string[],
  /** OpenAI's documented discount on batch work where the catalog names no batch price. */
  discount: 0.5,
} as const;

export const openaiAuth = (apiKey: string): Record<string, string> => ({ authorization: `Bearer ${apiKey}` });
