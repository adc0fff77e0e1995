import { index, integer, jsonb, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

const ts = (name: string) => timestamp(name, { withTimezone: true, mode: "date" });

/** An account's webhook signing secret (CONTRACT §8), AES-256-GCM sealed, bound to `webhook_secrets:<account id>`. */
export const webhookSecrets = pgTable("webhook_secrets", {
  accountId: text("account_id").primaryKey(),
  secretCiphertext: text("secret_ciphertext").notNull(),
  createdAt: ts("created_at").notNull().defaultNow(),
});

/**
 * The outbox of signed webhooks and alert mails: written in the same transaction as the event it
 * announces (a job's last item, a budget threshold's first crossing), then sent by whichever
 * instance claims it first (a lease, so a dead sender's delivery is taken over), retried with
 * backoff for 24 hours.
 */
export const webhookDeliveries = pgTable("webhook_deliveries", {
  /** The event id (`evt_…`), also in the body: receivers deduplicate on it. */
  id: text("id").primaryKey(),
  accountId: text("account_id").notNull(),
  /** webhook | email */
  channel: text("channel").notNull(),
  /** The URL (webhook) or address (email). */
  target: text("target").notNull(),
  eventType: text("event_type").notNull(),
  /** The exact bytes signed and sent. */
  body: text("body").notNull(),
  /** pending | delivered | failed */
  status: text("status").notNull().default("pending"),
  attempts: integer("attempts").notNull().default(0),
  nextAttemptAt: ts("next_attempt_at").notNull().defaultNow(),
  /** A sender holds the delivery until then; past it, another instance may take it over. */
  leaseUntil: ts("lease_until"),
  lastError: text("last_error"),
  createdAt: ts("created_at").notNull().defaultNow(),
  deliveredAt: ts("delivered_at"),
}, (t) => [index("webhook_deliveries_due").on(t.status, t.nextAttemptAt), index("webhook_deliveries_account").on(t.accountId, t.createdAt)]);

/** An account's budget alerts: thresholds (percent of each key's monthly budget) and where they go. */
export const budgetAlertSettings = pgTable("budget_alert_settings", {
  accountId: text("account_id").primaryKey(),
  thresholds: jsonb("thresholds").$type<number[]>().notNull(),
  webhookUrl: text("webhook_url"),
  email: text("email"),
  updatedAt: ts("updated_at").notNull().defaultNow(),
});

/** One row per threshold that fired, per key and month: the primary key makes it fire once across instances. */
export const budgetAlertFirings = pgTable("budget_alert_firings", {
  routingKeyId: text("routing_key_id").notNull(),
  month: text("month").notNull(),
  thresholdPercent: integer("threshold_percent").notNull(),
  accountId: text("account_id").notNull(),
  firedAt: ts("fired_at").notNull().defaultNow(),
}, (t) => [primaryKey({ columns: [t.routingKeyId, t.month, t.thresholdPercent] })]);
