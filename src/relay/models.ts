// GET /v1/models: without a key, the general catalog (SPEC: general model names plus the lane
// aliases: the first-party model names the API-key providers list, without the `vendor/model`
// paths of the hosting routers, which repeat them hundreds of times); with a routing key, what that key's lanes can
// really be called with, live sub catalogs and bridge lists included (CONTRACT §4, §8; see
// laneModels). GET /v1/models/{id} answers from the same list. Object-list shape as OpenAI's.
import type { RelayDeps } from "./relay-deps.ts";
import { GatewayError } from "../errors.ts";
import { bearer } from "../http/request.ts";
import { allAdapters, getAdapter } from "../providers/registry.ts";
import type { ResolvedLane } from "../providers/types.ts";
import { resolveRoutingKey, type KeyContext } from "./auth.ts";
import { catalogProvider } from "../money/pricing.ts";
import { isRetiredModel } from "./retired-models.ts";

interface ModelEntry {
  id: string;
  object: "model";
  created: number;
  owned_by: string;
}

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

/** A provider's catalog models a client can call today: real ids, none its vendor retired. */
function catalogModels(pricingId: string): string[] {
  return catalogProvider({ providerId: pricingId })?.models.map((m) => m.id).filter((id) => isRealModelId(id) && !isRetiredModel(id)) ?? [];
}

/** A general model name: not a router's `vendor/model` path (those are listed with a key that has such a lane). */
const isGeneralName = (id: string) => !id.includes("/");
/** Routers resell the other vendors' models under their own names: listed with a key that has such a lane only. */
const ROUTERS = new Set(["openrouter"]);

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
    if (a.kind === "api_key" && !ROUTERS.has(a.id)) for (const id of catalogModels(a.pricingId ?? a.id)) if (isGeneralName(id)) pairs.push([id, a.id]);
  }
  // Lane aliases come after every provider's models, owned by the lane kind (SPEC Model entry).
  for (const a of allAdapters()) for (const id of a.catalogAliases ?? []) pairs.push([id, a.kind]);
  general = { created, data: entries(pairs, created) };
  return general.data;
}

/**
 * GET /v1/models/{model}: the model object from the same list GET /v1/models answers (the
 * caller's key's models with a key, the general catalog without), or OpenAI's 404 model_not_found.
 */
export async function retrieveModel(ctx: RelayDeps, request: Request, created: number): Promise<object> {
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

/**
 * What one lane can really be called with, as [id, owner] pairs (CONTRACT §4, §8): the adapter's
 * own list when it has one (sub: live catalog and the tier aliases it resolves; bridge: what the
 * bridge lists), else the lane's model, or else the provider's catalog models.
 */
async function laneModels(ctx: RelayDeps, lane: ResolvedLane, signal: AbortSignal): Promise<[string, string][]> {
  const a = getAdapter(lane.provider);
  if (!a) return [];
  let ids: string[];
  if (a.models) {
    try {
      ids = await a.models(ctx, lane, signal);
    } catch (e) {
      // Adapters answer [] for what they cannot reach; a throw is a bug, and still no 500 here.
      ctx.log.warn({ provider: lane.provider, err: e instanceof Error ? e.message : String(e) }, "lane model list unavailable");
      ids = [];
    }
  } else {
    ids = lane.model ? [lane.model] : catalogModels(a.pricingId ?? a.id);
  }
  return ids.map((id) => [id, lane.provider]);
}

/** The models a key's lanes can be called with, as [id, owner] pairs in lane order (ids repeat across lanes). */
export async function keyModels(ctx: RelayDeps, key: KeyContext, signal: AbortSignal): Promise<[string, string][]> {
  // Lanes are asked at once; the list keeps the key's lane order.
  const perLane = await Promise.all(key.lanes.map((lane) => laneModels(ctx, lane, signal)));
  return perLane.flat();
}

export async function listModels(ctx: RelayDeps, request: Request, created: number): Promise<object> {
  if (bearer(request) === null) return { object: "list", data: generalCatalog(created) };
  const key = await resolveRoutingKey(ctx, request);
  return { object: "list", data: entries(await keyModels(ctx, key, request.signal), created) };
}
