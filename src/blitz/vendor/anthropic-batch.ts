// Items on an Anthropic lane's Message Batches: one create with every request, polled until
// `processing_status` is `ended`, its results_url read as JSONL. Stateless like openai-batch.ts:
// the batch id is what a caller keeps to poll again from any instance (apis.ts puts it behind
// the same interface as OpenAI's).
import { ANTHROPIC_BATCH, anthropicBatchHeaders } from "../../providers/anthropic/batch.ts";
import type { Json } from "../../protocols/types.ts";
import { callVendor, jsonlLines, VendorBatchError, type VendorBatchState, type VendorLine } from "./vendor-call.ts";

const call = (url: string, init: RequestInit) => callVendor("Anthropic", url, init);

/** Creates the batch (Messages params per request). Returns the vendor's batch id. */
export async function submitAnthropicBatch(base: string, apiKey: string, requests: { customId: string; params: Json }[]): Promise<string> {
  const b = (await (await call(ANTHROPIC_BATCH.batches(base), {
    method: "POST",
    headers: { ...anthropicBatchHeaders(apiKey), "content-type": "application/json" },
    body: JSON.stringify({ requests: requests.map((r) => ({ custom_id: r.customId, params: r.params })) }),
  })).json()) as { id: string };
  return b.id;
}

/** The batch's state; `outputFileId` carries its results_url once it ended. */
export async function pollAnthropicBatch(base: string, apiKey: string, id: string): Promise<VendorBatchState> {
  const b = (await (await call(ANTHROPIC_BATCH.batch(base, id), { headers: anthropicBatchHeaders(apiKey) })).json()) as { id: string; processing_status: string; results_url: string | null };
  return { id: b.id, status: b.processing_status, ended: b.processing_status === "ended", outputFileId: b.results_url ?? null, errorFileId: null };
}

export async function cancelAnthropicBatch(base: string, apiKey: string, id: string): Promise<void> {
  await call(ANTHROPIC_BATCH.cancel(base, id), { method: "POST", headers: anthropicBatchHeaders(apiKey) });
}

/** Every result line of an ended batch, as they are read (the results_url is the vendor's own; the key goes only to it). */
export async function* readAnthropicResults(base: string, apiKey: string, state: VendorBatchState): AsyncGenerator<VendorLine> {
  if (!state.outputFileId) return;
  // Only a results URL on the lane's own vendor origin is followed.
  if (new URL(state.outputFileId).origin !== new URL(base).origin) throw new VendorBatchError("Anthropic batch results_url is not on the lane's origin; it is not followed.", 502, true);
  const res = await call(state.outputFileId, { headers: anthropicBatchHeaders(apiKey) });
  for await (const l of jsonlLines<{ custom_id: string; result: { type: string; message?: Json; error?: { error?: { type?: string; message?: string } } } }>(res)) {
    if (!l || typeof l !== "object" || typeof l.custom_id !== "string" || !l.result || typeof l.result !== "object") continue;
    const t = l.result.type;
    const outcome = t === "succeeded" ? "succeeded" : t === "expired" ? "expired" : t === "canceled" ? "canceled" : "errored";
    yield {
      customId: l.custom_id, outcome,
      status: outcome === "succeeded" ? 200 : 0,
      body: l.result.message ?? null,
      error: outcome === "succeeded" ? null : { code: t === "errored" ? (l.result.error?.error?.type ?? "api_error") : t, message: l.result.error?.error?.message ?? `The vendor reported this request ${t}.` },
    };
  }
}
