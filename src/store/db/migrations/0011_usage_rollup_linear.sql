-- The daily rollup trigger ran in time quadratic in the rows of one INSERT: a correlated EXISTS
-- looked up, for every record of the touched calls, whether its call's latest record was new, by
-- scanning the whole set again (a 4,000-row batch took 1.6 s, 2,000 rows 0.37 s, so the usage
-- drain fell behind a busy instance). The same question is now one window over the set (linear:
-- about 18,000 rows a second at any batch size). Every rule of the rollup is unchanged.
CREATE OR REPLACE FUNCTION "usage_rollup_apply"() RETURNS trigger LANGUAGE plpgsql AS $$
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
  latest AS (
    -- Whether each call's latest record is new, per row: a window, not a lookup per row.
    SELECT r.*, bool_or(r.last_all = 1 AND r.is_new) OVER (PARTITION BY r.call) AS latest_new
    FROM ranked r
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
    FROM latest r
    WHERE r.latest_new AND ((r.last_all = 1) OR (NOT r.is_new AND r.last_in_kind = 1))
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
