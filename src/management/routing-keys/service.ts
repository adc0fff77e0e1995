// Routing keys: plain queries and the rules that need the caller's objects (ownership of every
// referenced id, classifier credential). The raw key `gw_…` is returned once; only its sha256
// and a display prefix are stored.
import { and, asc, eq } from "drizzle-orm";
import type { Base } from "../../base.ts";
import type { Db } from "../../store/db/client.ts";
import { routingKeys, type LaneRow } from "../../store/db/schema/index.ts";
import { badRequest, isDatabaseError, loggableError } from "../../errors.ts";
import { randomToken, sha256Hex } from "../../lib/crypto.ts";
import { newId } from "../../lib/ids.ts";
import { iso, monthKey } from "../../lib/time.ts";
import { monthSpendUsd, recordedSpendUsd } from "../../store/spend-counters.ts";
import { notifyInTransaction, publishInvalidation, type Publishing } from "../../store/invalidation.ts";
import { listCredentials, type CredentialRow } from "../credentials/service.ts";
import { listBridges } from "../bridges/service.ts";
import { liveSubSessions, subSessionStatus } from "../sub-session/store.ts";
import { mergeLaneSettings, normalizeLane } from "./lane-rules.ts";
import type { CreateRoutingKeyBody, LaneInput, PatchRoutingKeyBody } from "./model.ts";
import { affinityTtlSeconds } from "../../relay/routing/affinity-setting.ts";

/** The key's session affinity as the API shows it. */
const presentAffinity = (ttl: number | null) => (ttl === null ? null : { ttl_seconds: ttl });

/** The stored cache setting of a request's `cache` field (null: off). */
const cacheOf = (c: { ttl_seconds: number; shared?: boolean } | null | undefined) => (c ? { ttl_seconds: c.ttl_seconds, shared: c.shared ?? false } : null);

/** The stored session-affinity setting of a request's `session_affinity` field: its TTL, 0 for off (null). */
const affinityOf = (a: { ttl_seconds: number } | null) => (a ? a.ttl_seconds : 0);

export type RoutingKeyRow = typeof routingKeys.$inferSelect;

export const RAW_KEY_PREFIX = "gw_";
export const RAW_KEY_RANDOM_CHARS = 40;
export const KEY_PREFIX_CHARS = 12;

export function newRawKey(): { raw: string; hash: string; prefix: string } {
  const raw = RAW_KEY_PREFIX + randomToken(RAW_KEY_RANDOM_CHARS);
  return { raw, hash: sha256Hex(raw), prefix: raw.slice(0, KEY_PREFIX_CHARS) };
}

/** A lane with every field of SPEC's Lane table, in the table's order (jsonb does not keep key order). */
export function presentLane(l: LaneRow) {
  return {
    provider: l.provider,
    model: l.model ?? null,
    credential_id: l.credential_id ?? null,
    sub_session_id: l.sub_session_id ?? null,
    bridge_instance_id: l.bridge_instance_id ?? null,
    category_key: l.category_key ?? null,
    category_description: l.category_description ?? null,
    fallback_to_default_model: l.fallback_to_default_model ?? true,
    reasoning_effort: l.reasoning_effort ?? null,
    verbosity: l.verbosity ?? null,
    service_tier: l.service_tier ?? null,
  };
}

/**
 * The month's spend shown on a key: the live counter, or the recorded spend in Postgres while
 * the KV is unreachable. A display value never fails a committed write (POST must return the
 * raw key it created).
 */
async function spendForDisplay(ctx: Base, row: RoutingKeyRow): Promise<{ month: string; usd: number }> {
  const key = { id: row.id, monthlyBudgetUsd: row.monthlyBudgetUsd, budgetExcludesSeats: row.budgetExcludesSeats };
  try {
    return await monthSpendUsd(ctx, key);
  } catch (e) {
    if (isDatabaseError(e)) throw e;
    ctx.log.warn({ err: loggableError(e) }, "budget counter unreachable: showing the spend recorded in Postgres");
    const month = monthKey();
    return { month, usd: await recordedSpendUsd(ctx, key, month) };
  }
}

/** When a lane's cooldown ends (ms since epoch), or null when it is not cooling (relay/routing/cooldowns.ts untilOf). */
export type CooldownOf = (lane: LaneRow) => number | null;

