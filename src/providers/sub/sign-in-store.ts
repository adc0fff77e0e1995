// Where the sub lane's sign-in lives: sealed (AES-256-GCM, bound to `sub_sessions:<id>`) in the
// session's row. The lane reads it and re-seals it after a token refresh; management writes it on
// connect and clears it on revoke (management/sub-session/store.ts).
import { and, eq, isNull } from "drizzle-orm";
import type { SecretBox } from "../../secrets.ts";
import type { Db } from "../../store/db/client.ts";
import { subSessions } from "../../store/db/schema/index.ts";
import type { AuthJson } from "./auth-file.ts";

/** What reading and writing the sign-in needs. */
export interface SignInStores {
  db: Db;
  secrets: SecretBox;
}

/** The associated data a session's sign-in is sealed with. */
export const subSessionAad = (id: string) => `sub_sessions:${id}`;

/**
 * The decrypted sign-in of a live session, or null when the session is unknown, revoked or has
 * no stored sign-in. Callers that serve traffic also check subSessionStatus() for `expired`.
 */
export async function loadSubAuth(ctx: SignInStores, sessionId: string): Promise<AuthJson | null> {
  const rows = await ctx.db.select({ c: subSessions.authCiphertext }).from(subSessions)
    .where(and(eq(subSessions.id, sessionId), isNull(subSessions.revokedAt))).limit(1);
  const c = rows[0]?.c;
  if (!c) return null;
  return JSON.parse(ctx.secrets.open(c, subSessionAad(sessionId))) as AuthJson;
}

/**
 * Re-seals a session's sign-in after a token refresh. A session revoked meanwhile stays revoked
 * and empty (returns false): a refresh racing a disconnect never brings the sign-in back.
 */
export async function saveSubAuth(ctx: SignInStores, sessionId: string, authJson: AuthJson): Promise<boolean> {
  const rows = await ctx.db.update(subSessions)
    .set({ authCiphertext: ctx.secrets.seal(JSON.stringify(authJson), subSessionAad(sessionId)), updatedAt: new Date() })
    .where(and(eq(subSessions.id, sessionId), isNull(subSessions.revokedAt)))
    .returning({ id: subSessions.id });
  return rows.length > 0;
}
