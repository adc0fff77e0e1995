import { doublePrecision, pgTable, primaryKey, text, timestamp } from "drizzle-orm/pg-core";

/**
 * Operator prices (CONTRACT §9), per provider (a lane's provider id) and model, in USD per million
 * tokens; written by the admin command only (no API route reaches it: a tenant never sets a
 * price), read by every instance at start and again when the admin command tells them.
 */
export const operatorPrices = pgTable("operator_prices", {
  provider: text("provider").notNull(),
  model: text("model").notNull(),
  inputPerMtok: doublePrecision("input_per_mtok").notNull(),
  outputPerMtok: doublePrecision("output_per_mtok").notNull(),
  cacheReadPerMtok: doublePrecision("cache_read_per_mtok"),
  cacheWritePerMtok: doublePrecision("cache_write_per_mtok"),
  cacheWrite1hPerMtok: doublePrecision("cache_write_1h_per_mtok"),
  updatedAt: timestamp("updated_at", { withTimezone: true, mode: "date" }).notNull().defaultNow(),
}, (t) => [primaryKey({ name: "operator_prices_pkey", columns: [t.provider, t.model] })]);
