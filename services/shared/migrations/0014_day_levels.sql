-- The day rollups built by a job instead of by views (docs/analytics-api.md, "Days
-- built from the hours"): each UTC day of them is merged from the hour rollups once the
-- day is over, so an insert no longer writes a part into ten more tables. The tables and
-- their rows stay as they are; until a day is built, the analytics API reads its hours.
--
-- rollup_day_levels holds what the API and the job need to keep every answer exact:
--   kind 'watermark'  day_s: every day before it has been handed to the job (the highest
--                     row counts; before the first, the day this migration ran)
--   kind 'mark'       a day whose rows changed after it was handed over: a record that
--                     arrived late (written by the ingester before its insert), or a job
--                     that rebuilt rollup rows of it (when its fence was lifted)
--   kind 'build'      a day built; `marks` is how many marks the day had when the job
--                     began: a day is built while it has no more marks than that
-- The days before this migration, which the views filled, are built once by the job too
-- (the oldest first); until then the API reads them from their hours.
DROP TABLE IF EXISTS usage_rollup_by_day_mv;
DROP TABLE IF EXISTS usage_rollup_key_by_day_mv;
DROP TABLE IF EXISTS usage_errors_by_day_mv;
DROP TABLE IF EXISTS usage_rollup_key_totals_by_day_mv;
DROP TABLE IF EXISTS usage_latency_hist_total_by_day_mv;
DROP TABLE IF EXISTS usage_latency_hist_by_day_mv;
DROP TABLE IF EXISTS usage_latency_hist_env_by_day_mv;
DROP TABLE IF EXISTS usage_ttft_hist_total_by_day_mv;
DROP TABLE IF EXISTS usage_ttft_hist_by_day_mv;
DROP TABLE IF EXISTS usage_ttft_hist_env_by_day_mv;

CREATE TABLE IF NOT EXISTS rollup_day_levels
(
    kind String,
    day_s UInt32,
    marks UInt64,
    at_ms UInt64
)
ENGINE = MergeTree
ORDER BY (kind, day_s);
