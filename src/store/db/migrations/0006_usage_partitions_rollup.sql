-- Usage records partitioned by month, and a daily rollup kept by a trigger in the same statement.
-- The existing table is renamed, its rows copied into the partitioned table, then dropped: all in
-- the migration's one transaction, so a failure leaves the old table as it was.
ALTER TABLE "usage_records" RENAME TO "usage_records_unpartitioned";--> statement-breakpoint
ALTER INDEX IF EXISTS "usage_records_pkey" RENAME TO "usage_records_unpartitioned_pkey";--> statement-breakpoint
DROP INDEX IF EXISTS "usage_account_time";--> statement-breakpoint
DROP INDEX IF EXISTS "usage_key_time";--> statement-breakpoint
DROP INDEX IF EXISTS "usage_record_key";--> statement-breakpoint
ALTER SEQUENCE "usage_records_id_seq" OWNED BY NONE;--> statement-breakpoint
CREATE TABLE "usage_records" (
	"id" bigint DEFAULT nextval('usage_records_id_seq') NOT NULL,
	"request_id" text,
	"account_id" text NOT NULL,
	"routing_key_id" text,
	"attempt" integer DEFAULT 0 NOT NULL,
	"record_key" text COLLATE "C",
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
	"price_estimated" boolean DEFAULT false NOT NULL,
	"latency_ms" integer DEFAULT 0 NOT NULL,
	"ttfb_ms" integer,
	"seat" boolean DEFAULT false NOT NULL,
	"created_at" timestamp with time zone DEFAULT now() NOT NULL,
	"saved_usd" double precision DEFAULT 0 NOT NULL,
	CONSTRAINT "usage_records_pkey" PRIMARY KEY ("id", "created_at")
) PARTITION BY RANGE ("created_at");--> statement-breakpoint
ALTER SEQUENCE "usage_records_id_seq" OWNED BY "usage_records"."id";--> statement-breakpoint
-- Newest-first pages of an account or a key walk these backwards from the cursor (keyset).
CREATE INDEX "usage_account_id" ON "usage_records" USING btree ("account_id", "id");--> statement-breakpoint
CREATE INDEX "usage_key_id" ON "usage_records" USING btree ("routing_key_id", "id");--> statement-breakpoint
-- The lanes a page's requests tried.
CREATE INDEX "usage_request" ON "usage_records" USING btree ("request_id") WHERE "request_id" IS NOT NULL;--> statement-breakpoint
-- A redelivered record (same record key and time) is written once; the key is in C collation so
-- a money call's records (`<call>.<attempt>`) are one index range.
CREATE UNIQUE INDEX "usage_record_key" ON "usage_records" USING btree ("record_key", "created_at");--> statement-breakpoint
-- Rows outside every month partition land here instead of failing; the partition job moves them.
CREATE TABLE "usage_records_default" PARTITION OF "usage_records" DEFAULT;--> statement-breakpoint
CREATE TABLE "usage_daily" (
	"account_id" text NOT NULL,
	"day" date NOT NULL,
	"routing_key_id" text DEFAULT '' NOT NULL,
	"provider" text NOT NULL,
	"model" text DEFAULT '' NOT NULL,
	"outcome" text NOT NULL,
	"requests" bigint DEFAULT 0 NOT NULL,
	"attempts" bigint DEFAULT 0 NOT NULL,
	"fallbacks" bigint DEFAULT 0 NOT NULL,
	"budget_refusals" bigint DEFAULT 0 NOT NULL,
	"rate_limit_refusals" bigint DEFAULT 0 NOT NULL,
	"prompt_tokens" bigint DEFAULT 0 NOT NULL,
	"completion_tokens" bigint DEFAULT 0 NOT NULL,
	"cached_tokens" bigint DEFAULT 0 NOT NULL,
	"cache_write_tokens" bigint DEFAULT 0 NOT NULL,
	"cost_usd" double precision DEFAULT 0 NOT NULL,
	"seat_requests" bigint DEFAULT 0 NOT NULL,
	"seat_cost_usd" double precision DEFAULT 0 NOT NULL,
	"saved_usd" double precision DEFAULT 0 NOT NULL,
	"ttfb" bigint[] DEFAULT '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}' NOT NULL,
	CONSTRAINT "usage_daily_pkey" PRIMARY KEY ("account_id", "day", "routing_key_id", "provider", "model", "outcome")
);--> statement-breakpoint
CREATE INDEX "usage_daily_key" ON "usage_daily" USING btree ("routing_key_id", "day");--> statement-breakpoint
-- Upper bounds (ms) of the time-to-first-byte histogram's buckets; the last is open.
CREATE FUNCTION "usage_ttfb_bucket"(ms integer) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE WHEN ms IS NULL THEN NULL ELSE coalesce((SELECT min(i) FROM unnest(ARRAY[25,50,100,150,200,300,400,500,750,1000,1500,2000,3000,5000,10000]) WITH ORDINALITY AS b(ub, i) WHERE ms < ub), 16)::integer END
$$;--> statement-breakpoint
CREATE FUNCTION "usage_ttfb_add"(a bigint[], b bigint[]) RETURNS bigint[] LANGUAGE sql IMMUTABLE AS $$
  SELECT array_agg(coalesce(x, 0) + coalesce(y, 0) ORDER BY i) FROM unnest(a, b) WITH ORDINALITY AS t(x, y, i)
