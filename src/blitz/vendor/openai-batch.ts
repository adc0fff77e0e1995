// Batch work on an OpenAI lane's Batch API: one JSONL upload, one batch, polled until it
// ends, its output and error files read back line by line. Stateless: the batch id is what a
// caller keeps (in Postgres) to poll again from any instance after a restart.
import { OPENAI_BATCH, openaiAuth } from "../../providers/openai/batch.ts";
import type { Json } from "../../protocols/types.ts";
import { callVendor, jsonlLines, type VendorBatchState, type VendorLine } from "./vendor-call.ts";

const call = (url: string, init: RequestInit) => callVendor("OpenAI", url, init);

/** Uploads the lines (purpose=batch) and creates the batch. Returns the vendor's batch id. */
export async function submitOpenAIBatch(base: string, apiKey: string, endpoint: string, lines: { customId: string; body: Json }[]): Promise<string> {
  const jsonl = lines.map((l) => JSON.stringify({ custom_id: l.customId, method: "POST", url: endpoint, body: l.body })).join("\n") + "\n";
  const form = new FormData();
  form.set("purpose", "batch");
  form.set("file", new Blob([jsonl], { type: "application/jsonl" }), "batch.jsonl");
  const file = (await (await call(OPENAI_BATCH.files(base), { method: "POST", headers: openaiAuth(apiKey), body: form })).json()) as { id: string };
  const batch = (await (await call(OPENAI_BATCH.batches(base), {
    method: "POST",
    headers: { ...openaiAuth(apiKey), "content-type": "application/json" },
    body: JSON.stringify({ input_file_id: file.id, endpoint, completion_window: OPENAI_BATCH.completionWindow }),
  })).json()) as { id: string };
  return batch.id;
}

export async function pollOpenAIBatch(base: string, apiKey: string, id: string): Promise<VendorBatchState> {
  const b = (await (await call(OPENAI_BATCH.batch(base, id), { headers: openaiAuth(apiKey) })).json()) as {
    id: string; status: string; output_file_id?: string | null; error_file_id?: string | null;
  };
  return { id: b.id, status: b.status, ended: OPENAI_BATCH.finalStatuses.includes(b.status), outputFileId: b.output_file_id ?? null, errorFileId: b.error_file_id ?? null };
}

export async function cancelOpenAIBatch(base: string, apiKey: string, id: string): Promise<void> {
  await call(OPENAI_BATCH.cancel(base, id), { method: "POST", headers: openaiAuth(apiKey) });
}

/** Every line of an ended batch's output and error files, as they are read. */
export async function* readOpenAIResults(base: string, apiKey: string, state: VendorBatchState): AsyncGenerator<VendorLine> {
  for (const fileId of [state.outputFileId, state.errorFileId]) {
    if (!fileId) continue;
    const res = await call(OPENAI_BATCH.fileContent(base, fileId), { headers: openaiAuth(apiKey) });
    for await (const l of jsonlLines<{ custom_id: string; response: { status_code: number; body: Json } | null; error: { code: string; message: string } | null }>(res)) {
      if (!l || typeof l !== "object" || l.custom_id === undefined) continue;
      const status = l.response?.status_code ?? 0;
      const ok = status >= 200 && status < 300;
      const code = l.error?.code ?? "";
      yield {
        customId: String(l.custom_id),
        outcome: ok ? "succeeded" : code === "batch_expired" ? "expired" : code === "batch_cancelled" ? "canceled" : "errored",
        status,
        body: l.response?.body ?? null,
        error: ok ? null : l.error ?? { code: "upstream_error", message: JSON.stringify(l.response?.body ?? null).slice(0, 500) },
      };
    }
  }
}
