// The Batch API's objects as OpenAI's published OpenAPI document shapes them: the file object
// (OpenAIFile), the batch object (Batch, with request_counts) and the lines of a batch's output
// and error files (`{id, custom_id, response: {status_code, request_id, body}, error}`).
// Fields the document types as plain strings or integers are left out while they have no value.
import { GatewayError, nestedErrorObject } from "../../errors.ts";
import type { Json } from "../../protocols/types.ts";
import { withProgress, type JobRow, type JobStores } from "../jobs/store.ts";
import { itemRequestId } from "../jobs/runner.ts";
import { ensureResultFile, firstModel, itemsPage, resultFiles, usageOf, type FileInfo } from "./store.ts";

/** The batch's completion window: OpenAI's only one. */
export const COMPLETION_WINDOW = "24h";
const WINDOW_S = 24 * 3600;
const PAGE = 1000;

const unix = (d: Date) => Math.floor(d.getTime() / 1000);

export function presentFile(f: FileInfo) {
  return {
    id: f.id,
    object: "file",
    bytes: f.bytes,
    created_at: unix(f.createdAt),
    ...(f.expiresAt ? { expires_at: unix(f.expiresAt) } : {}),
    filename: f.filename,
    purpose: f.purpose,
    status: "processed",
  };
}

/** Where an item's line goes: the output file (answered 2xx) or the error file (everything else). */
export const OUTPUT_STATES = ["succeeded"];
export const ERROR_STATES = ["failed", "not_run", "cancelled", "interrupted"];

/** The OpenAI batch status of a job of kind batch. */
function statusOf(j: JobRow): string {
  if (j.status === "queued" || j.status === "running") return "in_progress";
  if (j.status === "cancelled") return j.remaining > 0 ? "cancelling" : "cancelled";
  return "completed";
}

/** The batch's output and error files: made once its items are final (their lines no longer change). */
async function filesOf(ctx: JobStores, j: JobRow, final: boolean): Promise<{ output?: string; error?: string }> {
  const have = await resultFiles(ctx, j.id);
  const out: { output?: string; error?: string } = {};
  for (const f of have) out[f.kind as "output" | "error"] = f.id;
  if (!final) return out;
  const base = j.id.replace(/^batch_/, "");
  const want: Array<["output" | "error", number]> = [["output", j.succeeded], ["error", j.failed + j.notRun + j.interrupted]];
  for (const [kind, count] of want) {
    if (out[kind] || count === 0) continue;
    const id = `file-${base}-${kind}`;
    const bytes = Buffer.byteLength(await renderLines(ctx, j, kind));
    await ensureResultFile(ctx, {
      id, accountId: j.accountId, routingKeyId: j.routingKeyId, purpose: "batch_output",
      filename: `${j.id}_${kind}.jsonl`, bytes, content: null, batchId: j.id, kind, expiresAt: j.expiresAt,
    });
    out[kind] = id;
  }
  return out;
}

export async function presentBatch(ctx: JobStores, row: JobRow) {
  const [j] = await withProgress(ctx, [row]);
  const job = j!;
  const status = statusOf(job);
  const final = status === "completed" || status === "cancelled";
  const files = await filesOf(ctx, job, final);
  const created = unix(job.createdAt);
  const ended = job.finishedAt ? unix(job.finishedAt) : null;
  const model = await firstModel(ctx, job.id);
  const u = await usageOf(ctx, job.id);
  return {
    id: job.id,
    object: "batch",
    endpoint: job.endpoint ?? "/v1/chat/completions",
    ...(model ? { model } : {}),
    input_file_id: job.inputFileId ?? "",
    completion_window: COMPLETION_WINDOW,
    status,
    ...(files.output ? { output_file_id: files.output } : {}),
    ...(files.error ? { error_file_id: files.error } : {}),
    created_at: created,
    in_progress_at: created,
    expires_at: created + WINDOW_S,
    ...(status === "completed" && ended !== null ? { finalizing_at: ended, completed_at: ended } : {}),
    ...(job.status === "cancelled" && ended !== null ? { cancelling_at: ended } : {}),
    ...(status === "cancelled" && ended !== null ? { cancelled_at: ended } : {}),
    request_counts: { total: job.total, completed: job.succeeded, failed: job.failed + job.notRun + job.interrupted },
    usage: {
      input_tokens: u.input, input_tokens_details: { cached_tokens: 0 },
      output_tokens: u.output, output_tokens_details: { reasoning_tokens: 0 },
      total_tokens: u.input + u.output,
    },
    metadata: (job.metadata as Record<string, string> | null) ?? null,
  };
}

type ItemLine = Awaited<ReturnType<typeof itemsPage>>[number];

/** One line of an output or error file. */
function lineOf(j: JobRow, i: ItemLine): Json {
  const r = (i.result ?? {}) as { completion?: Json; error?: { message?: string; code?: string }; mode?: string };
  const id = `batch_req_${j.id.replace(/^batch_/, "")}_${i.idx}`;
  const requestId = itemRequestId(j.id, i.idx, Math.max(1, i.attempts));
  const mode = r.mode ? { mode: r.mode } : {};
  if (i.status === "succeeded") {
    return { id, custom_id: i.customId, response: { status_code: i.httpStatus ?? 200, request_id: requestId, body: r.completion ?? null }, error: null, ...mode };
  }
  const message = r.error?.message ?? "The request did not complete.";
  const code = r.error?.code ?? "upstream_error";
  // A request that reached the lanes and was answered with an error: its status and error body,
  // as the endpoint would have answered. One that never ran (cancelled, budget, instance lost): `error`.
  if (i.status === "failed" && i.httpStatus) {
    const body = { error: nestedErrorObject(new GatewayError(i.httpStatus, message, { code })) };
    return { id, custom_id: i.customId, response: { status_code: i.httpStatus, request_id: requestId, body }, error: null, ...mode };
  }
  const why = i.status === "cancelled" ? "batch_cancelled" : code;
  return { id, custom_id: i.customId, response: null, error: { code: why, message } };
}

/** The text of the batch's output or error file: one line per item, in input order. */
export async function renderLines(ctx: JobStores, j: JobRow, kind: "output" | "error"): Promise<string> {
  const states = kind === "output" ? OUTPUT_STATES : ERROR_STATES;
  const parts: string[] = [];
  for (let after = -1; ;) {
    const page = await itemsPage(ctx, j.id, after, PAGE, states);
    for (const i of page) parts.push(`${JSON.stringify(lineOf(j, i))}\n`);
    if (page.length < PAGE) break;
    after = page.at(-1)!.idx;
  }
  return parts.join("");
}
