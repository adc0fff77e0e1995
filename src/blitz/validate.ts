// Validation of a /blitz body (CONTRACT §6): `{model, prompts: [string | {messages}], ...shared chat
// parameters}`. Every refusal is a 400 `bad_request` whose message names the field, so a client can
// fix the batch without guessing. A valid body becomes one chat-completions body per prompt, in
// prompt order, each carrying the shared parameters.
import { badRequest, GatewayError } from "../errors.ts";
import type { ChatRequest, Json } from "../protocols/types.ts";
import { checkOutputAsk } from "../money/request-checks.ts";

export const BLITZ_MAX_PROMPTS = 50;

export interface BlitzBatch {
  model: string;
  /** One non-streaming chat body per prompt, in prompt order. */
  requests: ChatRequest[];
  /** `"stream": true`: results as server-sent events, one per prompt as it finishes (CONTRACT §8). */
  stream: boolean;
}

const isObject = (v: unknown): v is Json => v !== null && typeof v === "object" && !Array.isArray(v);
const describe = (v: unknown) => (v === null ? "null" : Array.isArray(v) ? "an array" : typeof v);

type Check = (v: unknown) => string | null;
const number: Check = (v) => (typeof v === "number" && Number.isFinite(v) ? null : "must be a number");
const between = (lo: number, hi: number): Check => (v) =>
  number(v) ?? ((v as number) >= lo && (v as number) <= hi ? null : `must be between ${lo} and ${hi}`);
const positiveInt: Check = (v) => (Number.isInteger(v) && (v as number) >= 1 ? null : "must be a positive integer");
const integer: Check = (v) => (Number.isInteger(v) ? null : "must be an integer");
const string: Check = (v) => (typeof v === "string" ? null : "must be a string");
const boolean: Check = (v) => (typeof v === "boolean" ? null : "must be a boolean");
const object: Check = (v) => (isObject(v) ? null : "must be an object");
const stringOrObject: Check = (v) => (typeof v === "string" || isObject(v) ? null : "must be a string or an object");
const stop: Check = (v) =>
  typeof v === "string" || (Array.isArray(v) && v.every((s) => typeof s === "string")) ? null : "must be a string or an array of strings";
const arrayOfObjects: Check = (v) =>
  Array.isArray(v) && v.every(isObject) ? null : "must be an array of objects";

/**
 * Shared chat parameters whose type is checked up front: a wrong type here would otherwise fail
 * all prompts one by one upstream. Unknown parameters ride along untouched, as on chat.
 */
const SHARED_CHECKS: Record<string, Check> = {
  temperature: between(0, 2),
  top_p: between(0, 1),
  presence_penalty: between(-2, 2),
  frequency_penalty: between(-2, 2),
  max_tokens: positiveInt,
  max_completion_tokens: positiveInt,
  n: positiveInt,
  seed: integer,
  stop,
  tools: arrayOfObjects,
  tool_choice: stringOrObject,
  parallel_tool_calls: boolean,
  response_format: object,
  user: string,
  reasoning_effort: string,
  logprobs: boolean,
  top_logprobs: integer,
  metadata: object,
};

/** Fields of the batch that are not chat parameters and never reach a prompt's body. */
const BATCH_ONLY = new Set(["prompts", "model", "stream"]);

function checkParams(fields: Json, where: string): void {
  // The batch streams (top level) or not; a single prompt cannot: its answer is one event.
  if (where !== "" && fields.stream !== undefined) {
    throw badRequest(`${where}stream is not accepted: each prompt's answer is one whole result; set "stream": true at the top level to receive results as they finish.`);
  }
  if (fields.stream !== undefined && typeof fields.stream !== "boolean") throw badRequest(`${where}stream must be a boolean.`);
  if (fields.stream_options !== undefined) {
    throw badRequest(`${where}stream_options is not accepted on /blitz: each prompt's usage is in its result; remove it.`);
  }
  for (const [name, check] of Object.entries(SHARED_CHECKS)) {
    if (fields[name] === undefined) continue;
    const problem = check(fields[name]);
    if (problem) throw badRequest(`${where}${name} ${problem} (got ${describe(fields[name])}${typeof fields[name] === "number" ? ` ${fields[name]}` : ""}).`);
  }
}

