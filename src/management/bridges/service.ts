// Bridges (self-hosted coding-agent endpoints): plain queries over `bridges`. The bearer token is
// sealed with AES-256-GCM bound to `bridges:<id>`; only its last four characters are shown.
import { and, asc, eq, isNull } from "drizzle-orm";
import type { Base } from "../../base.ts";
import type { Db } from "../../store/db/client.ts";
import { bridges } from "../../store/db/schema/index.ts";
import { badRequest } from "../../errors.ts";
import { fingerprint } from "../../lib/crypto.ts";
import { newId } from "../../lib/ids.ts";
import { iso } from "../../lib/time.ts";
import { publishInvalidation, type Publishing } from "../../store/invalidation.ts";
import { resolveAndCheck } from "../../net/ssrf.ts";
import { DEFAULT_BRIDGE_LABEL, type CreateBridgeBody } from "./model.ts";

export type BridgeRow = typeof bridges.$inferSelect;

export const bridgeAad = (id: string) => `bridges:${id}`;

export function presentBridge(row: BridgeRow) {
  return {
    id: row.id,
    label: row.label,
    kind: row.kind,
    base_url: row.baseUrl,
    token_fingerprint: row.tokenFingerprint,
    cloud_provider: row.cloudProvider,
    cloud_instance_id: row.cloudInstanceId,
    region: row.region,
    status: row.status,
    plan_tier: row.planTier,
    last_health_at: iso(row.lastHealthAt),
    last_error: row.lastError,
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
  };
}

/**
 * An http(s) URL without credentials, query or fragment; stored without a trailing slash so
 * `{base_url}/health` and `{base_url}/v1/chat/completions` join cleanly.
 */
export function parseBaseUrl(text: string): URL {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw badRequest("`base_url` is not a valid URL; send an http:// or https:// URL such as https://bridge.example.com.");
  }
  if (u.protocol !== "http:" && u.protocol !== "https:") throw badRequest("`base_url` must start with http:// or https://.");
  if (u.username || u.password) throw badRequest("`base_url` must not carry a user name or password; send the bridge's secret as `token`.");
  if (u.search || u.hash) throw badRequest("`base_url` must not have a query string or fragment.");
  return u;
}

export const normalizeBaseUrl = (u: URL) => u.toString().replace(/\/+$/, "");

export async function createBridge(ctx: Base, accountId: string, body: CreateBridgeBody): Promise<BridgeRow> {
  const url = parseBaseUrl(body.base_url);
  await resolveAndCheck(ctx, url, "base_url");
  const id = newId("brg");
  const [row] = await ctx.db.insert(bridges).values({
    id,
    accountId,
    label: body.label ?? DEFAULT_BRIDGE_LABEL,
    baseUrl: normalizeBaseUrl(url),
    tokenCiphertext: ctx.secrets.seal(body.token, bridgeAad(id)),
    tokenFingerprint: fingerprint(body.token),
    cloudProvider: body.cloud_provider ?? null,
    cloudInstanceId: body.cloud_instance_id ?? null,
    region: body.region ?? null,
    planTier: body.plan_tier ?? null,
    status: body.status ?? "unknown",
  }).returning();
  return row!;
}

/** The caller's bridges that are not revoked, oldest first. */
export function listBridges(db: Db, accountId: string): Promise<BridgeRow[]> {
  return db.select().from(bridges).where(and(eq(bridges.accountId, accountId), isNull(bridges.revokedAt))).orderBy(asc(bridges.createdAt), asc(bridges.id));
}

/** Revokes one of the caller's bridges: its sealed token is erased and its lanes stop serving. */
export async function revokeBridge(ctx: Base & Publishing, accountId: string, id: string): Promise<boolean> {
  const now = new Date();
  const rows = await ctx.db.update(bridges)
    .set({ revokedAt: now, tokenCiphertext: "", updatedAt: now })
    .where(and(eq(bridges.id, id), eq(bridges.accountId, accountId), isNull(bridges.revokedAt)))
    .returning({ id: bridges.id });
  if (rows.length === 0) return false;
  await publishInvalidation(ctx, { kind: "account", accountId });
  return true;
}

/** Every bridge the health job watches (all accounts, not revoked). */
export function activeBridges(db: Db): Promise<BridgeRow[]> {
  return db.select().from(bridges).where(isNull(bridges.revokedAt));
}

/** The decrypted token of a live bridge, or null (for the bridge lane). */
export async function openBridgeToken(ctx: Base, accountId: string, id: string): Promise<{ baseUrl: string; token: string } | null> {
  const rows = await ctx.db.select().from(bridges).where(and(eq(bridges.id, id), eq(bridges.accountId, accountId), isNull(bridges.revokedAt))).limit(1);
  const row = rows[0];
  if (!row) return null;
  return { baseUrl: row.baseUrl, token: ctx.secrets.open(row.tokenCiphertext, bridgeAad(row.id)) };
}
