// GET /v1/models: without a key, the general catalog (every model the pricing catalog lists for
// the API-key providers, plus the lane aliases); with a routing key, what that key's lanes
// serve. Object-list shape as OpenAI's.
import type { Ctx } from "../context.ts";
import { GatewayError } from "../errors.ts";
import { bearer } from "../http/request.ts";
import { allAdapters, getAdapter } from "../providers/registry.ts";
import { resolveRoutingKey } from "./auth.ts";
import { catalogProvider } from "./pricing.ts";

interface ModelEntry {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
}

/** Lane aliases by lane kind (SPEC Model entry). */
const KIND_ALIASES: Record<string, string[]> = { sub: ["sub/flagship", "sub/mini"], bridge: ["bridge/coding-agent"] };

/**
 * True for a model id a client can send. The pricing catalog also holds patterns and fragments
 * (`ft:gpt-3.5-turbo-`, `gpt-4o-mini-2024-07-18.ft-`, `gpt-4o:extended`) that match families of
 * ids; they are not models and never listed (CONTRACT §8).
 */
export function isRealModelId(id: string): boolean {
  if (!id || /[-.:/_]$/.test(id)) return false;
  if (id.startsWith("ft:") || id.includes(".ft-")) return false;
  // A `:` tag is a variant suffix (`:extended`, `:free`), except Bedrock-style versions (`…-v1:0`).
  return !id.includes(":") || /-v\d+:\d+$/.test(id);
}

function catalogModels(pricingId: string): string[] {
  return catalogProvider({ providerId: pricingId })?.models.map((m) => m.id).filter(isRealModelId) ?? [];
}

function entries(pairs: Iterable<[string, string]>, created: number): ModelEntry[] {
  const seen = new Set<string>();
  const out: ModelEntry[] = [];
  for (const [id, owner] of pairs) {
    if (seen.has(id)) continue;
    seen.add(id);
    out.push({ id, object: "model", created, owned_by: owner });
  }
  return out;
}

let general: { created: number; data: ModelEntry[] } | null = null;

function generalCatalog(created: number): ModelEntry[] {
  if (general) return general.data;
  const pairs: [string, string][] = [];
  for (const a of allAdapters()) {
    if (a.kind === "api_key") for (const id of catalogModels(a.pricingId ?? a.id)) pairs.push([id, a.id]);
  }
  for (const [kind, ids] of Object.entries(KIND_ALIASES)) for (const id of ids) pairs.push([id, kind]);
  general = { created, data: entries(pairs, created) };
  return general.data;
}

/**
 * GET /v1/models/{model}: the model object from the same list GET /v1/models answers (the
 * caller's key's models with a key, the general catalog without), or OpenAI's 404 model_not_found.
 */
export async function retrieveModel(ctx: Ctx, request: Request, created: number): Promise<object> {
  const raw = new URL(request.url).pathname.slice("/v1/models/".length);
  let id: string;
  try {
    id = decodeURIComponent(raw);
  } catch {
    id = raw;
  }
  const list = (await listModels(ctx, request, created)) as { data: ModelEntry[] };
  const hit = list.data.find((m) => m.id === id);
  if (hit) return hit;
  throw new GatewayError(404, `The model \`${id.slice(0, 200)}\` does not exist or you do not have access to it.`, { code: "model_not_found", type: "invalid_request_error", param: "model" });
}

export async function listModels(ctx: Ctx, request: Request, created: number): Promise<object> {
  if (bearer(request) === null) return { object: "list", data: generalCatalog(created) };
  const key = await resolveRoutingKey(ctx, request);
  const pairs: [string, string][] = [];
  const kinds = new Set<string>();
  for (const lane of key.lanes) {
    const a = getAdapter(lane.provider);
    if (!a) continue;
    kinds.add(a.kind);
    if (lane.model) {
      pairs.push([lane.model, lane.provider]);
      continue;
    }
    let ids: string[] | null = null;
    if (a.models) {
      try {
        ids = await a.models(ctx, lane, request.signal);
      } catch (e) {
        ctx.log.warn({ provider: lane.provider, err: e instanceof Error ? e.message : String(e) }, "lane model list unavailable; using the catalog");
      }
    }
    for (const id of ids ?? catalogModels(a.pricingId ?? a.id)) pairs.push([id, lane.provider]);
  }
  for (const kind of kinds) for (const id of KIND_ALIASES[kind] ?? []) pairs.push([id, kind]);
  return { object: "list", data: entries(pairs, created) };
}
