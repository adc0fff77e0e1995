// Account tokens: `sk_` (read_write) and `rk_` (read_only). Only the sha256 is stored; the raw
// token exists in the one response that creates it. Queries take `db` so they run inside a
// transaction too.
import { and, asc, eq, isNull } from "drizzle-orm";
import type { Db } from "../../store/db/client.ts";
import { accountTokens } from "../../store/db/schema/index.ts";
import { randomToken, sha256Hex } from "../../lib/crypto.ts";
import { newId } from "../../lib/ids.ts";
import { badRequest } from "../../errors.ts";
import type { AccountToken } from "../guard.ts";
import type { TokenScope } from "./model.ts";

/** Characters of the raw token kept for display (`sk_` + 7). */
export const TOKEN_PREFIX_LENGTH = 10;

export function newAccountTokenValue(scope: TokenScope): string {
  return `${scope === "read_write" ? "sk" : "rk"}_${randomToken(40)}`;
}

export async function issueAccountToken(db: Db, accountId: string, scope: TokenScope, label: string, now = new Date()): Promise<{ row: AccountToken; raw: string }> {
  const raw = newAccountTokenValue(scope);
  const [row] = await db
    .insert(accountTokens)
    .values({ id: newId("tok"), accountId, tokenHash: sha256Hex(raw), prefix: raw.slice(0, TOKEN_PREFIX_LENGTH), scope, label, createdAt: now })
    .returning();
  return { row: row!, raw };
}

/** Live (not revoked) tokens of an account, oldest first. */
export async function listAccountTokens(db: Db, accountId: string): Promise<AccountToken[]> {
  return db.select().from(accountTokens)
    .where(and(eq(accountTokens.accountId, accountId), isNull(accountTokens.revokedAt)))
    .orderBy(asc(accountTokens.createdAt), asc(accountTokens.id));
}

/** Revokes one of the account's tokens (idempotent for an already revoked one). An id that is not the caller's is a 400. */
export async function revokeAccountToken(db: Db, accountId: string, tokenId: string, now = new Date()): Promise<void> {
  const [row] = await db.select({ id: accountTokens.id }).from(accountTokens)
    .where(and(eq(accountTokens.id, tokenId), eq(accountTokens.accountId, accountId))).limit(1);
  if (!row) throw badRequest("Query parameter `id` does not name one of this account's tokens. List them with GET /v1/organizations/tokens.");
  await db.update(accountTokens).set({ revokedAt: now })
    .where(and(eq(accountTokens.id, tokenId), isNull(accountTokens.revokedAt)));
}
