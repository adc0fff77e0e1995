// What a request must say plainly for its money to be knowable before it goes upstream
// (CONTRACT §7 and §8). Run on every inference request, budget or not, after the body is read
// and before admission (400 outranks 402):
//   - one output limit: limit fields that contradict each other are refused, naming the field,
//     since lanes read different ones (a Responses client's `max_output_tokens` becomes an
//     Anthropic lane's `max_tokens`) and a decoy would otherwise set the reservation;
//   - a choice count (`n`) that is a positive integer: every choice is generated and billed;
//   - no server-side work the gateway cannot observe: Responses `background: true` (the real
//     generation would run after the answer, outside any record), and on a key with a budget no
//     `previous_response_id` / `conversation` (stored context of a size no reservation can see).
import { GatewayError } from "../errors.ts";
import type { ClientShape, Json } from "../protocols/types.ts";
import { LIMIT_NAMES } from "./output-limits.ts";

const refuse = (message: string, param: string) => new GatewayError(400, message, { code: "bad_request", param });

/** Each shape's own limit field first: the one named as the reference when another contradicts it. */
const OWN_LIMIT: Record<ClientShape, string> = {
  chat: "max_completion_tokens",
  responses: "max_output_tokens",
  anthropic: "max_tokens",
  embeddings: "max_tokens",
  gemini: "generationConfig.maxOutputTokens",
};

const present = (v: unknown) => v !== undefined && v !== null;

/** Throws 400 naming the field when the request's output limit or choice count is unclear. */
export function checkOutputAsk(body: Json, shape: ClientShape): void {
  if (shape === "embeddings") return;
  if (shape === "gemini") return checkGeminiAsk(body);
  let ref: { field: string; value: number } | null = null;
  const order = [OWN_LIMIT[shape], ...LIMIT_NAMES.filter((f) => f !== OWN_LIMIT[shape])];
  for (const f of order) {
    const v = body[f];
    if (!present(v)) continue;
    if (typeof v !== "number" || !Number.isInteger(v) || v < 1) throw refuse(`\`${f}\` must be a positive integer.`, f);
    if (!ref) ref = { field: f, value: v };
    else if (v !== ref.value) {
      throw refuse(`\`${f}\` (${v}) contradicts \`${ref.field}\` (${ref.value}): the output limit decides what the request may cost, so send one output limit (or the same value in both).`, f);
    }
  }
  const n = body.n;
  if (present(n) && (typeof n !== "number" || !Number.isInteger(n) || n < 1)) throw refuse("`n` must be a positive integer (each choice is generated and billed).", "n");
}

/** A Gemini request keeps its limit and its candidate count in generationConfig: one of each, by construction. */
function checkGeminiAsk(body: Json): void {
  const gc = body.generationConfig;
  if (!gc || typeof gc !== "object") return;
  for (const f of ["maxOutputTokens", "candidateCount"]) {
    const v = gc[f];
    if (present(v) && (typeof v !== "number" || !Number.isInteger(v) || v < 1)) throw refuse(`\`generationConfig.${f}\` must be a positive integer.`, `generationConfig.${f}`);
  }
}

/** Throws 400 for server-side state the gateway cannot observe or size (CONTRACT §8). */
export function checkServerState(body: Json, shape: ClientShape, budgeted: boolean): void {
  if (shape !== "responses") return;
  if (present(body.background) && body.background !== false) {
    throw refuse("`background` mode is not supported: the gateway cannot observe or account for work that runs after it answered. Send the request without `background` (stream it if it is long).", "background");
  }
  if (!budgeted) return;
  for (const f of ["previous_response_id", "conversation"]) {
    if (present(body[f])) {
      throw refuse(`\`${f}\` is refused on a routing key with a monthly budget: the stored context it pulls in has a size the gateway cannot see or reserve for. Send the context instead: the whole conversation in \`input\`.`, f);
    }
  }
}
