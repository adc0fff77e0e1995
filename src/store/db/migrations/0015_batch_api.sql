CREATE TABLE "batch_files" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"routing_key_id" text NOT NULL,
	"purpose" text NOT NULL,
	"filename" text NOT NULL,
	"bytes" integer NOT NULL,
	"content" text,
	"batch_id" text,
	"kind" text DEFAULT 'input' NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp with time zone
);
--> statement-breakpoint
ALTER TABLE "blitz_job_items" ADD COLUMN "custom_id" text;--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "kind" text DEFAULT 'blitz' NOT NULL;--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "endpoint" text;--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "input_file_id" text;--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "metadata" jsonb;--> statement-breakpoint
ALTER TABLE "blitz_jobs" ADD COLUMN "reserved_usd" double precision;--> statement-breakpoint
CREATE INDEX "batch_files_key" ON "batch_files" USING btree ("routing_key_id","created_at");--> statement-breakpoint
CREATE INDEX "batch_files_batch" ON "batch_files" USING btree ("batch_id");