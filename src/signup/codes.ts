// Emailed one-time codes. Stored as sha256(id:code) so the table never holds a usable code.
// Rules: only the newest code of an email is valid, it works once, it dies after
// MAX_WRONG_GUESSES wrong guesses and after SIGNUP_CODE_TTL_SECONDS.
import { and, desc, eq, gt, isNull, lt, sql } from "drizzle-orm";
import type { Db } from "../store/db/client.ts";
import { signupCodes } from "../store/db/schema/index.ts";
import { randomDigits, safeEqual, sha256Hex } from "../lib/crypto.ts";
import { newId } from "../lib/ids.ts";

export const MAX_WRONG_GUESSES = 5;
export const CODE_DIGITS = 6;

export type SignupCode = typeof signupCodes.$inferSelect;

const hashCode = (id: string, code: string) => sha256Hex(`${id}:${code}`);

export async function createCode(db: Db, p: { email: string; source: string | null; ip: string; ttlSeconds: number; now: Date }): Promise<{ row: SignupCode; code: string }> {
  const id = newId("code");
  const code = randomDigits(CODE_DIGITS);
  const [row] = await db.insert(signupCodes).values({
    id, email: p.email, codeHash: hashCode(id, code), source: p.source, ip: p.ip,
    expiresAt: new Date(p.now.getTime() + p.ttlSeconds * 1000), createdAt: p.now,
  }).returning();
  return { row: row!, code };
}

/** Removes a code whose mail never left (so the code before it stays the newest). */
export async function discardCode(db: Db, id: string): Promise<void> {
  await db.delete(signupCodes).where(eq(signupCodes.id, id));
}

export type CheckResult = { ok: true; row: SignupCode } | { ok: false };

/**
 * Checks `code` against the newest code of `email` and, when it matches, uses it up, atomically:
 * two verifies racing with one code get one success. A wrong guess counts against the code.
 */
export async function consumeCode(db: Db, email: string, code: string, now: Date): Promise<CheckResult> {
  const [newest] = await db.select().from(signupCodes)
    .where(eq(signupCodes.email, email))
    .orderBy(desc(signupCodes.createdAt), desc(signupCodes.id))
    .limit(1);
  if (!newest || newest.usedAt || newest.expiresAt <= now || newest.attempts >= MAX_WRONG_GUESSES) return { ok: false };
  if (!safeEqual(newest.codeHash, hashCode(newest.id, code))) {
    await db.update(signupCodes).set({ attempts: sql`${signupCodes.attempts} + 1` })
      .where(and(eq(signupCodes.id, newest.id), isNull(signupCodes.usedAt)));
    return { ok: false };
  }
  const [used] = await db.update(signupCodes).set({ usedAt: now })
    .where(and(
      eq(signupCodes.id, newest.id),
      isNull(signupCodes.usedAt),
      lt(signupCodes.attempts, MAX_WRONG_GUESSES),
      gt(signupCodes.expiresAt, now),
    ))
    .returning();
  return used ? { ok: true, row: used } : { ok: false };
}
