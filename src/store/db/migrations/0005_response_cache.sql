ALTER TABLE "routing_keys" ADD COLUMN "cache" jsonb;--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "saved_usd" double precision DEFAULT 0 NOT NULL;