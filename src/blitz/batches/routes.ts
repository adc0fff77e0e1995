// The OpenAI Batch API with the routing key as the API key (CONTRACT §9 "Batch work"):
//   POST   /v1/files                  multipart {file, purpose: "batch"} → the file object
//   GET    /v1/files                  the key's files (?purpose=&after=&limit=)
//   GET    /v1/files/{id}             the file object
//   DELETE /v1/files/{id}             {id, object: "file", deleted: true}
//   GET    /v1/files/{id}/content     the JSONL text (an upload, or a batch's output/error lines)
//   POST   /v1/batches                {input_file_id, endpoint, completion_window: "24h", metadata}
//   GET    /v1/batches                the key's batches, newest first (?after=&limit=)
//   GET    /v1/batches/{id}           the batch object
//   POST   /v1/batches/{id}/cancel    cancels what has not started; what ran is charged
// Files and batches belong to the routing key that created them: another key gets 404, as for an
// unknown id. Errors use the nested (OpenAI) shape. Order of checks: 405 → 401 → 400 → 402.
import type { Elysia } from "elysia";
import { z } from "zod";
import type { Ctx } from "../../context.ts";
import { GatewayError } from "../../errors.ts";
import { queryOf } from "../../http/request.ts";
import { readJsonObject, readText } from "../../http/body.ts";
import { INFERENCE, mount, type RequestContext } from "../../http/route.ts";
import { randomToken } from "../../lib/crypto.ts";
import { newId } from "../../lib/ids.ts";
import { resolveRoutingKey } from "../../relay/auth.ts";
import type { KeyContext } from "../../relay/key-context.ts";
import { relayDeps } from "../../relay/relay-deps.ts";
import { noProviders } from "../../relay/relay-errors.ts";
import { cancelJob, getJobRow, vendorBound, type JobRow } from "../jobs/store.ts";
import { admitBatchWork, batchWorstCase, storeHeld } from "./admission.ts";
import { vendorBatchLane } from "../vendor/apis.ts";
import { BATCH_ENDPOINTS, parseBatchLines, type BatchEndpoint } from "./jsonl.ts";
import { COMPLETION_WINDOW, presentBatch, presentFile, renderLines } from "./present.ts";
import { createBatch, deleteFile, insertFile, listBatches, listFiles, ownFile, type FileRow } from "./store.ts";

/**
 * The largest upload. The text is held in Postgres (one row) and parsed whole when a batch is
 * created, so the cap is below OpenAI's 200 MB; a larger job is several batches.
 */
export const BATCH_FILE_MAX_BYTES = 50 * 1024 * 1024;
const LIST_DEFAULT = 20;
const LIST_MAX = 100;
const FILE_LIST_MAX = 10_000;

const invalid = (message: string, param: string | null = null) => new GatewayError(400, message, { param });
const noSuch = (what: "File" | "Batch", id: string) =>
  new GatewayError(404, `No such ${what} object: ${id.slice(0, 64)} (a ${what.toLowerCase()} is visible to the routing key that created it).`, { code: "not_found", param: "id", type: "invalid_request_error" });

const batchBodyDoc = z.strictObject({
  input_file_id: z.string().min(1).meta({ description: "The id of a file uploaded with purpose `batch`: JSONL, one `{custom_id, method: \"POST\", url, body}` per line." }),
  endpoint: z.enum(BATCH_ENDPOINTS).meta({ description: "The endpoint every line calls." }),
  completion_window: z.literal(COMPLETION_WINDOW),
  metadata: z.record(z.string().max(64), z.string().max(512)).nullable().optional().meta({ description: "Up to 16 key-value pairs, echoed back." }),
  output_expires_after: z.unknown().optional(),
});

const pageDoc = z.strictObject({
  after: z.string().max(128).optional().meta({ description: "The id of the last object of the previous page." }),
  limit: z.string().regex(/^\d+$/).optional().meta({ description: `Objects per page, 1 to ${LIST_MAX} (default ${LIST_DEFAULT}).` }),
});
const filePageDoc = pageDoc.extend({
  purpose: z.string().max(64).optional(),
  order: z.enum(["asc", "desc"]).optional(),
  limit: z.string().regex(/^\d+$/).optional().meta({ description: `Files per page, 1 to ${FILE_LIST_MAX} (default ${FILE_LIST_MAX}).` }),
});

