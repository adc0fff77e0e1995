import { sql } from "drizzle-orm";
import { index, integer, pgTable, text, timestamp, uniqueIndex } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** An account. Removed unpaid accounts stay as tombstones (`removed_at`) so their tokens answer 410. */
export const accounts = pgTable(
  "accounts",
  {
    id: text("id").primaryKey(),
    email: text("email").notNull(),
    plan: text("plan").notNull().default("free"), // free | pro
    source: text("source"),
    accountExpiresAt: ts("account_expires_at"),
    activatedAt: ts("activated_at"),
    removedAt: ts("removed_at"),
    ownerNoticeSentAt: ts("owner_notice_sent_at"),
    stripeCheckoutUrl: text("stripe_checkout_url"),
    createdAt: ts("created_at").notNull().defaultNow(),
  },
  (t) => [
    // One live account per email; a removed account frees its email for a fresh signup.
    uniqueIndex("accounts_email_live").on(t.email).where(sql`removed_at is null`),
    index("accounts_expiry").on(t.accountExpiresAt).where(sql`removed_at is null and plan = 'free'`),
  ],
);

/** Account tokens (`sk_` read_write, `rk_` read_only). Only the sha256 of the token is stored. */
export const accountTokens = pgTable("account_tokens", {
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  tokenHash: text("token_hash").notNull().unique(),
  prefix: text("prefix").notNull(),
  scope: text("scope").notNull(), // read_write | read_only
  label: text("label").notNull(),
  createdAt: ts("created_at").notNull().defaultNow(),
  revokedAt: ts("revoked_at"),
  lastUsedAt: ts("last_used_at"),
}, (t) => [index("account_tokens_account").on(t.accountId)]);

/** Emailed one-time codes. Only the sha256 of the code is stored. */
export const signupCodes = pgTable("signup_codes", {
  id: text("id").primaryKey(),
  email: text("email").notNull(),
  codeHash: text("code_hash").notNull(),
  source: text("source"),
  ip: text("ip"),
  attempts: integer("attempts").notNull().default(0),
  expiresAt: ts("expires_at").notNull(),
  usedAt: ts("used_at"),
  createdAt: ts("created_at").notNull().defaultNow(),
}, (t) => [index("signup_codes_email").on(t.email, t.createdAt)]);

/** Billing webhook events already applied: replays are idempotent on the event id. */
export const billingEvents = pgTable("billing_events", {
  id: text("id").primaryKey(),
  type: text("type").notNull(),
  accountId: text("account_id"),
  outcome: text("outcome").notNull(),
  receivedAt: ts("received_at").notNull().defaultNow(),
});

