// An account's webhook signing secret (CONTRACT §8): `whsec_…`, created on first read, rotated by
// POST, stored AES-256-GCM sealed and bound to the account (`webhook_secrets:<account id>`), so it
// can sign every delivery and be shown again to `sk_` tokens; it is never logged.
import { eq, sql } from "drizzle-orm";
import type { Base } from "../base.ts";
import { randomToken } from "../lib/crypto.ts";
import { webhookSecrets } from "../store/db/schema/index.ts";

const aad = (accountId: string) => `webhook_secrets:${accountId}`;
const fresh = () => `whsec_${randomToken(40)}`;

/** The account's secret, created when it has none yet (two instances creating at once agree on one). */
export async function webhookSecret(ctx: Base, accountId: string): Promise<string> {
  const read = async () => {
    const [row] = await ctx.db.select().from(webhookSecrets).where(eq(webhookSecrets.accountId, accountId)).limit(1);
    return row ? ctx.secrets.open(row.secretCiphertext, aad(accountId)) : null;
  };
  const have = await read();
  if (have) return have;
  await ctx.db.insert(webhookSecrets).values({ accountId, secretCiphertext: ctx.secrets.seal(fresh(), aad(accountId)) }).onConflictDoNothing();
  return (await read())!;
}

/** A new secret replaces the old one at once: deliveries sent from now on are signed with it. */
export async function rotateWebhookSecret(ctx: Base, accountId: string): Promise<string> {
  const secret = fresh();
  const sealed = ctx.secrets.seal(secret, aad(accountId));
  await ctx.db.insert(webhookSecrets).values({ accountId, secretCiphertext: sealed })
    .onConflictDoUpdate({ target: webhookSecrets.accountId, set: { secretCiphertext: sealed, createdAt: sql`now()` } });
  return secret;
}
