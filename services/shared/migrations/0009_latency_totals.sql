-- Latency rollups whose states stay few as the range grows, and errors per day
-- (docs/ingester.md, "The tables"). A latency query's cost is the t-digest states it merges, and a state's size
-- grows with the values it holds (slowly: about with their logarithm). Over a week the
-- overview merged one state per model and hour (8,400) where one per environment and
-- hour (504) answers it; over a month, per model and day, not per environment, model,
-- user type and day. The analytics API reads these once their backfill (a second
-- generation of rollup-backfill.ts, recorded in rollup_backfill_0009_days) has copied
-- the records stored before them; until then it reads the tables of migration 0008.

-- usage_latency_total_by_hour: latency per hour by environment alone: the overview's latency over hours (all environments merge three states an hour, not one per model).
CREATE TABLE IF NOT EXISTS usage_latency_total_by_hour
(
    hour DateTime,
    environment String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_total_by_hour_mv TO usage_latency_total_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment;

-- usage_latency_total_by_day: the same per UTC day: the overview's latency over days.
CREATE TABLE IF NOT EXISTS usage_latency_total_by_day
(
    day DateTime,
    environment String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_total_by_day_mv TO usage_latency_total_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment;

-- usage_latency_by_day: latency per UTC day by provider and model: daily latency by model, and the whole days of a longer range.
CREATE TABLE IF NOT EXISTS usage_latency_by_day
(
    day DateTime,
    provider String,
    model_id String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, provider, model_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_by_day_mv TO usage_latency_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    provider,
    model_id,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, provider, model_id;

-- usage_latency_env_by_day: the same per environment: daily latency grouped or filtered by environment.
CREATE TABLE IF NOT EXISTS usage_latency_env_by_day
(
    day DateTime,
    environment String,
    provider String,
    model_id String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, provider, model_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_env_by_day_mv TO usage_latency_env_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment, provider, model_id;

-- usage_errors_by_day: the errors rollup per UTC day: the whole days of a longer range (an
-- hour rollup holds a row per hour and error seen, growing with the traffic until every
-- hour has every error: a day rollup reaches that sooner).
CREATE TABLE IF NOT EXISTS usage_errors_by_day
(
    day DateTime,
    environment String,
    provider String,
    model_id String,
    error_code String,
    error_message String,
    errors AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, provider, model_id, error_code, error_message);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_by_day_mv TO usage_errors_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    ifNull(error_code, '') AS error_code,
    substring(ifNull(error_message, ''), 1, 200) AS error_message,
    countState() AS errors
FROM usage_events
WHERE status = 'error'
GROUP BY day, environment, provider, model_id, error_code, error_message;

-- The backfill's progress for the tables above: a row per UTC day of usage_events
-- copied into them, and a row in rollup_backfill_0009_done once every day is.
CREATE TABLE IF NOT EXISTS rollup_backfill_0009_days
(
    day Date,
    rows UInt64,
    done_at DateTime
)
ENGINE = ReplacingMergeTree(done_at)
ORDER BY day;

CREATE TABLE IF NOT EXISTS rollup_backfill_0009_done
(
    done_at DateTime
)
ENGINE = MergeTree
ORDER BY done_at;