/**
 * The SPEC's Routing key object; spend comes from the live budget counter. Each lane also says
 * `cooldown_until` (CONTRACT §9 "Lane cooldowns"): the ISO time its cooldown ends, or null.
 */
export async function presentRoutingKey(ctx: Base, row: RoutingKeyRow, cooldownOf: CooldownOf = () => null) {
  const spend = await spendForDisplay(ctx, row);
  return {
    id: row.id,
    label: row.label,
    key_prefix: row.keyPrefix,
    mode: row.mode,
    classifier_provider: row.classifierProvider,
    classifier_model: row.classifierModel,
    classifier_instructions: row.classifierInstructions,
    classifier_credential_id: row.classifierCredentialId,
    monthly_budget_usd: row.monthlyBudgetUsd,
    budget_excludes_seats: row.budgetExcludesSeats,
    rpm_limit: row.rpmLimit,
    tpm_limit: row.tpmLimit,
    max_concurrent_requests: row.maxConcurrentRequests,
    cache: row.cache ? { ttl_seconds: row.cache.ttl_seconds, shared: row.cache.shared === true } : null,
    translation: row.translation === "strict" ? "strict" : "adapt",
    session_affinity: presentAffinity(affinityTtlSeconds(row.sessionAffinityTtlSeconds, row.lanes.length)),
    require_tags: row.requireTags === true,
    current_month_spend_usd: Math.round(spend.usd * 1e9) / 1e9,
    current_month: spend.month,
    last_used_at: iso(row.lastUsedAt),
    revoked_at: iso(row.revokedAt),
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
    providers: row.lanes.map((l) => {
      const until = cooldownOf(l);
      return { ...presentLane(l), cooldown_until: until === null ? null : new Date(until).toISOString() };
    }),
  };
}

/** What the caller can wire into lanes, loaded once per request. */
export interface Wireable {
  credentials: CredentialRow[];
  subSessionIds: Set<string>;
  bridgeIds: Set<string>;
}

export async function loadWireable(db: Db, accountId: string): Promise<Wireable> {
  const [credentials, subs, brs] = await Promise.all([listCredentials(db, accountId), liveSubSessions(db, accountId), listBridges(db, accountId)]);
  return { credentials, subSessionIds: new Set(subs.map((s) => s.id)), bridgeIds: new Set(brs.map((b) => b.id)) };
}

/** The `lanes` object of `?include=lanes` (CONTRACT §6). */
export async function wireableLanes(db: Db, accountId: string) {
  const [credentials, subs, brs] = await Promise.all([listCredentials(db, accountId), liveSubSessions(db, accountId), listBridges(db, accountId)]);
  const now = Date.now();
  return {
    sub_sessions: subs.map((s) => ({ id: s.id, status: subSessionStatus(s, now) })),
    bridges: brs.map((b) => ({ id: b.id, label: b.label, status: b.status })),
    credentials: credentials.map((c) => ({ id: c.id, provider: c.provider, label: c.label, key_fingerprint: c.keyFingerprint })),
  };
}

/**
 * Every id a lane names must be the caller's. The message is the same whether the id does not
 * exist or belongs to another account, so nothing about other accounts leaks.
 */
function checkOwnership(lanes: LaneRow[], w: Wireable): void {
  lanes.forEach((l, i) => {
    if (l.credential_id !== null) {
      const c = w.credentials.find((x) => x.id === l.credential_id);
      if (!c) throw badRequest(`\`providers[${i}].credential_id\` is not one of your saved keys. List them with GET /v1/organizations/credentials.`);
      if (c.provider !== l.provider) throw badRequest(`\`providers[${i}].credential_id\` is your saved key for ${c.provider}, not for ${l.provider}; name a saved ${l.provider} key.`);
    }
    if (l.sub_session_id !== null && !w.subSessionIds.has(l.sub_session_id)) {
      throw badRequest(`\`providers[${i}].sub_session_id\` is not your current sub session. Connect one with POST /v1/organizations/sub-session and use its id.`);
    }
    if (l.bridge_instance_id !== null && !w.bridgeIds.has(l.bridge_instance_id)) {
      throw badRequest(`\`providers[${i}].bridge_instance_id\` is not one of your bridges. List them with GET /v1/organizations/bridges.`);
    }
  });
}

