// The Gemini API's batch mode (https://ai.google.dev/api/batch-mode): its paths, states and limits,
// relative to a lane's base URL (…/v1beta). The one place they live.
import { modelPath } from "./adapter.ts";

export const GOOGLE_BATCH = {
  create: (base: string, model: string) => `${base}/${modelPath(model)}:batchGenerateContent`,
  /** `name` is the batch's resource name, `batches/{id}`. */
  batch: (base: string, name: string) => `${base}/batches/${encodeURIComponent(name.replace(/^batches\//, ""))}`,
  cancel: (base: string, name: string) => `${base}/batches/${encodeURIComponent(name.replace(/^batches\//, ""))}:cancel`,
  /** States after which the batch changes no more. */
  finalStates: ["BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED"] as readonly string[],
  /** The most an inline request may weigh (larger batches go through the Files API, not used here). */
  maxInlineBytes: 20 * 1024 * 1024,
  /** Google's documented discount on batch mode where the catalog names no batch price. */
  discount: 0.5,
} as const;

export const googleBatchHeaders = (apiKey: string): Record<string, string> => ({ "x-goog-api-key": apiKey });
