ALTER TABLE "routing_keys" ADD COLUMN "rpm_limit" integer;--> statement-breakpoint
ALTER TABLE "routing_keys" ADD COLUMN "tpm_limit" integer;--> statement-breakpoint
ALTER TABLE "routing_keys" ADD COLUMN "max_concurrent_requests" integer;