export function buildLanes(input: LaneInput[], w: Wireable): LaneRow[] {
  const lanes = input.map((l, i) => normalizeLane(l, i));
  checkOwnership(lanes, w);
  return lanes;
}

interface ClassifierState {
  mode: string;
  classifierProvider: string | null;
  classifierModel: string | null;
  classifierInstructions: string | null;
  classifierCredentialId: string | null;
}

/**
 * Classifier settings after a create or PATCH. In classifier mode the provider, model and
 * instructions are required; the provider must have a saved key of the caller's; the credential
 * is the one named (the caller's key for that provider) or else the oldest such key.
 * `explicitCredential` is true when the request itself named classifier_credential_id.
 */
function resolveClassifier(s: ClassifierState, w: Wireable, explicitCredential: boolean, touched: boolean): ClassifierState {
  if (s.mode !== "classifier" && !touched) return s;
  if (s.mode === "classifier") {
    if (!s.classifierProvider) throw badRequest("`classifier_provider` is required in classifier mode: name an API-key provider you saved a key for.");
    if (!s.classifierModel) throw badRequest("`classifier_model` is required in classifier mode: name the model that picks the lane.");
    if (!s.classifierInstructions) throw badRequest("`classifier_instructions` is required in classifier mode: at least 10 characters telling the classifier how to choose.");
  }
  if (!s.classifierProvider) {
    if (s.classifierCredentialId && explicitCredential) throw badRequest("`classifier_credential_id` needs `classifier_provider`: send both.");
    return { ...s, classifierCredentialId: null };
  }
  const keys = w.credentials.filter((c) => c.provider === s.classifierProvider); // oldest first
  if (keys.length === 0) {
    throw badRequest(`\`classifier_provider\` ${s.classifierProvider} has no saved key in this account. Save one with POST /v1/organizations/credentials first.`);
  }
  if (s.classifierCredentialId) {
    const c = w.credentials.find((x) => x.id === s.classifierCredentialId);
    if (c && c.provider === s.classifierProvider) return s;
    if (explicitCredential) {
      throw badRequest(`\`classifier_credential_id\` is not one of your saved keys for ${s.classifierProvider}. List them with GET /v1/organizations/credentials.`);
    }
  }
  return { ...s, classifierCredentialId: keys[0]!.id };
}

/** A missing or non-positive budget means none. */
const budgetOf = (v: number | null | undefined) => (v === undefined || v === null || v <= 0 ? null : v);

export async function createRoutingKey(ctx: Base, accountId: string, body: CreateRoutingKeyBody): Promise<{ row: RoutingKeyRow; raw: string }> {
  const w = await loadWireable(ctx.db, accountId);
  const lanes = buildLanes(body.providers ?? [], w);
  const touched = body.classifier_provider != null || body.classifier_model != null || body.classifier_instructions != null || body.classifier_credential_id != null;
  const c = resolveClassifier({
    mode: body.mode ?? "fallback",
    classifierProvider: body.classifier_provider ?? null,
    classifierModel: body.classifier_model ?? null,
    classifierInstructions: body.classifier_instructions ?? null,
    classifierCredentialId: body.classifier_credential_id ?? null,
  }, w, body.classifier_credential_id != null, touched);
  const key = newRawKey();
  const [row] = await ctx.db.insert(routingKeys).values({
    id: newId("rkey"),
    accountId,
    label: body.label ?? "default",
    keyHash: key.hash,
    keyPrefix: key.prefix,
    ...c,
    monthlyBudgetUsd: budgetOf(body.monthly_budget_usd),
    budgetExcludesSeats: body.budget_excludes_seats ?? true,
    rpmLimit: body.rpm_limit ?? null,
    tpmLimit: body.tpm_limit ?? null,
    maxConcurrentRequests: body.max_concurrent_requests ?? null,
    cache: cacheOf(body.cache),
    translation: body.translation ?? "adapt",
    sessionAffinityTtlSeconds: body.session_affinity === undefined ? null : affinityOf(body.session_affinity),
    requireTags: body.require_tags ?? false,
    lanes,
  }).returning();
  return { row: row!, raw: key.raw };
}

