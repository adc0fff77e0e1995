// The account plan's transitions (SPEC "Account plan"), each one conditional UPDATE so that when
// two of them race on one account (activation against removal at the deadline) exactly one wins:
// Postgres re-checks the WHERE of the second writer after the first commits.
//   (none) ─verify→ free (deadline fixed at signup time) ─checkout→ pro
//                        └─deadline passes→ removed (tombstone: its tokens answer 410)
import { and, eq, isNull, lte, sql } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import { accounts, accountTokens, bridges, credentials, routingKeys, subSessions, usageDaily, usageRecords } from "../store/db/schema/index.ts";
import { newId } from "../lib/ids.ts";
import type { Account } from "../management/guard.ts";

export async function findLiveAccountByEmail(db: Db, email: string): Promise<Account | null> {
  const [row] = await db.select().from(accounts).where(and(eq(accounts.email, email), isNull(accounts.removedAt))).limit(1);
  return row ?? null;
}

export async function findAccount(db: Db, id: string): Promise<Account | null> {
  const [row] = await db.select().from(accounts).where(eq(accounts.id, id)).limit(1);
  return row ?? null;
}

/**
 * Creates the `free` account of a verified signup. Returns null when a live account for the email
 * appeared meanwhile (the one-live-account-per-email index refused the insert).
 */
export async function createFreeAccount(db: Db, p: { email: string; source: string | null; expiresAt: Date; now: Date }): Promise<Account | null> {
  const rows = await db.insert(accounts)
    .values({ id: newId("acct"), email: p.email, plan: "free", source: p.source, accountExpiresAt: p.expiresAt, createdAt: p.now })
    .onConflictDoNothing()
    .returning();
  return rows[0] ?? null;
}

export type ActivationOutcome = "activated" | "already_active" | "account_removed" | "unknown_account";

/** free → pro: the deadline is cleared for good. A removed account is never revived. */
export async function activateAccount(db: Db, accountId: string, now = new Date()): Promise<ActivationOutcome> {
  const done = await db.update(accounts)
    .set({ plan: "pro", accountExpiresAt: null, activatedAt: now })
    .where(and(eq(accounts.id, accountId), isNull(accounts.removedAt), eq(accounts.plan, "free")))
    .returning({ id: accounts.id });
  if (done.length) return "activated";
  const acct = await findAccount(db, accountId);
  if (!acct) return "unknown_account";
  if (acct.removedAt) return "account_removed";
  return "already_active";
}

/**
 * free past its deadline → removed. Keeps the account row and its tokens as a tombstone (so the
 * tokens answer 410 account_expired rather than 401) and deletes everything the account held.
 * Returns false when the account was activated, already removed, or is not past its deadline.
 */
export async function removeExpiredAccount(db: Db, accountId: string, now = new Date()): Promise<boolean> {
  return db.transaction(async (tx) => {
    const t = tx as unknown as Db;
    const hit = await t.update(accounts)
      .set({ removedAt: now })
      .where(and(eq(accounts.id, accountId), isNull(accounts.removedAt), eq(accounts.plan, "free"), lte(accounts.accountExpiresAt, now)))
      .returning({ id: accounts.id });
    if (!hit.length) return false;
    await t.delete(routingKeys).where(eq(routingKeys.accountId, accountId));
    await t.delete(credentials).where(eq(credentials.accountId, accountId));
    await t.delete(bridges).where(eq(bridges.accountId, accountId));
    await t.delete(subSessions).where(eq(subSessions.accountId, accountId));
    await t.delete(usageRecords).where(eq(usageRecords.accountId, accountId));
    await t.delete(usageDaily).where(eq(usageDaily.accountId, accountId));
    return true;
  });
}

/** Unpaid accounts whose deadline has passed and that are not yet removed. */
export async function expiredAccountIds(db: Db, now: Date, limit: number): Promise<string[]> {
  const rows = await db.select({ id: accounts.id }).from(accounts)
    .where(and(isNull(accounts.removedAt), eq(accounts.plan, "free"), lte(accounts.accountExpiresAt, now)))
    .limit(limit);
  return rows.map((r) => r.id);
}

/** Claims the one-time owner notice; false when it was already sent (or is being sent). */
export async function claimOwnerNotice(db: Db, accountId: string, now: Date): Promise<boolean> {
  const rows = await db.update(accounts).set({ ownerNoticeSentAt: now })
    .where(and(eq(accounts.id, accountId), isNull(accounts.ownerNoticeSentAt)))
    .returning({ id: accounts.id });
  return rows.length > 0;
}

/** Gives the claim back when the notice could not be sent, so the next verify tries again. */
export async function releaseOwnerNotice(db: Db, accountId: string): Promise<void> {
  await db.update(accounts).set({ ownerNoticeSentAt: null }).where(eq(accounts.id, accountId));
}

export async function setStripeCheckoutUrl(db: Db, accountId: string, url: string): Promise<void> {
  await db.update(accounts).set({ stripeCheckoutUrl: url }).where(eq(accounts.id, accountId));
}

/** Live tokens of an account (used by the admin command's listing). */
export async function countLiveTokens(db: Db, accountId: string): Promise<number> {
  const [r] = await db.select({ n: sql<number>`count(*)::int` }).from(accountTokens)
    .where(and(eq(accountTokens.accountId, accountId), isNull(accountTokens.revokedAt)));
  return Number(r?.n ?? 0);
}
