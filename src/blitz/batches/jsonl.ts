// The input file of a batch (OpenAI's Batch API request input): one JSON object per line,
// `{custom_id, method: "POST", url, body}`, every line calling the batch's endpoint. Checked
// whole when the batch is created, so a batch that is accepted holds only lines that can run;
// each refusal names the line, as OpenAI's validation does.
import { GatewayError } from "../../errors.ts";
import { MAX_JSON_DEPTH, nestsDeeperThan } from "../../http/body.ts";
import type { Json } from "../../protocols/types.ts";

/** The endpoints a batch line may call: the gateway's own inference endpoints that answer JSON. */
export const BATCH_ENDPOINTS = ["/v1/chat/completions", "/v1/responses", "/v1/embeddings"] as const;
export type BatchEndpoint = (typeof BATCH_ENDPOINTS)[number];

/** At most this many lines per batch (OpenAI's limit). */
export const BATCH_MAX_LINES = 50_000;
const CUSTOM_ID_MAX = 512;

export interface BatchLine {
  customId: string;
  body: Json;
}

const invalid = (message: string, param = "input_file_id") => new GatewayError(400, message, { param });

/** The lines of `text` for `endpoint`, or 400 naming the first line that cannot run. */
export function parseBatchLines(text: string, endpoint: BatchEndpoint): BatchLine[] {
  const lines: BatchLine[] = [];
  const seen = new Set<string>();
  let n = 0;
  for (const raw of text.split("\n")) {
    n++;
    const line = raw.trim();
    if (line === "") continue;
    if (lines.length >= BATCH_MAX_LINES) throw invalid(`The input file has more than ${BATCH_MAX_LINES} requests; split it into several batches.`);
    const at = `Line ${n} of the input file`;
    if (nestsDeeperThan(line, MAX_JSON_DEPTH)) throw invalid(`${at} nests JSON deeper than ${MAX_JSON_DEPTH} levels.`);
    let v: unknown;
    try {
      v = JSON.parse(line);
    } catch {
      throw invalid(`${at} is not valid JSON; each line must be one JSON object {custom_id, method, url, body}.`);
    }
    if (!v || typeof v !== "object" || Array.isArray(v)) throw invalid(`${at} is not a JSON object {custom_id, method, url, body}.`);
    const o = v as Json;
    if (typeof o.custom_id !== "string" || o.custom_id === "" || o.custom_id.length > CUSTOM_ID_MAX) throw invalid(`${at}: custom_id must be a string of 1 to ${CUSTOM_ID_MAX} characters.`);
    if (seen.has(o.custom_id)) throw invalid(`${at}: custom_id ${JSON.stringify(o.custom_id.slice(0, 64))} is used by an earlier line; each request of a batch needs its own.`);
    seen.add(o.custom_id);
    if (o.method !== "POST") throw invalid(`${at}: method must be "POST".`);
    if (o.url !== endpoint) throw invalid(`${at}: url is ${JSON.stringify(String(o.url).slice(0, 64))}, but every line of this batch must call its endpoint ${endpoint}.`);
    const body = o.body;
    if (!body || typeof body !== "object" || Array.isArray(body)) throw invalid(`${at}: body must be the JSON object of a ${endpoint} request.`);
    const b = body as Json;
    if (typeof b.model !== "string" || b.model === "") throw invalid(`${at}: body.model is required.`);
    if (b.stream === true) throw invalid(`${at}: body.stream must not be true; a batch's answers are read from its output file.`);
    if (endpoint === "/v1/chat/completions" && !Array.isArray(b.messages)) throw invalid(`${at}: body.messages is required.`);
    if (endpoint !== "/v1/chat/completions" && b.input === undefined) throw invalid(`${at}: body.input is required.`);
    lines.push({ customId: o.custom_id, body: b });
  }
  if (lines.length === 0) throw invalid("The input file holds no requests; write one JSON object per line.");
  return lines;
}