export function batchApiRoutes(ctx: Ctx, app: Elysia): void {
  const auth = "routing-key" as const;
  const tag = "Batch";
  mount(ctx, app, "/v1/files", { POST: (rc) => upload(ctx, rc), GET: (rc) => listFilesRoute(ctx, rc) }, INFERENCE, {
    POST: {
      summary: "Upload a batch input file (OpenAI Files API)", tag, auth,
      description: `multipart/form-data with \`file\` (JSONL) and \`purpose: "batch"\`; at most ${BATCH_FILE_MAX_BYTES / 1024 / 1024} MB, held in the gateway's database.`,
      rawBody: { contentType: "multipart/form-data", schema: { type: "object", required: ["file", "purpose"], properties: { file: { type: "string", contentMediaType: "application/octet-stream" }, purpose: { type: "string", enum: ["batch"] } } } },
      responses: { "200": { description: "The file object (OpenAIFile)." }, "413": { description: "The file is over the cap." } },
    },
    GET: { summary: "The routing key's files", tag, auth, query: filePageDoc, responses: { "200": { description: "`{object: \"list\", data: [file], first_id, last_id, has_more}`." } } },
  });
  mount(ctx, app, "/v1/files/:id", { GET: (rc) => showFile(ctx, rc), DELETE: (rc) => removeFile(ctx, rc) }, INFERENCE, {
    GET: { summary: "A file object", tag, auth, responses: { "200": { description: "The file object." }, "404": { description: "Unknown, or another key's." } } },
    DELETE: { summary: "Delete an uploaded file", tag, auth, responses: { "200": { description: "`{id, object: \"file\", deleted: true}`." } } },
  });
  mount(ctx, app, "/v1/files/:id/content", { GET: (rc) => fileContent(ctx, rc) }, INFERENCE, {
    GET: { summary: "A file's content", tag, auth, responses: { "200": { description: "JSONL: an upload as sent, or a batch's output or error lines `{id, custom_id, response: {status_code, request_id, body}, error, mode}`." } } },
  });
  mount(ctx, app, "/v1/batches", { POST: (rc) => submit(ctx, rc), GET: (rc) => listBatchesRoute(ctx, rc) }, INFERENCE, {
    POST: {
      summary: "Create a batch (OpenAI Batch API)", tag, auth, body: batchBodyDoc,
      description: "Every line is checked first (400 naming the line); the lines' summed worst case must fit the key's remaining budget (402, nothing stored). The lines then run through the key's lanes, each charged at its real cost with one usage record.",
      responses: { "200": { description: "The batch object (`status: \"in_progress\"`)." }, "402": { description: "budget_exceeded: the batch's worst case does not fit." } },
    },
    GET: { summary: "The routing key's batches, newest first", tag, auth, query: pageDoc, responses: { "200": { description: "`{object: \"list\", data: [batch], first_id, last_id, has_more}`." } } },
  });
  mount(ctx, app, "/v1/batches/:id", { GET: (rc) => showBatch(ctx, rc) }, INFERENCE, {
    GET: { summary: "A batch object", tag, auth, responses: { "200": { description: "The batch with `request_counts`, and `output_file_id` / `error_file_id` once it ended." } } },
  });
  mount(ctx, app, "/v1/batches/:id/cancel", { POST: (rc) => cancel(ctx, rc) }, INFERENCE, {
    POST: { summary: "Cancel a batch", tag, auth, bodyOptional: true, responses: { "200": { description: "The batch, `cancelling` until its running lines end, then `cancelled`; lines that ran are charged and in its files." } } },
  });
}

/** The id in `/v1/<kind>/{id}[/…]`, or 404 when it cannot be one. */
function idOf(rc: RequestContext, prefix: string): string {
  const rest = new URL(rc.request.url).pathname.slice(prefix.length);
  return decodeURIComponent(rest.split("/")[0] ?? "");
}
const plausible = (id: string) => /^[\w-]{1,128}$/.test(id);

async function keyOf(ctx: Ctx, rc: RequestContext): Promise<KeyContext> {
  const key = await resolveRoutingKey(ctx, rc.request);
  rc.access.keyPrefix = key.keyPrefix;
  return key;
}

async function fileOf(ctx: Ctx, rc: RequestContext, key: KeyContext): Promise<FileRow> {
  const id = idOf(rc, "/v1/files/");
  const f = plausible(id) ? await ownFile(ctx, key.id, id) : null;
  if (!f) throw noSuch("File", id);
  return f;
}

