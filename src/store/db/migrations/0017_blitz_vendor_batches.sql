CREATE TABLE "blitz_vendor_batches" (
	"id" text PRIMARY KEY NOT NULL,
	"job_id" text NOT NULL,
	"provider" text NOT NULL,
	"lane_index" integer NOT NULL,
	"vendor_batch_id" text,
	"status" text DEFAULT 'submitting' NOT NULL,
	"vendor_status" text,
	"claimed_by" text,
	"claimed_until" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"ended_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "blitz_vendor_batches_status" ON "blitz_vendor_batches" USING btree ("status");--> statement-breakpoint
CREATE INDEX "blitz_vendor_batches_job" ON "blitz_vendor_batches" USING btree ("job_id");