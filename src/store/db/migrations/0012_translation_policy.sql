-- The translation policy of a routing key (CONTRACT §9: adapt, the default, or strict) and, on each
-- usage record, the request fields its lane got mapped, dropped or moved ("field=action, …").
ALTER TABLE "routing_keys" ADD COLUMN "translation" text DEFAULT 'adapt' NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "adapted" text;