async function upload(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const ct = rc.request.headers.get("content-type") ?? "";
  if (!/^multipart\/form-data;\s*boundary=/i.test(ct)) throw invalid("Upload the file as multipart/form-data with a `file` part and `purpose: \"batch\"`.", "file");
  const raw = await readText(rc.request, BATCH_FILE_MAX_BYTES + 64 * 1024);
  let form: Awaited<ReturnType<Request["formData"]>>;
  try {
    form = await new Request("http://upload/", { method: "POST", headers: { "content-type": ct }, body: raw.text }).formData();
  } catch {
    throw invalid("The multipart body could not be read; send a `file` part and a `purpose` field.", "file");
  }
  const purpose = form.get("purpose");
  if (purpose !== "batch") throw invalid(`purpose must be "batch": the gateway's Files API holds batch input files only.`, "purpose");
  const file = form.get("file");
  if (!file || typeof file === "string") throw invalid("The `file` part is missing (send it as a file, with a filename).", "file");
  const text = await file.text();
  const bytes = Buffer.byteLength(text);
  if (bytes > BATCH_FILE_MAX_BYTES) throw new GatewayError(413, `The file is larger than ${BATCH_FILE_MAX_BYTES} bytes; split it into several batches.`, { code: "request_too_large", param: "file" });
  if (bytes === 0) throw invalid("The file is empty.", "file");
  // Text the database cannot hold (CONTRACT §8): a NUL, raw or escaped in a JSON string.
  if (text.includes("\u0000") || text.includes("\\u0000")) throw invalid("The file holds a NUL character (\\u0000), which cannot be stored; remove it.", "file");
  const filename = (file.name || "upload.jsonl").slice(0, 256);
  const row = await insertFile(ctx, {
    id: `file-${randomToken(24)}`, accountId: key.accountId, routingKeyId: key.id,
    purpose: "batch", filename, bytes, content: text, kind: "input",
  });
  return presentFile(row);
}

function pageLimit(q: Record<string, string>, def: number, max: number): number {
  const limit = q.limit === undefined ? def : Number(q.limit);
  if (!Number.isInteger(limit) || limit < 1 || limit > max) throw invalid(`limit must be an integer from 1 to ${max}.`, "limit");
  return limit;
}

function onlyQuery(q: Record<string, string>, allowed: string[]) {
  for (const k of Object.keys(q)) if (!allowed.includes(k)) throw invalid(`Unknown query parameter ${k.slice(0, 40)}: only ${allowed.join(", ")}.`, k.slice(0, 40));
}

async function listFilesRoute(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const q = queryOf(rc.request);
  onlyQuery(q, ["after", "limit", "purpose", "order"]);
  const limit = pageLimit(q, FILE_LIST_MAX, FILE_LIST_MAX);
  const after = q.after ? (plausible(q.after) ? await ownFile(ctx, key.id, q.after) : null) : null;
  if (q.after && !after) throw invalid(`after names no file of this routing key: ${q.after.slice(0, 64)}.`, "after");
  const rows = await listFiles(ctx, key.id, { after, limit: limit + 1, purpose: q.purpose ?? null });
  if (q.order === "asc") rows.reverse();
  const data = rows.slice(0, limit).map(presentFile);
  return { object: "list", data, first_id: data[0]?.id ?? "", last_id: data.at(-1)?.id ?? "", has_more: rows.length > limit };
}

async function showFile(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  return presentFile(await fileOf(ctx, rc, key));
}

async function removeFile(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const f = await fileOf(ctx, rc, key);
  if (f.kind !== "input") throw invalid("A batch's output and error files go when the batch's results expire; they cannot be deleted alone.", "id");
  await deleteFile(ctx, key.id, f.id);
  return { id: f.id, object: "file", deleted: true };
}

async function fileContent(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const f = await fileOf(ctx, rc, key);
  let text = f.content;
  if (text === null) {
    const job = f.batchId ? await getJobRow(ctx, f.batchId) : null;
    if (!job) throw noSuch("File", f.id);
    text = await renderLines(ctx, job, f.kind === "error" ? "error" : "output");
  }
  return new Response(text, { status: 200, headers: { "content-type": "application/jsonl", "content-disposition": `attachment; filename="${f.filename.replace(/["\\\r\n]/g, "_")}"` } });
}

