-- Rollups maintained by ClickHouse as rows arrive: materialized views from
-- usage_events into AggregatingMergeTree tables (1-minute buckets, every
-- dimension analytics filter or group by). Hours and days are merged from minutes
-- at query time. A materialized view counts every row it sees, so the ingester
-- inserts each event key into usage_events once (Redis first, then a look-up of the
-- keys in ClickHouse itself before every insert; see load-step.ts).
CREATE TABLE IF NOT EXISTS usage_rollup_minute
(
    minute DateTime,
    environment String,
    provider String,
    model_id String,
    user_type String,
    user_id String,
    api_key_id String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, environment, provider, model_id, user_type, user_id, api_key_id);

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
    sumState(ifNull(cost_usd, toFloat64(0))) AS cost_usd,
    countIfState(price_known = 0) AS unpriced,
    quantilesIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY minute, environment, provider, model_id, user_type, user_id, api_key_id;

CREATE TABLE IF NOT EXISTS usage_errors_minute
(
    minute DateTime,
    environment String,
    provider String,
    model_id String,
    error_code String,
    error_message String,
    errors AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, environment, provider, model_id, error_code, error_message);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_minute_mv TO usage_errors_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    environment,
    provider,
    model_id,
    ifNull(error_code, '') AS error_code,
    substring(ifNull(error_message, ''), 1, 200) AS error_message,
    countState() AS errors
FROM usage_events
WHERE status = 'error'
GROUP BY minute, environment, provider, model_id, error_code, error_message;