function checkMessages(messages: unknown, field: string): Json[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw badRequest(`${field} must be a non-empty array of message objects (got ${Array.isArray(messages) ? "an empty array" : describe(messages)}).`);
  }
  messages.forEach((m, j) => {
    if (!isObject(m)) throw badRequest(`${field}[${j}] must be a message object like {"role": "user", "content": "..."} (got ${describe(m)}).`);
    if (typeof m.role !== "string" || m.role === "") throw badRequest(`${field}[${j}].role must be a non-empty string such as "user" or "system".`);
  });
  return messages as Json[];
}

/** Checks a parsed /blitz body and expands it to one chat body per prompt. Throws 400 bad_request. */
export function parseBlitzBody(body: Json, limit: { max: number; path: string } = { max: BLITZ_MAX_PROMPTS, path: "/blitz" }): BlitzBatch {
  const max = limit.max;
  if (body.model === undefined) throw badRequest("model is required: name the model every prompt of the batch runs on.");
  if (typeof body.model !== "string" || body.model.trim() === "") throw badRequest(`model must be a non-empty string (got ${describe(body.model)}).`);
  if (body.messages !== undefined) {
    throw badRequest("messages is not a /blitz field: put each conversation in prompts[i].messages, or send a plain string per prompt.");
  }
  const prompts = body.prompts;
  if (prompts === undefined) throw badRequest(`prompts is required: an array of 1 to ${max} prompts, each a string or {"messages": [...]}.`);
  if (!Array.isArray(prompts)) throw badRequest(`prompts must be an array of 1 to ${max} prompts (got ${describe(prompts)}).`);
  if (prompts.length === 0) throw badRequest(`prompts is empty: send 1 to ${max} prompts.`);
  if (prompts.length > max) {
    throw badRequest(`prompts has ${prompts.length} entries; a ${limit.path} request takes at most ${max}. Split the batch into several requests${limit.path === "/blitz" ? ", or submit it as one job with POST /blitz/jobs (up to 10,000)" : ""}.`);
  }
  checkParams(body, "");

  const shared: Json = {};
  for (const [k, v] of Object.entries(body)) if (!BATCH_ONLY.has(k)) shared[k] = v;

  const requests = prompts.map((p: unknown, i: number): ChatRequest => withOneOutputLimit(expand(p, i), i));
  return { model: body.model, requests, stream: body.stream === true };

  function expand(p: unknown, i: number): ChatRequest {
    const field = `prompts[${i}]`;
    if (typeof p === "string") {
      if (p.trim() === "") throw badRequest(`${field} is an empty string; send the prompt text or {"messages": [...]}.`);
      return { ...shared, model: body.model, messages: [{ role: "user", content: p }], stream: false };
    }
    if (!isObject(p)) throw badRequest(`${field} must be a string or an object {"messages": [...]} (got ${describe(p)}).`);
    const messages = checkMessages(p.messages, `${field}.messages`);
    if (p.model !== undefined) throw badRequest(`${field}.model is not accepted: every prompt of a batch runs on the top-level model.`);
    if (p.prompts !== undefined) throw badRequest(`${field}.prompts is not accepted: batches do not nest.`);
    // A prompt object may override shared parameters for itself (e.g. its own max_tokens).
    checkParams(p, `${field}.`);
    const own: Json = {};
    for (const [k, v] of Object.entries(p)) if (k !== "messages" && k !== "stream") own[k] = v;
    return { ...shared, ...own, model: body.model, messages, stream: false };
  }
}

/** A prompt's limit fields must agree: its reservation reads them (CONTRACT §7). */
function withOneOutputLimit(request: ChatRequest, i: number): ChatRequest {
  try {
    checkOutputAsk(request, "chat");
  } catch (e) {
    throw e instanceof GatewayError ? badRequest(`prompts[${i}]: ${e.message}`) : e;
  }
  return request;
}
