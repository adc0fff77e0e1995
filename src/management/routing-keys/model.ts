// Request schemas for routing keys (SPEC "POST routing-keys body", "PATCH routing-keys body",
// Lane table). Shape and types are checked here; rules that depend on the lane's provider or on
// what the caller owns are in lane-rules.ts and service.ts.
import { z } from "zod";
import { TRANSLATION_POLICIES } from "../../protocols/adapt.ts";
import { API_KEY_PROVIDER_IDS } from "../../providers/endpoints.ts";

export const ROUTING_KEY_LABEL_MAX = 60;
export const MAX_LANES = 5;
export const CLASSIFIER_INSTRUCTIONS_MIN = 10;

export const LANE_KINDS = ["sub", "bridge", ...API_KEY_PROVIDER_IDS] as const;
export const REASONING_EFFORTS = ["none", "low", "medium", "high", "xhigh", "max"] as const;
export const VERBOSITIES = ["low", "medium", "high"] as const;
export const SERVICE_TIERS = ["default", "priority"] as const;
export const MODES = ["fallback", "classifier"] as const;

const id = z.string().min(1).max(200);
const text = (max: number) => z.string().trim().min(1).max(max);

/**
 * A lane as sent. Every field but `provider` may be omitted; `null` means "no value" (and on PATCH,
 * for the per-lane settings, "clear the value the key had").
 */
export const laneInput = z.strictObject({
  provider: z.enum(LANE_KINDS),
  model: text(200).nullable().optional(),
  credential_id: id.nullable().optional(),
  sub_session_id: id.nullable().optional(),
  bridge_instance_id: id.nullable().optional(),
  category_key: text(64).nullable().optional(),
  category_description: text(500).nullable().optional(),
  fallback_to_default_model: z.boolean().nullable().optional(),
  reasoning_effort: z.enum(REASONING_EFFORTS).nullable().optional(),
  verbosity: z.enum(VERBOSITIES).nullable().optional(),
  service_tier: z.enum(SERVICE_TIERS).nullable().optional(),
  // Read-only (CONTRACT §9 lane cooldowns): shown on every lane, accepted back unchanged so a lane
  // read with GET can be sent in a PATCH as it is, and ignored.
  cooldown_until: z.string().max(40).nullable().optional().describe("Read-only: when the lane's cooldown ends (GET shows it). Ignored when sent."),
});
export type LaneInput = z.output<typeof laneInput>;

const lanes = z.array(laneInput).max(MAX_LANES);
const label = text(ROUTING_KEY_LABEL_MAX);
// Any number; a non-positive one means "no budget" (SPEC), null too.
const budget = z.number().max(1e9).nullable();
// Rate limits (CONTRACT §8): a positive integer, or null for none.
const limit = z.number().int().positive().max(2_147_483_647).nullable();
const limitFields = {
  rpm_limit: limit.optional(),
  tpm_limit: limit.optional(),
  max_concurrent_requests: limit.optional(),
};

/** Longest a cached answer may be kept (30 days). */
export const CACHE_TTL_MAX_SECONDS = 30 * 24 * 3600;
/**
 * The response cache (CONTRACT §8, docs/caching.md): off (`null`, the default) or on with a TTL;
 * `shared: true` puts the key's entries in its account's one shared namespace instead of its own.
 */
export const cacheSetting = z.strictObject({
  ttl_seconds: z.number().int().min(1).max(CACHE_TTL_MAX_SECONDS),
  shared: z.boolean().optional(),
}).nullable();

/**
 * CONTRACT §9: what a lane does with a request field its protocol cannot carry. `adapt` (the
 * default) maps it to its equivalent or drops it when it only tunes the vendor's behaviour;
 * `strict` refuses it (400 unsupported_feature, so the chain fails over).
 */
export const translationSetting = z.enum(TRANSLATION_POLICIES).meta({
  description: "`adapt` (default): a field a lane cannot carry is mapped or dropped, named in `x-gateway-adapted`; `strict`: it is refused with 400 unsupported_feature (the chain fails over).",
});
/** Longest a session's lane may be remembered after its last request (30 days). */
export const AFFINITY_TTL_MAX_SECONDS = 30 * 24 * 3600;
/**
 * Session affinity (CONTRACT §9): a session's next request tries first the lane that served its
 * last one, for `ttl_seconds` after its last request; `null` turns it off. Default: on for an
 * hour on keys with more than one lane.
 */
/** CONTRACT §9: true answers an untagged inference request 400 (tags: x-gateway-tags or metadata.tags). */
export const requireTagsSetting = z.boolean().meta({
  description: "true: an inference request without tags (`x-gateway-tags` header or `metadata.tags`) is answered 400 `tags_required`. Default false.",
});

export const sessionAffinitySetting = z.strictObject({
  ttl_seconds: z.number().int().min(1).max(AFFINITY_TTL_MAX_SECONDS),
}).nullable();

const classifierFields = {
  classifier_provider: z.enum(API_KEY_PROVIDER_IDS).nullable().optional(),
  classifier_model: text(200).nullable().optional(),
  classifier_instructions: z.string().trim().min(CLASSIFIER_INSTRUCTIONS_MIN).max(8000).nullable().optional(),
  classifier_credential_id: id.nullable().optional(),
};

export const createRoutingKeyBody = z.strictObject({
  label: label.optional(),
  mode: z.enum(MODES).optional(),
  monthly_budget_usd: budget.optional(),
  budget_excludes_seats: z.boolean().optional(),
  ...limitFields,
  cache: cacheSetting.optional(),
  translation: translationSetting.optional(),
  session_affinity: sessionAffinitySetting.optional(),
  require_tags: requireTagsSetting.optional(),
  ...classifierFields,
  providers: lanes.optional(),
});
export type CreateRoutingKeyBody = z.output<typeof createRoutingKeyBody>;

/** SPEC's PATCH fields, plus the create-time settings so a key can be moved to classifier mode. */
export const patchRoutingKeyBody = z.strictObject({
  label: label.optional(),
  mode: z.enum(MODES).optional(),
  monthly_budget_usd: budget.optional(),
  budget_excludes_seats: z.boolean().optional(),
  revoked: z.boolean().optional(),
  regenerate: z.boolean().optional(),
  ...limitFields,
  cache: cacheSetting.optional(),
  translation: translationSetting.optional(),
  session_affinity: sessionAffinitySetting.optional(),
  require_tags: requireTagsSetting.optional(),
  ...classifierFields,
  providers: lanes.optional(),
});
export type PatchRoutingKeyBody = z.output<typeof patchRoutingKeyBody>;

export const listQuery = z.strictObject({ include: z.literal("lanes").optional() });
export const idQuery = z.strictObject({ id });
export const noQuery = z.strictObject({});
