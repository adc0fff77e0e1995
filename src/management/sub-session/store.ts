// Sub sessions (the subscription sign-in) in Postgres. The auth_json is sealed with AES-256-GCM
// bound to `sub_sessions:<id>` and cleared on revoke. An account has at most one live session
// (revoked_at null); connecting again replaces its sign-in and keeps its id, only a disconnect ends it.
// The sub lane reads and re-seals the sign-in itself (providers/sub/sign-in-store.ts).
import { and, desc, eq, isNull, sql } from "drizzle-orm";
import type { Base } from "../../base.ts";
import type { Db } from "../../store/db/client.ts";
import { subSessions } from "../../store/db/schema/index.ts";
import { newId } from "../../lib/ids.ts";
import { iso } from "../../lib/time.ts";
import { publishInvalidation, type Publishing } from "../../store/invalidation.ts";
import type { AuthJson } from "../../providers/sub/auth-file.ts";
export type SubSessionRow = typeof subSessions.$inferSelect;

export { subSessionAad } from "../../providers/sub/sign-in-store.ts";

/** The status a reader sees: a connected session past its `expires_at` reads as `expired`. */
export function subSessionStatus(row: SubSessionRow, now = Date.now()): string {
  if (row.revokedAt) return "revoked";
  if (row.status === "connected" && row.expiresAt && row.expiresAt.getTime() <= now) return "expired";
  return row.status;
}

export function presentSubSession(row: SubSessionRow, now = Date.now()) {
  const status = subSessionStatus(row, now);
  return {
    id: row.id,
    connected: status === "connected",
    status,
    connected_at: iso(row.connectedAt),
    last_used_at: iso(row.lastUsedAt),
    expires_at: iso(row.expiresAt),
    last_error: row.lastError,
    sub_host: { provisioned: row.provisioned, account_status: row.accountStatus },
  };
}

/** What GET answers for an account that never connected a sign-in. */
export const NO_SUB_SESSION = {
  id: null,
  connected: false,
  status: "pending",
  connected_at: null,
  last_used_at: null,
  expires_at: null,
  last_error: null,
  sub_host: null,
} as const;

/** The account's most recent session (live or revoked), for GET. */
export async function latestSubSession(db: Db, accountId: string): Promise<SubSessionRow | null> {
  const rows = await db.select().from(subSessions).where(eq(subSessions.accountId, accountId)).orderBy(desc(subSessions.createdAt), desc(subSessions.id)).limit(1);
  return rows[0] ?? null;
}

/** The account's sessions that lanes may reference (not revoked). */
export function liveSubSessions(db: Db, accountId: string): Promise<SubSessionRow[]> {
  return db.select().from(subSessions).where(and(eq(subSessions.accountId, accountId), isNull(subSessions.revokedAt))).orderBy(desc(subSessions.createdAt));
}

export interface SubSessionSignIn {
  /** Seals the sign-in for the session id it will be stored under (the id is bound into the AAD). */
  seal: (id: string) => string;
  sourcePath: string | null;
  expiresAt: Date | null;
  provisioned: boolean;
  accountStatus: string;
  lastError: string | null;
}

export const newSubSessionId = () => newId("sub");

/**
 * Stores an uploaded sign-in (CONTRACT §4). An account with a live session keeps that session and
 * its id: the sign-in, source path and expiry are replaced in place, so lanes naming the id keep
 * serving without a PATCH. Without a live session a new one starts. Returns the stored row.
 */
export async function connectSubSession(ctx: Base & Publishing, accountId: string, s: SubSessionSignIn): Promise<SubSessionRow> {
  const now = new Date();
  const row = await ctx.db.transaction(async (tx) => {
    // Connects of one account are serialized, so two at once cannot both start a session.
    await tx.execute(sql`select pg_advisory_xact_lock(hashtext(${`sub_sessions:${accountId}`}))`);
    const [live] = await tx.select({ id: subSessions.id }).from(subSessions)
      .where(and(eq(subSessions.accountId, accountId), isNull(subSessions.revokedAt)))
      .orderBy(desc(subSessions.createdAt)).limit(1);
    const fields = {
      status: "connected",
      sourcePath: s.sourcePath,
      provisioned: s.provisioned,
      accountStatus: s.accountStatus,
      lastError: s.lastError,
      connectedAt: now,
      expiresAt: s.expiresAt,
      updatedAt: now,
    };
    if (live) {
      const [updated] = await tx.update(subSessions)
        .set({ ...fields, authCiphertext: s.seal(live.id) })
        .where(eq(subSessions.id, live.id)).returning();
      return updated!;
    }
    const id = newSubSessionId();
    const [inserted] = await tx.insert(subSessions).values({ ...fields, id, accountId, authCiphertext: s.seal(id), createdAt: now }).returning();
    return inserted!;
  });
  await publishInvalidation(ctx, { kind: "account", accountId });
  return row;
}

/**
 * Records the provisioning check of a stored session. A session revoked meanwhile (a disconnect
 * ran) stays as it is. Returns the row as it now reads.
 */
export async function recordProvisioning(ctx: Base & Publishing, accountId: string, sessionId: string, p: { provisioned: boolean; accountStatus: string; lastError: string | null }): Promise<SubSessionRow> {
  const [updated] = await ctx.db.update(subSessions)
    .set({ provisioned: p.provisioned, accountStatus: p.accountStatus, lastError: p.lastError, updatedAt: new Date() })
    .where(and(eq(subSessions.id, sessionId), isNull(subSessions.revokedAt)))
    .returning();
  if (updated) {
    // Lanes cached with the pre-check state must pick up the result.
    await publishInvalidation(ctx, { kind: "account", accountId });
    return updated;
  }
  const [row] = await ctx.db.select().from(subSessions).where(eq(subSessions.id, sessionId)).limit(1);
  return row!;
}

/** Revokes the account's live session(s): the sealed sign-in is erased. Returns how many. */
export async function revokeSubSessions(ctx: Base & Publishing, accountId: string): Promise<number> {
  const now = new Date();
  const rows = await ctx.db.update(subSessions)
    .set({ status: "revoked", revokedAt: now, authCiphertext: null, provisioned: false, updatedAt: now })
    .where(and(eq(subSessions.accountId, accountId), isNull(subSessions.revokedAt)))
    .returning({ id: subSessions.id });
  await publishInvalidation(ctx, { kind: "account", accountId });
  return rows.length;
}