export function listRoutingKeys(db: Db, accountId: string): Promise<RoutingKeyRow[]> {
  return db.select().from(routingKeys).where(eq(routingKeys.accountId, accountId)).orderBy(asc(routingKeys.createdAt), asc(routingKeys.id));
}

export async function findRoutingKey(db: Db, accountId: string, id: string): Promise<RoutingKeyRow | null> {
  const rows = await db.select().from(routingKeys).where(and(eq(routingKeys.id, id), eq(routingKeys.accountId, accountId))).limit(1);
  return rows[0] ?? null;
}

/**
 * PATCH: applies the fields sent, keeps the rest. Every PATCH drops the key from every
 * instance's cache (by the hash it had), so a revoke or regenerate takes effect at once.
 */
export async function patchRoutingKey(ctx: Base & Publishing, accountId: string, id: string, body: PatchRoutingKeyBody): Promise<{ row: RoutingKeyRow; raw?: string }> {
  const current = await findRoutingKey(ctx.db, accountId, id);
  if (!current) throw badRequest(`No routing key with id ${id} in this account. List yours with GET /v1/organizations/routing-keys.`);
  const w = await loadWireable(ctx.db, accountId);
  const set: Partial<typeof routingKeys.$inferInsert> = { updatedAt: new Date() };

  if (body.providers !== undefined) set.lanes = buildLanes(mergeLaneSettings(body.providers, current.lanes), w);
  if (body.label !== undefined) set.label = body.label;
  if (body.monthly_budget_usd !== undefined) set.monthlyBudgetUsd = budgetOf(body.monthly_budget_usd);
  if (body.budget_excludes_seats !== undefined) set.budgetExcludesSeats = body.budget_excludes_seats;
  if (body.rpm_limit !== undefined) set.rpmLimit = body.rpm_limit;
  if (body.tpm_limit !== undefined) set.tpmLimit = body.tpm_limit;
  if (body.max_concurrent_requests !== undefined) set.maxConcurrentRequests = body.max_concurrent_requests;
  if (body.cache !== undefined) set.cache = cacheOf(body.cache);
  if (body.translation !== undefined) set.translation = body.translation;
  if (body.session_affinity !== undefined) set.sessionAffinityTtlSeconds = affinityOf(body.session_affinity);
  if (body.require_tags !== undefined) set.requireTags = body.require_tags;

  const touched = body.classifier_provider !== undefined || body.classifier_model !== undefined || body.classifier_instructions !== undefined || body.classifier_credential_id !== undefined;
  if (touched || body.mode !== undefined) {
    const providerChanged = body.classifier_provider !== undefined && body.classifier_provider !== current.classifierProvider;
    const c = resolveClassifier({
      mode: body.mode ?? current.mode,
      classifierProvider: body.classifier_provider !== undefined ? body.classifier_provider : current.classifierProvider,
      classifierModel: body.classifier_model !== undefined ? body.classifier_model : current.classifierModel,
      classifierInstructions: body.classifier_instructions !== undefined ? body.classifier_instructions : current.classifierInstructions,
      // A new provider gets its own default key unless one is named.
      classifierCredentialId: body.classifier_credential_id !== undefined ? body.classifier_credential_id : providerChanged ? null : current.classifierCredentialId,
    }, w, body.classifier_credential_id != null, touched);
    Object.assign(set, c);
  }

  if (body.revoked === true) set.revokedAt = current.revokedAt ?? new Date();
  if (body.revoked === false) set.revokedAt = null;

  let raw: string | undefined;
  if (body.regenerate === true) {
    const key = newRawKey();
    raw = key.raw;
    set.keyHash = key.hash;
    set.keyPrefix = key.prefix;
  }

  // The NOTIFY commits with the update: every instance hears of it even while Redis is down.
  const msg = { kind: "key", hash: current.keyHash } as const;
  const row = await ctx.db.transaction(async (tx) => {
    const [r] = await tx.update(routingKeys).set(set).where(and(eq(routingKeys.id, id), eq(routingKeys.accountId, accountId))).returning();
    if (r) await notifyInTransaction(ctx, tx, msg);
    return r;
  });
  if (!row) throw badRequest(`No routing key with id ${id} in this account. List yours with GET /v1/organizations/routing-keys.`);
  await publishInvalidation(ctx, msg, { notified: true });
  return { row, raw };
}
