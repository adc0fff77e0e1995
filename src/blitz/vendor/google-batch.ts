// Items on a Google lane's Gemini batch mode: one batchGenerateContent with every request inline
// (one model per batch: the model is in the path), polled until its state is final, its inlined
// responses read back in input order, each with the metadata key it was sent with. Stateless like
// openai-batch.ts: the batch's resource name is what a caller keeps to poll again from any instance.
import { GOOGLE_BATCH, googleBatchHeaders } from "../../providers/google/batch.ts";
import type { Json } from "../../protocols/types.ts";
import { callVendor, VendorBatchError, type VendorBatchState, type VendorLine } from "./vendor-call.ts";

const call = (url: string, init: RequestInit) => callVendor("Gemini", url, init);

interface Operation {
  name: string;
  done?: boolean;
  metadata?: { state?: string };
  error?: { code?: number; message?: string };
  response?: { inlinedResponses?: { inlinedResponses?: Array<{ response?: Json; error?: { code?: number; message?: string; status?: string }; metadata?: { key?: string } }> } };
}

/** Creates the batch of `model` (GenerateContentRequests). Returns the batch's resource name. */
export async function submitGoogleBatch(base: string, apiKey: string, model: string, requests: { customId: string; request: Json }[]): Promise<string> {
  const body = JSON.stringify({
    batch: {
      display_name: `gateway-${requests.length}`,
      input_config: { requests: { requests: requests.map((r) => ({ request: r.request, metadata: { key: r.customId } })) } },
    },
  });
  // Inline requests have a size cap; a 413 is a refusal for good (the items run live).
  if (Buffer.byteLength(body) > GOOGLE_BATCH.maxInlineBytes) throw new VendorBatchError(`Gemini batch of ${requests.length} requests is over the ${GOOGLE_BATCH.maxInlineBytes} bytes an inline batch may hold.`, 413);
  const op = (await (await call(GOOGLE_BATCH.create(base, model), {
    method: "POST", headers: { ...googleBatchHeaders(apiKey), "content-type": "application/json" }, body,
  })).json()) as Operation;
  return op.name;
}

/** The batch's state; `outputFileId` is unused (the responses are inline, read by readGoogleResults). */
export async function pollGoogleBatch(base: string, apiKey: string, name: string): Promise<VendorBatchState & { operation: Operation }> {
  const op = (await (await call(GOOGLE_BATCH.batch(base, name), { headers: googleBatchHeaders(apiKey) })).json()) as Operation;
  const state = op.metadata?.state ?? "BATCH_STATE_UNSPECIFIED";
  return { id: op.name, status: state, ended: op.done === true || GOOGLE_BATCH.finalStates.includes(state), outputFileId: null, errorFileId: null, operation: op };
}

export async function cancelGoogleBatch(base: string, apiKey: string, name: string): Promise<void> {
  await call(GOOGLE_BATCH.cancel(base, name), { method: "POST", headers: googleBatchHeaders(apiKey) });
}

/**
 * Every answered or failed request of an ended batch, from its inlined responses, each named by
 * the metadata key it was sent with. Requests it did not answer (an expired or
 * cancelled batch) are absent: the caller runs them live or ends them cancelled.
 */
export async function readGoogleResults(base: string, apiKey: string, state: VendorBatchState): Promise<VendorLine[]> {
  const op = "operation" in state ? (state as { operation: Operation }).operation : (await pollGoogleBatch(base, apiKey, state.id)).operation;
  const items = op.response?.inlinedResponses?.inlinedResponses ?? [];
  return items.flatMap((x): VendorLine[] => {
    const customId = x.metadata?.key;
    if (customId === undefined) return [];
    if (x.response) return [{ customId, outcome: "succeeded", status: 200, body: x.response, error: null }];
    return [{ customId, outcome: "errored", status: x.error?.code ?? 0, body: null, error: { code: x.error?.status ?? "upstream_error", message: x.error?.message ?? "The vendor reported this request failed." } }];
  });
}
