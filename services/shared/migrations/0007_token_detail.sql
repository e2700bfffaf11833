-- Token detail (schema v2, docs/tokens.md): cache reads and cache writes are parts of
-- input_tokens, reasoning a part of output_tokens, as sent; null when the record
-- did not say (v1 records, providers without caching).
ALTER TABLE usage_events ADD COLUMN cached_input_tokens Nullable(UInt64) AFTER sent_total_tokens;
ALTER TABLE usage_events ADD COLUMN cache_write_tokens Nullable(UInt64) AFTER cached_input_tokens;
ALTER TABLE usage_events ADD COLUMN reasoning_tokens Nullable(UInt64) AFTER cache_write_tokens;
-- Derived: input_tokens when the record reports cache reads, else 0. The denominator
-- of the cache hit ratio, so records (or providers) that never report cache reads do
-- not dilute it. A column of its own because a view cannot read input_tokens beside
-- the aggregate it names input_tokens.
ALTER TABLE usage_events ADD COLUMN cache_reported_input_tokens UInt64 DEFAULT 0 AFTER total_tokens;

-- The rollup sums them.
ALTER TABLE usage_rollup_minute ADD COLUMN cached_input_tokens AggregateFunction(sum, UInt64) AFTER total_tokens;
ALTER TABLE usage_rollup_minute ADD COLUMN cache_write_tokens AggregateFunction(sum, UInt64) AFTER cached_input_tokens;
ALTER TABLE usage_rollup_minute ADD COLUMN reasoning_tokens AggregateFunction(sum, UInt64) AFTER cache_write_tokens;
ALTER TABLE usage_rollup_minute ADD COLUMN cache_reported_input_tokens AggregateFunction(sum, UInt64) AFTER reasoning_tokens;

-- The view is replaced to fill them (18.16 cannot alter a view's query). Between the
-- two statements a row inserted by another ingester would miss the rollup: apply this
-- migration before the ingesters consume (npm start and every service apply it at start,
-- before consuming; in a rolling upgrade, run npm run migrate first). docs/operations.md.
DROP TABLE IF EXISTS usage_rollup_minute_mv;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_minute_mv TO usage_rollup_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    environment,
    provider,
    model_id,
    user_type,
    user_id,
    api_key_id,
    countState() AS requests,
    countIfState(status = 'success') AS successes,
    countIfState(status = 'error') AS errors,
    sumState(ifNull(input_tokens, toUInt64(0))) AS input_tokens,
    sumState(ifNull(output_tokens, toUInt64(0))) AS output_tokens,
    sumState(total_tokens) AS total_tokens,
    sumState(ifNull(cached_input_tokens, toUInt64(0))) AS cached_input_tokens,
    sumState(ifNull(cache_write_tokens, toUInt64(0))) AS cache_write_tokens,
    sumState(ifNull(reasoning_tokens, toUInt64(0))) AS reasoning_tokens,
    sumState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumState(ifNull(cost_usd, toFloat64(0))) AS cost_usd,
    countIfState(price_known = 0) AS unpriced,
    quantilesIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY minute, environment, provider, model_id, user_type, user_id, api_key_id;
