-- Operator prices (CONTRACT §9): a table the admin command writes and every instance reads (no API
-- route writes it), and where each usage record's price came from (catalog, operator, fallback).
CREATE TABLE "operator_prices" (
	"provider" text NOT NULL,
	"model" text NOT NULL,
	"input_per_mtok" double precision NOT NULL,
	"output_per_mtok" double precision NOT NULL,
	"cache_read_per_mtok" double precision,
	"cache_write_per_mtok" double precision,
	"cache_write_1h_per_mtok" double precision,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "operator_prices_pkey" PRIMARY KEY("provider","model")
);
--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "price_source" text;