import { boolean, doublePrecision, index, integer, jsonb, pgTable, text, timestamp } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** One lane of a routing key's chain, stored in order as JSON on the key row (one read resolves a key). */
export interface LaneRow {
  provider: string;
  model: string | null;
  credential_id: string | null;
  sub_session_id: string | null;
  bridge_instance_id: string | null;
  category_key: string | null;
  category_description: string | null;
  fallback_to_default_model: boolean;
  reasoning_effort: string | null;
  verbosity: string | null;
  service_tier: string | null;
}

/** A routing key's response-cache setting as stored (and as the API shows it). */
export interface RoutingKeyCache {
  ttl_seconds: number;
  shared: boolean;
}

export const routingKeys = pgTable("routing_keys", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  label: text("label").notNull(),
  keyHash: text("key_hash").notNull().unique(),
  keyPrefix: text("key_prefix").notNull(),
  mode: text("mode").notNull().default("fallback"),
  classifierProvider: text("classifier_provider"),
  classifierModel: text("classifier_model"),
  classifierInstructions: text("classifier_instructions"),
  classifierCredentialId: text("classifier_credential_id"),
  monthlyBudgetUsd: doublePrecision("monthly_budget_usd"),
  budgetExcludesSeats: boolean("budget_excludes_seats").notNull().default(true),
  // Rate limits (CONTRACT §8): null = none.
  rpmLimit: integer("rpm_limit"),
  tpmLimit: integer("tpm_limit"),
  maxConcurrentRequests: integer("max_concurrent_requests"),
  // Response cache (CONTRACT §8): null = off; `shared` puts the key's entries in its account's namespace.
  cache: jsonb("cache").$type<RoutingKeyCache | null>(),
  // Translation policy (CONTRACT §9): `adapt` maps or drops what a lane cannot carry, `strict` refuses it.
  translation: text("translation").notNull().default("adapt"),
  // Tags (CONTRACT §9): true answers an untagged inference request 400.
  requireTags: boolean("require_tags").notNull().default(false),
  // Session affinity (CONTRACT §9): null = the default (3600 s on keys with more than one lane), 0 = off.
  sessionAffinityTtlSeconds: integer("session_affinity_ttl_seconds"),
  lanes: jsonb("lanes").$type<LaneRow[]>().notNull().default([]),
  lastUsedAt: ts("last_used_at"),
  revokedAt: ts("revoked_at"),
  createdAt: ts("created_at").notNull().defaultNow(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
}, (t) => [index("routing_keys_account").on(t.accountId)]);

/** Saved API keys for the 13 vendors; the key is AES-256-GCM encrypted, bound to the row id. */
export const credentials = pgTable("credentials", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  provider: text("provider").notNull(),
  label: text("label").notNull(),
  keyCiphertext: text("key_ciphertext").notNull(),
  keyFingerprint: text("key_fingerprint").notNull(),
  createdAt: ts("created_at").notNull().defaultNow(),
}, (t) => [index("credentials_account").on(t.accountId, t.provider, t.createdAt)]);

export const bridges = pgTable("bridges", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  label: text("label").notNull(),
  kind: text("kind").notNull().default("coding_agent"),
  baseUrl: text("base_url").notNull(),
  tokenCiphertext: text("token_ciphertext").notNull(),
  tokenFingerprint: text("token_fingerprint").notNull(),
  cloudProvider: text("cloud_provider"),
  cloudInstanceId: text("cloud_instance_id"),
  region: text("region"),
  status: text("status").notNull().default("unknown"),
  planTier: text("plan_tier"),
  lastHealthAt: ts("last_health_at"),
  lastError: text("last_error"),
  revokedAt: ts("revoked_at"),
  createdAt: ts("created_at").notNull().defaultNow(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
}, (t) => [index("bridges_account").on(t.accountId)]);

/** The subscription sign-in. `auth_ciphertext` holds the encrypted auth_json; cleared on revoke. */
export const subSessions = pgTable("sub_sessions", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  status: text("status").notNull(),
  authCiphertext: text("auth_ciphertext"),
  sourcePath: text("source_path"),
  provisioned: boolean("provisioned").notNull().default(false),
  accountStatus: text("account_status"),
  lastError: text("last_error"),
  connectedAt: ts("connected_at"),
  lastUsedAt: ts("last_used_at"),
  expiresAt: ts("expires_at"),
  revokedAt: ts("revoked_at"),
  createdAt: ts("created_at").notNull().defaultNow(),
  updatedAt: ts("updated_at").notNull().defaultNow(),
}, (t) => [index("sub_sessions_account").on(t.accountId, t.createdAt)]);
