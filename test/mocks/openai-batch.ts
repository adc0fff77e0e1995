// OpenAI's Batch API on the mock upstream (https://platform.openai.com/docs/guides/batch):
//   POST /v1/files (multipart, purpose=batch) → a file object
//   POST /v1/batches {input_file_id, endpoint, completion_window: "24h"} → a batch, status validating
//   GET  /v1/batches/{id} → validating → in_progress → finalizing → completed (one step per poll),
//        or expired (expire: true) / cancelling → cancelled
//   GET  /v1/files/{id}/content → the output (or error) file: JSONL of
//        {id, custom_id, response: {status_code, request_id, body} | null, error: {code, message} | null}
//   POST /v1/batches/{id}/cancel
// Each line is answered by the mock's own handler of its url (`answer`: chat, Responses or
// embeddings), so a line's `mock` behaviour
// (status: 500, …) fails that line alone: a partial failure, written to the error file.
import { json } from "./scaffold.ts";

export interface BatchMockOptions {
  /** The batch expires at its next poll after in_progress: lines not yet answered go to the error file as batch_expired. */
  expire?: boolean;
  /** Lines answered before an expiry (default 0). */
  answerBeforeExpiry?: number;
  /** Batches stay in_progress while this is set (a long-running vendor batch). */
  hold?: boolean;
  /** The output file's first line is not JSON (a vendor echoing garbage), and a line of garbage is added. */
  garble?: boolean;
  /** The output file repeats its first line, and the error file names that line's id again (a vendor reporting a line twice). */
  duplicate?: boolean;
}

interface MockFile { id: string; purpose: string; filename: string; bytes: number; text: string; created_at: number }
interface MockBatch {
  id: string; input_file_id: string; endpoint: string; completion_window: string; status: string;
  output_file_id: string | null; error_file_id: string | null; created_at: number; polls: number;
  request_counts: { total: number; completed: number; failed: number }; metadata: unknown;
}

export interface OpenAIBatchMock {
  /** Answers a batch route, or null for any other path. */
  handle(req: Request, path: string): Promise<Response | null>;
  files: Map<string, MockFile>;
  batches: Map<string, MockBatch>;
  /** Uploads received (purpose=batch files). */
  uploads: number;
  setOptions(o: BatchMockOptions): void;
}

const err = (message: string, status: number, code: string | null = null) =>
  json({ error: { message, type: "invalid_request_error", param: null, code } }, status);