async function submit(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const raw = (await readJsonObject(rc.request, ctx.config.MAX_REQUEST_BYTES, (m) => invalid(m))).value;
  const parsed = batchBodyDoc.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const param = String(issue.path[0] ?? "") || null;
    const hint = param === "endpoint" ? ` (one of ${BATCH_ENDPOINTS.join(", ")})` : param === "completion_window" ? ` (only "${COMPLETION_WINDOW}")` : "";
    throw invalid(`${param ?? "body"}: ${issue.message}${hint}.`, param);
  }
  const b = parsed.data;
  if (b.metadata && Object.keys(b.metadata).length > 16) throw invalid("metadata holds at most 16 key-value pairs.", "metadata");
  const input = plausible(b.input_file_id) ? await ownFile(ctx, key.id, b.input_file_id) : null;
  if (!input) throw noSuch("File", b.input_file_id);
  if (input.kind !== "input" || input.content === null) throw invalid(`File ${input.id} is a batch's output; create a batch from a file uploaded with purpose "batch".`, "input_file_id");
  const lines = parseBatchLines(input.content, b.endpoint as BatchEndpoint);
  if (key.lanes.length === 0) throw noProviders();
  const id = newId("batch");
  const deps = relayDeps(ctx);
  // Batch work (CONTRACT §9): where the key's first lane has a vendor batch API for this endpoint
  // the lines go there at its batch price, holding their worst case until it ends; else they run
  // live, each admitting itself when it runs.
  const vendorLane = vendorBatchLane(key, b.endpoint);
  const { worstUsd: worst, hold } = await admitBatchWork(deps, key, lines.length, batchWorstCase(deps, key, lines.map((l) => l.body)), vendorLane).catch((e: unknown) => {
    rc.access.noteRefusal("batch", e);
    throw e;
  });
  const vendor = vendorLane ? vendorBound(vendorLane, hold) : undefined;
  await storeHeld(deps, key, hold, () => createBatch(ctx, {
    id, accountId: key.accountId, routingKeyId: key.id, keyHash: key.hash,
    endpoint: b.endpoint, inputFileId: input.id, metadata: b.metadata ?? null, reservedUsd: worst,
  }, lines, vendor));
  if (vendor) void ctx.services.blitzJobs.nudgeVendor?.();
  else await ctx.services.blitzJobs.queue.add(id, lines.map((_, i) => i));
  return presentBatch(ctx, (await getJobRow(ctx, id))!);
}

async function batchOf(ctx: Ctx, rc: RequestContext, key: KeyContext): Promise<JobRow> {
  const id = idOf(rc, "/v1/batches/");
  const job = plausible(id) ? await getJobRow(ctx, id) : null;
  if (!job || job.kind !== "batch" || job.routingKeyId !== key.id || (job.expiresAt && job.expiresAt.getTime() < Date.now())) throw noSuch("Batch", id);
  return job;
}

async function showBatch(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  return presentBatch(ctx, await batchOf(ctx, rc, key));
}

async function listBatchesRoute(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const q = queryOf(rc.request);
  onlyQuery(q, ["after", "limit"]);
  const limit = pageLimit(q, LIST_DEFAULT, LIST_MAX);
  let after: JobRow | null = null;
  if (q.after) {
    after = plausible(q.after) ? await getJobRow(ctx, q.after) : null;
    if (!after || after.routingKeyId !== key.id || after.kind !== "batch") throw invalid(`after names no batch of this routing key: ${q.after.slice(0, 64)}.`, "after");
  }
  const rows = await listBatches(ctx, key.id, after, limit + 1);
  const data = await Promise.all(rows.slice(0, limit).map((r) => presentBatch(ctx, r)));
  return { object: "list", data, ...(data.length ? { first_id: data[0]!.id, last_id: data.at(-1)!.id } : {}), has_more: rows.length > limit };
}

async function cancel(ctx: Ctx, rc: RequestContext) {
  const key = await keyOf(ctx, rc);
  const job = await batchOf(ctx, rc, key);
  const after = await cancelJob(ctx, job.id);
  if (after) for (const f of ctx.services.blitzJobs.onEnded) f(after);
  return presentBatch(ctx, (await getJobRow(ctx, job.id)) ?? job);
}

