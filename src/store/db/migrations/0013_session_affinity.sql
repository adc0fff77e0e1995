ALTER TABLE "routing_keys" ADD COLUMN "session_affinity_ttl_seconds" integer;--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "affinity" text;