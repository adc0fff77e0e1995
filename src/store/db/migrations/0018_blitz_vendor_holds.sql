ALTER TABLE "blitz_vendor_batches" ADD COLUMN "routing_key_id" text;--> statement-breakpoint
ALTER TABLE "blitz_vendor_batches" ADD COLUMN "held_usd" double precision DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "blitz_vendor_batches" ADD COLUMN "held_month" text;--> statement-breakpoint
CREATE INDEX "blitz_vendor_batches_held" ON "blitz_vendor_batches" USING btree ("routing_key_id","held_month") WHERE "blitz_vendor_batches"."held_usd" > 0;