CREATE TABLE "budget_alert_firings" (
	"routing_key_id" text NOT NULL,
	"month" text NOT NULL,
	"threshold_percent" integer NOT NULL,
	"account_id" text NOT NULL,
	"fired_at" timestamp with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "budget_alert_firings_routing_key_id_month_threshold_percent_pk" PRIMARY KEY("routing_key_id","month","threshold_percent")
);
--> statement-breakpoint
CREATE TABLE "budget_alert_settings" (
	"account_id" text PRIMARY KEY NOT NULL,
	"thresholds" jsonb NOT NULL,
	"webhook_url" text,
	"email" text,
	"updated_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" text PRIMARY KEY NOT NULL,
	"account_id" text NOT NULL,
	"channel" text NOT NULL,
	"target" text NOT NULL,
	"event_type" text NOT NULL,
	"body" text NOT NULL,
	"status" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp with time zone DEFAULT now() NOT NULL,
	"lease_until" timestamp with time zone,
	"last_error" text,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"delivered_at" timestamp with time zone
);
--> statement-breakpoint
CREATE TABLE "webhook_secrets" (
	"account_id" text PRIMARY KEY NOT NULL,
	"secret_ciphertext" text NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "webhook_deliveries_due" ON "webhook_deliveries" USING btree ("status","next_attempt_at");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_account" ON "webhook_deliveries" USING btree ("account_id","created_at");