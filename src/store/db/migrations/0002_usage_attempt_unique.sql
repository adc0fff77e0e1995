ALTER TABLE "usage_records" ADD COLUMN "attempt" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "usage_records" SET "attempt" = n.rn FROM (SELECT "id", row_number() OVER (PARTITION BY "request_id" ORDER BY "id") AS rn FROM "usage_records" WHERE "request_id" IS NOT NULL) AS n WHERE "usage_records"."id" = n."id";--> statement-breakpoint
CREATE UNIQUE INDEX "usage_request_attempt" ON "usage_records" USING btree ("request_id","attempt");
