// What a bridge serves: `GET {base_url}/v1/models` (OpenAI list shape), called through the same
// SSRF-pinned, no-redirect path and with the same bearer token as its inference calls. Used by
// GET /v1/models with a key (CONTRACT §4, §8) and to resolve the `bridge/coding-agent` alias to a
// model the bridge serves. Lists are cached per bridge briefly (a failure too, for less time) and
// concurrent reads share one call, so the model list stays cheap and a dead bridge costs one
// short timeout per few seconds, never a 500.
import type { AdapterEnv } from "../env.ts";
import type { ResolvedLane } from "../types.ts";
import { bridgeFetch } from "./connect.ts";
import { MAX_UPSTREAM_SMALL_BYTES, readJsonCapped } from "../../net/read-capped.ts";

/** The bridge lane kind's alias (SPEC Model entry): the model the bridge serves. */
export const BRIDGE_ALIAS = "bridge/coding-agent";

/** How long a bridge's model list is reused, and how long a failed read is remembered. */
export const BRIDGE_MODELS_CACHE_MS = 30_000;
export const BRIDGE_MODELS_FAILURE_MS = 5_000;
/** How long one read may take. */
export const BRIDGE_MODELS_TIMEOUT_MS = 3_000;


/** Model ids of an OpenAI list answer (`data[].id`), in order, without duplicates. */
export function parseModelIds(body: unknown): string[] {
  const data = (body as { data?: unknown } | null)?.data;
  if (!Array.isArray(data)) return [];
  const ids: string[] = [];
  for (const m of data as Array<{ id?: unknown }>) {
    if (typeof m?.id === "string" && m.id && m.id.length <= 200 && !ids.includes(m.id)) ids.push(m.id);
  }
  return ids;
}

/** The ids the lane's bridge lists, or null when it cannot be asked or did not answer a list. */
export function bridgeModels(ctx: AdapterEnv, lane: ResolvedLane): Promise<string[] | null> {
  const b = lane.bridge;
  if (!b) return Promise.resolve(null);
  const st = ctx.services.bridgeModels;
  const k = `${b.id} ${b.baseUrl}`;
  const hit = st.lists.get(k);
  if (hit && Date.now() - hit.at < (hit.ids ? BRIDGE_MODELS_CACHE_MS : BRIDGE_MODELS_FAILURE_MS)) return Promise.resolve(hit.ids);
  let p = st.pending.get(k);
  if (!p) {
    p = read(ctx, b)
      .then((ids) => {
        st.lists.set(k, { ids, at: Date.now() });
        return ids;
      })
      .finally(() => st.pending.delete(k));
    st.pending.set(k, p);
  }
  return p;
}

async function read(ctx: AdapterEnv, b: NonNullable<ResolvedLane["bridge"]>): Promise<string[] | null> {
  try {
    const token = ctx.secrets.open(b.tokenCiphertext, `bridges:${b.id}`);
    const res = await bridgeFetch(ctx, `${b.baseUrl.replace(/\/+$/, "")}/v1/models`, {
      method: "GET",
      headers: { authorization: `Bearer ${token}`, accept: "application/json" },
      signal: AbortSignal.timeout(BRIDGE_MODELS_TIMEOUT_MS),
    });
    if (!res.ok) {
      await res.body?.cancel().catch(() => {});
      ctx.log.warn({ bridgeId: b.id, status: res.status }, "bridge model list refused");
      return null;
    }
    return parseModelIds(await readJsonCapped(res, MAX_UPSTREAM_SMALL_BYTES));
  } catch (e) {
    // Refused by the SSRF guard, unreachable, too slow, not JSON: the bridge's models are left out.
    ctx.log.warn({ bridgeId: b.id, err: e instanceof Error ? e.message : String(e) }, "bridge model list unavailable");
    return null;
  }
}

/**
 * The model a bridge lane is asked for: `bridge/coding-agent` stays as it is when the bridge lists
 * it, becomes `coding-agent` when the bridge lists that, else the bridge's first listed model; a
 * bridge that lists nothing gets the alias as sent. Any other model is sent as it is.
 */
export async function resolveBridgeModel(ctx: AdapterEnv, lane: ResolvedLane, model: string): Promise<string> {
  if (model !== BRIDGE_ALIAS) return model;
  const ids = await bridgeModels(ctx, lane);
  if (!ids || ids.length === 0 || ids.includes(model)) return model;
  const bare = model.slice("bridge/".length);
  return ids.includes(bare) ? bare : ids[0]!;
}
