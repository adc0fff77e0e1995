// Saved provider keys: plain queries over `credentials`. The key is sealed with AES-256-GCM bound
// to `credentials:<id>`; only its last four characters are ever shown.
import { and, asc, eq } from "drizzle-orm";
import type { Base } from "../../base.ts";
import type { Db } from "../../store/db/client.ts";
import { credentials } from "../../store/db/schema/index.ts";
import { fingerprint } from "../../lib/crypto.ts";
import { newId } from "../../lib/ids.ts";
import { iso } from "../../lib/time.ts";
import { publishInvalidation, type Publishing } from "../../store/invalidation.ts";
import type { CreateCredentialBody } from "./model.ts";

export type CredentialRow = typeof credentials.$inferSelect;

export const credentialAad = (id: string) => `credentials:${id}`;

export function presentCredential(row: CredentialRow) {
  return {
    id: row.id,
    provider: row.provider,
    label: row.label,
    key_fingerprint: row.keyFingerprint,
    created_at: iso(row.createdAt),
  };
}

export async function createCredential(ctx: Base, accountId: string, body: CreateCredentialBody): Promise<CredentialRow> {
  const id = newId("cred");
  const [row] = await ctx.db.insert(credentials).values({
    id,
    accountId,
    provider: body.provider,
    label: body.label ?? `${body.provider} key`,
    keyCiphertext: ctx.secrets.seal(body.api_key, credentialAad(id)),
    keyFingerprint: fingerprint(body.api_key),
  }).returning();
  return row!;
}

/** The caller's saved keys, oldest first (the classifier default is the oldest per provider). */
export function listCredentials(db: Db, accountId: string): Promise<CredentialRow[]> {
  return db.select().from(credentials).where(eq(credentials.accountId, accountId)).orderBy(asc(credentials.createdAt), asc(credentials.id));
}

export async function findCredential(db: Db, accountId: string, id: string): Promise<CredentialRow | null> {
  const rows = await db.select().from(credentials).where(and(eq(credentials.id, id), eq(credentials.accountId, accountId))).limit(1);
  return rows[0] ?? null;
}

/** Deletes the row (ciphertext included) and tells every instance to drop the account's cached lanes. */
export async function deleteCredential(ctx: Base & Publishing, accountId: string, id: string): Promise<boolean> {
  const gone = await ctx.db.delete(credentials).where(and(eq(credentials.id, id), eq(credentials.accountId, accountId))).returning({ id: credentials.id });
  if (gone.length === 0) return false;
  await publishInvalidation(ctx, { kind: "account", accountId });
  return true;
}

/** The decrypted provider key of one of the account's credentials, or null (for the lanes). */
export async function openCredentialKey(ctx: Base, accountId: string, id: string): Promise<{ provider: string; apiKey: string } | null> {
  const row = await findCredential(ctx.db, accountId, id);
  if (!row) return null;
  return { provider: row.provider, apiKey: ctx.secrets.open(row.keyCiphertext, credentialAad(row.id)) };
}