export function openaiBatchMock(answer: (body: any, url: string) => { status: number; body: unknown }): OpenAIBatchMock {
  const files = new Map<string, MockFile>();
  const batches = new Map<string, MockBatch>();
  let opts: BatchMockOptions = {};
  let seq = 0;
  const now = () => Math.floor(Date.now() / 1000);
  const mock: OpenAIBatchMock = {
    files, batches, uploads: 0,
    setOptions(o) { opts = { ...o }; },
    async handle(req, path) {
      if (req.method === "POST" && path === "/v1/files") {
        const form = await req.formData().catch(() => null);
        const purpose = form?.get("purpose");
        const file = form?.get("file");
        if (!form || typeof purpose !== "string" || !(file instanceof Blob)) return err("A multipart body with purpose and file is required.", 400);
        if (purpose !== "batch") return err(`This mock accepts purpose 'batch', got '${purpose}'.`, 400);
        const text = await file.text();
        const f: MockFile = { id: `file-mock${++seq}`, purpose, filename: (file as File).name ?? "input.jsonl", bytes: text.length, text, created_at: now() };
        files.set(f.id, f);
        mock.uploads++;
        return json({ id: f.id, object: "file", bytes: f.bytes, created_at: f.created_at, filename: f.filename, purpose });
      }
      if (req.method === "POST" && path === "/v1/batches") {
        const body = (await req.json().catch(() => null)) as any;
        if (!body || typeof body.input_file_id !== "string") return err("input_file_id is required.", 400);
        const f = files.get(body.input_file_id);
        if (!f) return err(`No such File object: ${body.input_file_id}`, 404);
        if (body.completion_window !== "24h") return err("completion_window must be '24h'.", 400);
        if (!["/v1/chat/completions", "/v1/responses", "/v1/embeddings", "/v1/completions"].includes(body.endpoint)) return err("Unsupported endpoint.", 400);
        const total = f.text.split("\n").filter((l) => l.trim()).length;
        const b: MockBatch = {
          id: `batch_mock${++seq}`, input_file_id: f.id, endpoint: body.endpoint, completion_window: "24h", status: "validating",
          output_file_id: null, error_file_id: null, created_at: now(), polls: 0, request_counts: { total, completed: 0, failed: 0 }, metadata: body.metadata ?? null,
        };
        batches.set(b.id, b);
        return json(present(b));
      }
      const m = /^\/v1\/batches\/([^/]+)(\/cancel)?$/.exec(path);
      if (m) {
        const b = batches.get(m[1]!);
        if (!b) return err(`No such batch: ${m[1]}`, 404);
        if (req.method === "POST" && m[2]) {
          if (["validating", "in_progress", "finalizing"].includes(b.status)) b.status = "cancelling";
          return json(present(b));
        }
        if (req.method === "GET" && !m[2]) {
          advance(b);
          return json(present(b));
        }
      }
      const c = /^\/v1\/files\/([^/]+)\/content$/.exec(path);
      if (c && req.method === "GET") {
        const f = files.get(c[1]!);
        if (!f) return err(`No such File object: ${c[1]}`, 404);
        return new Response(f.text, { headers: { "content-type": "application/octet-stream" } });
      }
      return null;
    },
  };

  function present(b: MockBatch) {
    const { polls: _p, ...rest } = b;
    return { object: "batch", errors: null, ...rest };
  }

  function writeFile(lines: string[], purpose: string): string | null {
    if (!lines.length) return null;
    const text = lines.join("\n") + "\n";
    const f: MockFile = { id: `file-mock${++seq}`, purpose, filename: `${purpose}.jsonl`, bytes: text.length, text, created_at: now() };
    files.set(f.id, f);
    return f.id;
  }

  /** Runs the batch's lines (all, or the first `limit`): answered lines to the output file, failed ones and the rest to the error file. */
  function finish(b: MockBatch, limit: number | null, restCode: string | null) {
    const lines = files.get(b.input_file_id)!.text.split("\n").filter((l) => l.trim());
    const out: string[] = [];
    const errs: string[] = [];
    lines.forEach((line, i) => {
      let parsed: any;
      try { parsed = JSON.parse(line); } catch { errs.push(JSON.stringify({ id: `batch_req_${b.id}_${i}`, custom_id: null, response: null, error: { code: "invalid_json_line", message: "This line is not valid JSON." } })); return; }
      const id = `batch_req_${b.id}_${i}`;
      if (limit !== null && i >= limit) {
        const message = restCode === "batch_expired" ? "This request could not be executed before the completion window expired." : "This request was cancelled before it was executed.";
        errs.push(JSON.stringify({ id, custom_id: parsed.custom_id, response: null, error: { code: restCode, message } }));
        return;
      }
      const a = answer(parsed.body, String(parsed.url ?? b.endpoint));
      const row = JSON.stringify({ id, custom_id: parsed.custom_id, response: { status_code: a.status, request_id: `req_${id}`, body: a.body }, error: null });
      if (a.status >= 200 && a.status < 300) { out.push(row); b.request_counts.completed++; } else { errs.push(row); b.request_counts.failed++; }
    });
    if (opts.duplicate && out.length) {
      const first = JSON.parse(out[0]!);
      out.push(out[0]!);
      errs.push(JSON.stringify({ id: first.id, custom_id: first.custom_id, response: null, error: { code: "server_error", message: "reported twice" } }));
    }
    if (opts.garble && out.length) out.splice(0, 1, '{"custom_id": "0", "response": {"status_code": 200, "bo', "\u0000 not json at all");
    if (limit !== null) b.request_counts.failed += Math.max(0, lines.length - limit);
    b.output_file_id = writeFile(out, "batch_output");
    b.error_file_id = writeFile(errs, "batch_error");
  }

  function advance(b: MockBatch) {
    b.polls++;
    if (b.status === "validating") b.status = "in_progress";
    else if (b.status === "in_progress") {
      if (opts.hold) return;
      if (opts.expire) { finish(b, opts.answerBeforeExpiry ?? 0, "batch_expired"); b.status = "expired"; }
      else b.status = "finalizing";
    } else if (b.status === "finalizing") { finish(b, null, null); b.status = "completed"; }
    else if (b.status === "cancelling") { finish(b, 0, "batch_cancelled"); b.status = "cancelled"; }
  }
  return mock;
}
