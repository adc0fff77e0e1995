// The subscription's live model catalog (`GET {SUB_API_BASE_URL}/models`) and the tier aliases
// resolved against it at request time (CONTRACT §4, §8): `flagship`, `mini`, `sub/flagship`,
// `sub/mini`. A catalog entry carrying `tier: "flagship"|"mini"` wins; otherwise flagship is the
// first listed id without "mini" and mini the first id containing it. Catalogs are cached per
// session for CATALOG_CACHE_MS, and concurrent fetches for one session share one call.
import type { AdapterEnv } from "../env.ts";
import { subJson } from "./client.ts";
import { laneFailure } from "./failure.ts";
import { CATALOG_CACHE_MS, type CatalogEntry, type Tier } from "./state.ts";

export type { CatalogEntry, Tier } from "./state.ts";

const TIER_ALIASES: Record<string, Tier> = {
  flagship: "flagship",
  mini: "mini",
  "sub/flagship": "flagship",
  "sub/mini": "mini",
};

/** The lane-prefixed tier aliases, listed in the general catalog (SPEC Model entry). */
export const SUB_CATALOG_ALIASES = Object.keys(TIER_ALIASES).filter((k) => k.startsWith("sub/"));

/** The tier a model name asks for, or null when it names a model. */
export function tierOf(model: string): Tier | null {
  // Own properties only: a model named `constructor` or `toString` is a model, not a tier.
  return Object.hasOwn(TIER_ALIASES, model) ? TIER_ALIASES[model]! : null;
}

/** Catalog entries of an answer in the OpenAI list shape (`data[].id`), or `models[].slug|id`. */
export function parseCatalog(body: unknown): CatalogEntry[] {
  const b = body as { data?: unknown; models?: unknown } | null;
  const list = Array.isArray(b?.data) ? b.data : Array.isArray(b?.models) ? b.models : [];
  const out: CatalogEntry[] = [];
  const now = Math.floor(Date.now() / 1000);
  for (const raw of list as Array<Record<string, unknown>>) {
    const id = typeof raw?.id === "string" ? raw.id : typeof raw?.slug === "string" ? raw.slug : null;
    if (!id) continue;
    const e: CatalogEntry = {
      id,
      created: typeof raw.created === "number" ? raw.created : now,
      owned_by: typeof raw.owned_by === "string" ? raw.owned_by : "sub",
    };
    if (raw.tier === "flagship" || raw.tier === "mini") e.tier = raw.tier;
    out.push(e);
  }
  return out;
}

/** The model id a tier resolves to in `entries`, or null when the catalog has none. */
export function pickTier(entries: CatalogEntry[], tier: Tier): string | null {
  const tagged = entries.find((e) => e.tier === tier);
  if (tagged) return tagged.id;
  const isMini = (e: CatalogEntry) => e.id.toLowerCase().includes("mini");
  const found = tier === "mini" ? entries.find(isMini) : entries.find((e) => !isMini(e));
  return found?.id ?? null;
}

/** The session's live catalog (cached briefly). A failed fetch is a lane failure. */
export async function liveCatalog(ctx: AdapterEnv, sessionId: string): Promise<CatalogEntry[]> {
  const st = ctx.services.subLanes;
  const hit = st.catalog.get(sessionId);
  if (hit && Date.now() - hit.at < CATALOG_CACHE_MS) return hit.entries;
  let p = st.catalogPending.get(sessionId);
  if (!p) {
    p = subJson(ctx, sessionId, "/models")
      .then((body) => {
        const entries = parseCatalog(body);
        st.catalog.set(sessionId, { entries, at: Date.now() });
        return entries;
      })
      .finally(() => st.catalogPending.delete(sessionId));
    st.catalogPending.set(sessionId, p);
  }
  return p;
}

/** The upstream model for `model` on this session: tier aliases resolved, `sub/` dropped. */
export async function resolveSubModel(ctx: AdapterEnv, sessionId: string, model: string): Promise<string> {
  const tier = tierOf(model);
  if (!tier) return model.startsWith("sub/") ? model.slice(4) : model;
  const id = pickTier(await liveCatalog(ctx, sessionId), tier);
  if (!id) throw laneFailure(`The subscription's live catalog lists no ${tier} model, so \`${model}\` cannot be resolved.`);
  return id;
}

/**
 * The session's live catalog, each model with the tier alias it answers to (or null), for the
 * sub-session view (CONTRACT §4). Throws as liveCatalog does when the backend cannot be read.
 */
export async function tieredCatalog(ctx: AdapterEnv, sessionId: string): Promise<Array<{ id: string; tier: Tier | null }>> {
  const entries = await liveCatalog(ctx, sessionId);
  const flagship = pickTier(entries, "flagship");
  const mini = pickTier(entries, "mini");
  return entries.map((e) => ({ id: e.id, tier: e.id === flagship ? "flagship" : e.id === mini ? "mini" : null }));
}
