-- The time-to-first-byte histograms are summed element by element in the reports' one query
-- (report.ts); this aggregate had no reader. usage_ttfb_add stays: the rollup trigger uses it.
DROP AGGREGATE IF EXISTS "usage_ttfb_sum"(bigint[]);
