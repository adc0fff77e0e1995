CREATE TABLE "blitz_job_items" (
	"job_id" text NOT NULL,
	"idx" integer NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"request" jsonb NOT NULL,
	"http_status" integer,
	"result" jsonb,
	"usage" jsonb,
	"cost_usd" double precision DEFAULT 0 NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"owner" text,
	CONSTRAINT "blitz_job_items_job_id_idx_pk" PRIMARY KEY("job_id","idx")
);
--> statement-breakpoint
CREATE TABLE "blitz_jobs" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"routing_key_id" text NOT NULL,
	"key_hash" text NOT NULL,
	"status" text DEFAULT 'queued' NOT NULL,
	"total" integer NOT NULL,
	"remaining" integer NOT NULL,
	"succeeded" integer DEFAULT 0 NOT NULL,
	"failed" integer DEFAULT 0 NOT NULL,
	"not_run" integer DEFAULT 0 NOT NULL,
	"interrupted" integer DEFAULT 0 NOT NULL,
	"cost_usd" double precision DEFAULT 0 NOT NULL,
	"stop_reason" text,
	"webhook_url" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp with time zone,
	"expires_at" timestamp with time zone
);
--> statement-breakpoint
CREATE INDEX "blitz_jobs_key" ON "blitz_jobs" USING btree ("routing_key_id","created_at");--> statement-breakpoint
CREATE INDEX "blitz_jobs_expiry" ON "blitz_jobs" USING btree ("expires_at");