// Rules a lane must meet whatever the caller owns (SPEC Lane table), and the PATCH merge of
// per-lane settings. Pure functions: no I/O.
import { badRequest } from "../../errors.ts";
import { allAdapters, getAdapter } from "../../providers/registry.ts";
import { LANE_SETTINGS, type LaneSetting } from "../../providers/types.ts";
import type { LaneRow } from "../../store/db/schema/index.ts";
import type { LaneInput } from "./model.ts";

/** The providers whose lanes take `setting`: each adapter declares its own (ProviderAdapter.settings). */
export function providersTaking(setting: LaneSetting): string[] {
  return allAdapters().filter((a) => a.settings?.includes(setting)).map((a) => a.id);
}

/** Per-lane settings that PATCH merges (left out = keep the key's value, null = clear). */
export const MERGED_SETTINGS = ["reasoning_effort", "verbosity", "service_tier", "fallback_to_default_model"] as const;

type RefField = "credential_id" | "sub_session_id" | "bridge_instance_id";

/** The id field a lane must name, from its adapter's kind (ProviderAdapter.kind): a sub adapter names a session, a bridge adapter a bridge, the others (and an unknown provider) a saved key. */
export function refFieldOf(provider: string): RefField {
  const kind = getAdapter(provider)?.kind;
  if (kind === "sub") return "sub_session_id";
  if (kind === "bridge") return "bridge_instance_id";
  return "credential_id";
}

const REF_FIELDS: RefField[] = ["credential_id", "sub_session_id", "bridge_instance_id"];

const what: Record<RefField, string> = {
  credential_id: "the id of one of your saved keys for that provider (GET /v1/organizations/credentials)",
  sub_session_id: "the id of your connected sub session (GET /v1/organizations/sub-session)",
  bridge_instance_id: "the id of one of your bridges (GET /v1/organizations/bridges)",
};

/** Identity of a lane for the PATCH merge: provider plus the credential, session or bridge it names. */
export function laneIdentity(l: { provider: string; credential_id?: string | null; sub_session_id?: string | null; bridge_instance_id?: string | null }): string {
  return `${l.provider}\u0000${l.credential_id ?? ""}\u0000${l.sub_session_id ?? ""}\u0000${l.bridge_instance_id ?? ""}`;
}

/**
 * PATCH: fills each per-lane setting the new lane leaves out from the key's current lane with the
 * same identity (each current lane matched at most once, in order). `null` stays null (= clear).
 */
export function mergeLaneSettings(next: LaneInput[], current: LaneRow[]): LaneInput[] {
  const used = new Set<number>();
  return next.map((lane) => {
    const id = laneIdentity(lane);
    const i = current.findIndex((c, j) => !used.has(j) && laneIdentity(c) === id);
    if (i < 0) return lane;
    used.add(i);
    const old = current[i]!;
    const out: LaneInput = { ...lane };
    for (const k of MERGED_SETTINGS) if (out[k] === undefined) (out as any)[k] = old[k];
    return out;
  });
}

/** Checks the lane's fields against its kind and returns the stored form (every field present). */
export function normalizeLane(lane: LaneInput, index: number): LaneRow {
  const at = (f: string) => `\`providers[${index}].${f}\``;
  const need = refFieldOf(lane.provider);
  if (!lane[need]) throw badRequest(`${at(need)} is required for a ${lane.provider} lane: send ${what[need]}.`);
  for (const f of REF_FIELDS) {
    if (f !== need && lane[f] != null) throw badRequest(`${at(f)} does not apply to a ${lane.provider} lane; a ${lane.provider} lane names ${need} only.`);
  }
  const takes = getAdapter(lane.provider)?.settings;
  for (const setting of LANE_SETTINGS) {
    if (lane[setting] != null && !takes?.includes(setting)) {
      throw badRequest(`${at(setting)} is not supported on a ${lane.provider} lane; it applies to ${providersTaking(setting).join(" and ")} lanes only. Remove it or set it to null.`);
    }
  }
  return {
    provider: lane.provider,
    model: lane.model ?? null,
    credential_id: lane.credential_id ?? null,
    sub_session_id: lane.sub_session_id ?? null,
    bridge_instance_id: lane.bridge_instance_id ?? null,
    category_key: lane.category_key ?? null,
    category_description: lane.category_description ?? null,
    fallback_to_default_model: lane.fallback_to_default_model ?? true,
    reasoning_effort: lane.reasoning_effort ?? null,
    verbosity: lane.verbosity ?? null,
    service_tier: lane.service_tier ?? null,
  };
}
