DROP INDEX "usage_request_attempt";--> statement-breakpoint
ALTER TABLE "usage_records" ADD COLUMN "record_key" text;--> statement-breakpoint
CREATE UNIQUE INDEX "usage_record_key" ON "usage_records" USING btree ("record_key");