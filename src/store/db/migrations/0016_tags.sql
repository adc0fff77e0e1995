-- Tags (CONTRACT §9): a usage record carries its request's tags (a GIN index of the tagged records
-- for ?tag=, a btree of the tagged records per account and time for ?by=tag: both partial, so an
-- untagged record costs its INSERT nothing more), a routing key may require them, and a /blitz job
-- keeps the tags it was submitted with for its items' records. Indexes created on the partitioned
-- table reach every month partition, present and future (ATTACH PARTITION).
ALTER TABLE "routing_keys" ADD COLUMN "require_tags" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "tags" text[];--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "tags" text[];--> statement-breakpoint
CREATE INDEX "usage_tags" ON "usage_records" USING gin ("tags") WHERE "tags" IS NOT NULL;--> statement-breakpoint
CREATE INDEX "usage_tagged" ON "usage_records" USING btree ("account_id","created_at") WHERE "tags" IS NOT NULL;