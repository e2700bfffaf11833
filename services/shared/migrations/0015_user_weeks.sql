-- The per-user weeks (docs/analytics-api.md, "Which table answers"): the per-user days
-- summed over weeks cut from each month (days 1–7, 8–14, 15–21 and 22 to its end), built
-- by the day rollups' job, with no view: an insert writes nothing here. Top users over a
-- month read three or four weeks and the days at the edges instead of 30 days of rows,
-- about a third of them. The job records each week it builds in rollup_day_levels
-- (kind 'week', day_s its first day, marks the marks its days had when the job began):
-- a week is read while its days have no more marks than that, from its days otherwise.
CREATE TABLE IF NOT EXISTS usage_rollup_user_by_week
(
    week DateTime,
    environment String,
    user_id String,
    user_type String,
    requests UInt64,
    successes UInt64,
    errors UInt64,
    input_tokens UInt64,
    output_tokens UInt64,
    total_tokens UInt64,
    cached_input_tokens UInt64,
    cache_write_tokens UInt64,
    reasoning_tokens UInt64,
    cache_reported_input_tokens UInt64,
    cost_usd Float64,
    unpriced UInt64
)
ENGINE = SummingMergeTree()
PARTITION BY toYYYYMM(week)
ORDER BY (week, environment, user_id, user_type);
