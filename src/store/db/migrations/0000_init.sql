CREATE TABLE "account_tokens" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"token_hash" text NOT NULL,
	"prefix" text NOT NULL,
	"scope" text NOT NULL,
	"label" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"revoked_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	CONSTRAINT "account_tokens_token_hash_unique" UNIQUE("token_hash")
);
--> statement-breakpoint
CREATE TABLE "accounts" (
	"id" text PRIMARY KEY NOT NULL,
	"email" text NOT NULL,
	"plan" text DEFAULT 'free' NOT NULL,
	"source" text,
	"account_expires_at" timestamp with time zone,
	"activated_at" timestamp with time zone,
	"removed_at" timestamp with time zone,
	"owner_notice_sent_at" timestamp with time zone,
	"stripe_checkout_url" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "billing_events" (
	"id" text PRIMARY KEY NOT NULL,
	"type" text NOT NULL,
	"account_id" text,
	"outcome" text NOT NULL,
	"received_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "signup_codes" (
	"id" text PRIMARY KEY NOT NULL,
	"email" text NOT NULL,
	"code_hash" text NOT NULL,
	"source" text,
	"ip" text,
	"attempts" integer DEFAULT 0 NOT NULL,
	"expires_at" timestamp with time zone NOT NULL,
	"used_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "bridges" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"label" text NOT NULL,
	"kind" text DEFAULT 'coding_agent' NOT NULL,
	"base_url" text NOT NULL,
	"token_ciphertext" text NOT NULL,
	"token_fingerprint" text NOT NULL,
	"cloud_provider" text,
	"cloud_instance_id" text,
	"region" text,
	"status" text DEFAULT 'unknown' NOT NULL,
	"plan_tier" text,
	"last_health_at" timestamp with time zone,
	"last_error" text,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "credentials" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"provider" text NOT NULL,
	"label" text NOT NULL,
	"key_ciphertext" text NOT NULL,
	"key_fingerprint" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "routing_keys" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"label" text NOT NULL,
	"key_hash" text NOT NULL,
	"key_prefix" text NOT NULL,
	"mode" text DEFAULT 'fallback' NOT NULL,
	"classifier_provider" text,
	"classifier_model" text,
	"classifier_instructions" text,
	"classifier_credential_id" text,
	"monthly_budget_usd" double precision,
	"budget_excludes_seats" boolean DEFAULT true NOT NULL,
	"lanes" jsonb DEFAULT '[]'::jsonb NOT NULL,
	"last_used_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "routing_keys_key_hash_unique" UNIQUE("key_hash")
);
--> statement-breakpoint
CREATE TABLE "sub_sessions" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"status" text NOT NULL,
	"auth_ciphertext" text,
	"source_path" text,
	"provisioned" boolean DEFAULT false NOT NULL,
	"account_status" text,
	"last_error" text,
	"connected_at" timestamp with time zone,
	"last_used_at" timestamp with time zone,
	"expires_at" timestamp with time zone,
	"revoked_at" timestamp with time zone,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "usage_records" (
	"id" bigserial PRIMARY KEY NOT NULL,
	"request_id" text,
	"account_id" text NOT NULL,
	"routing_key_id" text,
	"endpoint" text NOT NULL,
	"lane_index" integer,
	"provider" text NOT NULL,
	"model" text,
	"status" integer NOT NULL,
	"outcome" text NOT NULL,
	"error_code" text,
	"prompt_tokens" integer DEFAULT 0 NOT NULL,
	"completion_tokens" integer DEFAULT 0 NOT NULL,
	"cached_tokens" integer DEFAULT 0 NOT NULL,
	"cache_write_tokens" integer DEFAULT 0 NOT NULL,
	"cost_usd" double precision DEFAULT 0 NOT NULL,
	"latency_ms" integer DEFAULT 0 NOT NULL,
	"ttfb_ms" integer,
	"seat" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "account_tokens_account" ON "account_tokens" USING btree ("account_id");--> statement-breakpoint
CREATE UNIQUE INDEX "accounts_email_live" ON "accounts" USING btree ("email") WHERE removed_at is null;--> statement-breakpoint
CREATE INDEX "accounts_expiry" ON "accounts" USING btree ("account_expires_at") WHERE removed_at is null and plan = 'free';--> statement-breakpoint
CREATE INDEX "signup_codes_email" ON "signup_codes" USING btree ("email","created_at");--> statement-breakpoint
CREATE INDEX "bridges_account" ON "bridges" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "credentials_account" ON "credentials" USING btree ("account_id","provider","created_at");--> statement-breakpoint
CREATE INDEX "routing_keys_account" ON "routing_keys" USING btree ("account_id");--> statement-breakpoint
CREATE INDEX "sub_sessions_account" ON "sub_sessions" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "usage_account_time" ON "usage_records" USING btree ("account_id","created_at");--> statement-breakpoint
CREATE INDEX "usage_key_time" ON "usage_records" USING btree ("routing_key_id","created_at");