// What the relay knows about a routing key at request time: the key row, its account's state
// and its lanes with everything they reference, loaded in one round of queries and cached.
import { and, asc, eq, inArray, isNull } from "drizzle-orm";
import type { Base } from "../base.ts";
import type { TranslationPolicy } from "../protocols/adapt.ts";
import type { ResolvedLane } from "../providers/types.ts";
import type { KeyLimits } from "../store/kv/limit-window.ts";
import { accounts, bridges, credentials, routingKeys, subSessions } from "../store/db/schema/index.ts";
import { affinityTtlSeconds } from "./routing/affinity-setting.ts";

export interface KeyContext {
  id: string;
  accountId: string;
  label: string;
  keyPrefix: string;
  /** sha256 of the raw key (the cache's key). */
  hash: string;
  mode: "fallback" | "classifier";
  classifierProvider: string | null;
  classifierModel: string | null;
  classifierInstructions: string | null;
  classifierCredentialId: string | null;
  /** The saved key the classifier calls with: classifier_credential_id, else the account's oldest for classifier_provider. */
  classifierCredential: { id: string; apiKeyCiphertext: string } | null;
  monthlyBudgetUsd: number | null;
  budgetExcludesSeats: boolean;
  /** rpm_limit, tpm_limit, max_concurrent_requests (CONTRACT §8); null when the key has none. */
  limits: KeyLimits | null;
  /** The response cache (CONTRACT §8): null when the key has none, the common case the relay checks first. */
  cache: { ttlSeconds: number; shared: boolean } | null;
  lanes: ResolvedLane[];
  /** How a field a lane's protocol cannot carry is treated (CONTRACT §9); absent: `adapt`, the default. */
  translation?: TranslationPolicy;
  /** Session affinity (CONTRACT §9, routing/affinity.ts): how long a session's lane is remembered after its last request, null when off. */
  affinityTtlSeconds: number | null;
  /** Tags (CONTRACT §9): an untagged inference request is answered 400; absent: false. */
  requireTags?: boolean;
  /** Unpaid accounts: when the account is removed (ms since epoch); checked on every request. */
  accountExpiresAtMs: number | null;
}

/** Loads a live key by hash; null when unknown, revoked, or its account is removed. */
export async function loadKeyContext(ctx: Base, hash: string): Promise<KeyContext | null> {
  const rows = await ctx.db
    .select({ key: routingKeys, removedAt: accounts.removedAt, plan: accounts.plan, expiresAt: accounts.accountExpiresAt })
    .from(routingKeys)
    .innerJoin(accounts, eq(accounts.id, routingKeys.accountId))
    .where(eq(routingKeys.keyHash, hash))
    .limit(1);
  const row = rows[0];
  if (!row || row.key.revokedAt || row.removedAt) return null;
  const expiresAtMs = row.plan === "free" && row.expiresAt ? row.expiresAt.getTime() : null;
  if (expiresAtMs !== null && expiresAtMs <= Date.now()) return null;

  const k = row.key;
  const laneRows = Array.isArray(k.lanes) ? k.lanes : [];
  const credIds = new Set<string>();
  const bridgeIds = new Set<string>();
  const subIds = new Set<string>();
  for (const l of laneRows) {
    if (l.credential_id) credIds.add(l.credential_id);
    if (l.bridge_instance_id) bridgeIds.add(l.bridge_instance_id);
    if (l.sub_session_id) subIds.add(l.sub_session_id);
  }
  if (k.classifierCredentialId) credIds.add(k.classifierCredentialId);
  const [creds, brs, subs, classifierDefault] = await Promise.all([
    credIds.size
      ? ctx.db.select({ id: credentials.id, ct: credentials.keyCiphertext, provider: credentials.provider }).from(credentials)
          .where(and(eq(credentials.accountId, k.accountId), inArray(credentials.id, [...credIds])))
      : [],
    bridgeIds.size
      ? ctx.db.select().from(bridges).where(and(eq(bridges.accountId, k.accountId), inArray(bridges.id, [...bridgeIds]), isNull(bridges.revokedAt)))
      : [],
    subIds.size
      ? ctx.db.select().from(subSessions).where(and(eq(subSessions.accountId, k.accountId), inArray(subSessions.id, [...subIds])))
      : [],
    k.mode === "classifier" && !k.classifierCredentialId && k.classifierProvider
      ? ctx.db.select({ id: credentials.id, ct: credentials.keyCiphertext }).from(credentials)
          .where(and(eq(credentials.accountId, k.accountId), eq(credentials.provider, k.classifierProvider)))
          .orderBy(asc(credentials.createdAt)).limit(1)
      : [],
  ]);
  const credById = new Map(creds.map((c) => [c.id, { id: c.id, apiKeyCiphertext: c.ct }]));
  const bridgeById = new Map(brs.map((b) => [b.id, { id: b.id, baseUrl: b.baseUrl, tokenCiphertext: b.tokenCiphertext, status: b.status }]));
  const subById = new Map(subs.map((s) => [s.id, {
    id: s.id,
    status: s.revokedAt ? "revoked" : s.status,
    provisioned: s.provisioned,
    lastError: s.lastError,
    expiresAt: s.expiresAt,
  }]));
  const lanes: ResolvedLane[] = laneRows.map((l, index) => ({
    ...l,
    fallback_to_default_model: l.fallback_to_default_model !== false,
    index,
    credential: l.credential_id ? credById.get(l.credential_id) ?? null : null,
    bridge: l.bridge_instance_id ? bridgeById.get(l.bridge_instance_id) ?? null : null,
    subSession: l.sub_session_id ? subById.get(l.sub_session_id) ?? null : null,
  }));
  const cd = classifierDefault[0];
  return {
    id: k.id,
    accountId: k.accountId,
    label: k.label,
    keyPrefix: k.keyPrefix,
    hash,
    mode: k.mode === "classifier" ? "classifier" : "fallback",
    classifierProvider: k.classifierProvider,
    classifierModel: k.classifierModel,
    classifierInstructions: k.classifierInstructions,
    classifierCredentialId: k.classifierCredentialId,
    classifierCredential: k.classifierCredentialId ? credById.get(k.classifierCredentialId) ?? null : cd ? { id: cd.id, apiKeyCiphertext: cd.ct } : null,
    monthlyBudgetUsd: k.monthlyBudgetUsd !== null && k.monthlyBudgetUsd > 0 ? k.monthlyBudgetUsd : null,
    budgetExcludesSeats: k.budgetExcludesSeats,
    limits: k.rpmLimit === null && k.tpmLimit === null && k.maxConcurrentRequests === null
      ? null
      : { rpm: k.rpmLimit, tpm: k.tpmLimit, concurrency: k.maxConcurrentRequests },
    cache: k.cache && k.cache.ttl_seconds > 0 ? { ttlSeconds: k.cache.ttl_seconds, shared: k.cache.shared === true } : null,
    lanes,
    translation: k.translation === "strict" ? "strict" : "adapt",
    affinityTtlSeconds: affinityTtlSeconds(k.sessionAffinityTtlSeconds, lanes.length),
    requireTags: k.requireTags === true,
    accountExpiresAtMs: expiresAtMs,
  };
}