$$;--> statement-breakpoint
CREATE AGGREGATE "usage_ttfb_sum"(bigint[]) (SFUNC = "usage_ttfb_add", STYPE = bigint[], INITCOND = '{0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0}');--> statement-breakpoint
-- Adds rows of contributions (one per record, or ±1 request moves) to the rollup.
-- A request counts once, in the group of its latest attempt (its answer or its last failure);
-- a fallback counts in the group of the failed attempt whose request moved to another lane.
CREATE FUNCTION "usage_rollup_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  WITH n AS (
    -- The money call of a record keyed `<call>.<attempt>`; none for the classifier's own call, a
    -- cache hit (no upstream attempt) or a record keyed otherwise: each of those stands alone.
    SELECT i.*, CASE WHEN i.endpoint <> 'classifier' AND i.outcome <> 'cache_hit' AND i.record_key LIKE '%.' || i.attempt::text
                     THEN regexp_replace(i.record_key, '[.][^.]*$', '') END AS call
    FROM ins i
  ),
  calls AS (
    SELECT call, min(created_at) - interval '1 day' AS lo, max(created_at) + interval '1 day' AS hi FROM n WHERE call IS NOT NULL GROUP BY call
  ),
  fam AS (
    -- Every record of the touched money calls, this statement's and earlier ones'.
    SELECT r.account_id, r.created_at, r.routing_key_id, r.provider, r.model, r.outcome, r.lane_index, r.attempt, r.seat, c.call,
           (x.record_key IS NOT NULL) AS is_new,
           CASE WHEN r.attempt = 0 THEN 2147483647 ELSE r.attempt END AS ord
    FROM calls c JOIN usage_records r
      ON r.record_key >= c.call || '.' AND r.record_key < c.call || '/' AND r.created_at BETWEEN c.lo AND c.hi
     AND regexp_replace(r.record_key, '[.][^.]*$', '') = c.call
    LEFT JOIN n x ON x.record_key = r.record_key AND x.created_at = r.created_at
  ),
  ranked AS (
    SELECT f.*,
           row_number() OVER (PARTITION BY call ORDER BY ord DESC) AS last_all,
           row_number() OVER (PARTITION BY call, is_new ORDER BY ord DESC) AS last_in_kind,
           bool_or(is_new) OVER (PARTITION BY call ORDER BY ord DESC ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS newer_or_new,
           lead(lane_index) OVER (PARTITION BY call ORDER BY ord) AS next_lane,
           lead(ord) OVER (PARTITION BY call ORDER BY ord) AS next_ord,
           lead(is_new) OVER (PARTITION BY call ORDER BY ord) AS next_new
    FROM fam f
  ),
  contrib AS (
    -- Each new record's own figures; a request of its own when it has no money call to share.
    SELECT account_id, created_at, routing_key_id, provider, model, outcome,
           CASE WHEN call IS NULL AND endpoint <> 'classifier' THEN 1 ELSE 0 END AS requests,
           CASE WHEN endpoint <> 'classifier' AND attempt <> 0 AND outcome <> 'cache_hit' THEN 1 ELSE 0 END AS attempts,
           0 AS fallbacks, prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, cost_usd,
           CASE WHEN seat AND call IS NULL AND endpoint <> 'classifier' THEN 1 ELSE 0 END AS seat_requests,
           CASE WHEN seat THEN cost_usd ELSE 0 END AS seat_cost_usd, saved_usd, usage_ttfb_bucket(ttfb_ms) AS bucket
    FROM n
    UNION ALL
    -- The call's latest record is new: its request moves there from the previous latest one.
    SELECT account_id, created_at, routing_key_id, provider, model, outcome,
           CASE WHEN last_all = 1 THEN 1 ELSE -1 END, 0, 0, 0, 0, 0, 0, 0,
           CASE WHEN seat THEN (CASE WHEN last_all = 1 THEN 1 ELSE -1 END) ELSE 0 END, 0, 0, NULL
    FROM ranked r
    WHERE EXISTS (SELECT 1 FROM ranked l WHERE l.call = r.call AND l.last_all = 1 AND l.is_new)
      AND ((r.last_all = 1) OR (NOT r.is_new AND r.last_in_kind = 1))
    UNION ALL
    -- A failed attempt followed by the next attempt on another lane, one of the two new: a fallback.
    SELECT account_id, created_at, routing_key_id, provider, model, outcome, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, NULL
    FROM ranked
    WHERE next_ord = ord + 1 AND ord <> 2147483647
      AND next_lane IS DISTINCT FROM lane_index AND (is_new OR next_new)
  )
  INSERT INTO usage_daily AS d (account_id, day, routing_key_id, provider, model, outcome, requests, attempts, fallbacks,
      prompt_tokens, completion_tokens, cached_tokens, cache_write_tokens, cost_usd, seat_requests, seat_cost_usd, saved_usd, ttfb)
  SELECT account_id, (created_at AT TIME ZONE 'UTC')::date, coalesce(routing_key_id, ''), provider, coalesce(model, ''), outcome,
         sum(requests), sum(attempts), sum(fallbacks), sum(prompt_tokens), sum(completion_tokens), sum(cached_tokens),
         sum(cache_write_tokens), sum(cost_usd), sum(seat_requests), sum(seat_cost_usd), sum(saved_usd),
         ARRAY[count(*) FILTER (WHERE bucket = 1), count(*) FILTER (WHERE bucket = 2), count(*) FILTER (WHERE bucket = 3), count(*) FILTER (WHERE bucket = 4), count(*) FILTER (WHERE bucket = 5), count(*) FILTER (WHERE bucket = 6), count(*) FILTER (WHERE bucket = 7), count(*) FILTER (WHERE bucket = 8), count(*) FILTER (WHERE bucket = 9), count(*) FILTER (WHERE bucket = 10), count(*) FILTER (WHERE bucket = 11), count(*) FILTER (WHERE bucket = 12), count(*) FILTER (WHERE bucket = 13), count(*) FILTER (WHERE bucket = 14), count(*) FILTER (WHERE bucket = 15), count(*) FILTER (WHERE bucket = 16)]
  FROM contrib
  GROUP BY 1, 2, 3, 4, 5, 6
  ON CONFLICT (account_id, day, routing_key_id, provider, model, outcome) DO UPDATE SET
    requests = d.requests + excluded.requests, attempts = d.attempts + excluded.attempts,
    fallbacks = d.fallbacks + excluded.fallbacks, prompt_tokens = d.prompt_tokens + excluded.prompt_tokens,
    completion_tokens = d.completion_tokens + excluded.completion_tokens, cached_tokens = d.cached_tokens + excluded.cached_tokens,
    cache_write_tokens = d.cache_write_tokens + excluded.cache_write_tokens, cost_usd = d.cost_usd + excluded.cost_usd,
    seat_requests = d.seat_requests + excluded.seat_requests, seat_cost_usd = d.seat_cost_usd + excluded.seat_cost_usd,
    saved_usd = d.saved_usd + excluded.saved_usd,
    ttfb = usage_ttfb_add(d.ttfb, excluded.ttfb);
  RETURN NULL;
END
$$;
--> statement-breakpoint
CREATE TRIGGER "usage_rollup" AFTER INSERT ON "usage_records" REFERENCING NEW TABLE AS ins FOR EACH STATEMENT EXECUTE FUNCTION "usage_rollup_apply"();--> statement-breakpoint
-- Creates the month partition holding `month` unless it exists, moving any rows the default
-- partition caught for that month into it first (a partition cannot be attached over them).
CREATE FUNCTION "usage_ensure_partition"(month date) RETURNS boolean LANGUAGE plpgsql AS $$
DECLARE
  lo timestamptz := date_trunc('month', month::timestamp) AT TIME ZONE 'UTC';
  hi timestamptz := (date_trunc('month', month::timestamp) + interval '1 month') AT TIME ZONE 'UTC';
  name text := 'usage_records_' || to_char(month, 'YYYY_MM');
BEGIN
  IF to_regclass(name) IS NOT NULL THEN RETURN false; END IF;
  EXECUTE format('CREATE TABLE %I (LIKE usage_records INCLUDING DEFAULTS)', name);
  EXECUTE format('WITH moved AS (DELETE FROM usage_records_default WHERE created_at >= %L AND created_at < %L RETURNING *) INSERT INTO %I SELECT * FROM moved', lo, hi, name);
  EXECUTE format('ALTER TABLE usage_records ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', name, lo, hi);
  RETURN true;
END
$$;--> statement-breakpoint
-- Drops the month partitions that end on or before `before` (raw records only: the rollup stays).
CREATE FUNCTION "usage_drop_partitions_before"(before date) RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
  p record;
  n integer := 0;
BEGIN
  FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
           WHERE i.inhparent = 'usage_records'::regclass AND c.relname ~ '^usage_records_[0-9]{4}_[0-9]{2}$'
  LOOP
    IF (to_date(substr(p.relname, 15), 'YYYY_MM') + interval '1 month') <= before THEN
      EXECUTE format('DROP TABLE %I', p.relname);
      n := n + 1;
    END IF;
  END LOOP;
  RETURN n;
END
$$;--> statement-breakpoint
DO $$
DECLARE
  m date := date_trunc('month', coalesce((SELECT min(created_at) FROM usage_records_unpartitioned), now()) AT TIME ZONE 'UTC')::date;
BEGIN
  WHILE m <= (now() AT TIME ZONE 'UTC')::date + interval '2 months' LOOP
    PERFORM usage_ensure_partition(m);
    m := m + interval '1 month';
  END LOOP;
END
$$;--> statement-breakpoint
-- The copy fires the rollup trigger once for every existing row: the rollup starts complete.
INSERT INTO "usage_records" SELECT "id", "request_id", "account_id", "routing_key_id", "attempt", "record_key", "endpoint", "lane_index",
  "provider", "model", "status", "outcome", "error_code", "prompt_tokens", "completion_tokens", "cached_tokens", "cache_write_tokens",
  "cost_usd", "price_estimated", "latency_ms", "ttfb_ms", "seat", "created_at", "saved_usd" FROM "usage_records_unpartitioned" ON CONFLICT DO NOTHING;--> statement-breakpoint
DROP TABLE "usage_records_unpartitioned";
