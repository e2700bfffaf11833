-- Rollups whose size follows what is shown, not what was sent (docs/ingester.md,
-- "The tables"). usage_rollup_minute keeps every dimension (the user among them) and is
-- as large as the events themselves; these are keyed by what the views show, each fed
-- by its own materialized view, and the analytics API reads the coarsest one that
-- answers a query exactly (services/admin/src/rollup-plan.ts). Latency and time to
-- first token are t-digest states (quantilesTDigest): small and mergeable across hours
-- and days (their accuracy: docs/analytics-api.md). Buckets are UTC whatever the
-- server's time zone: hours and days from epoch seconds.
-- Rows stored before these views existed are copied in by the backfill
-- (services/shared/src/rollup-backfill.ts), day by day under a fence, recorded in
-- rollup_backfill_days; until it has finished the API reads usage_rollup_minute.

-- usage_rollup_by_minute: per minute without the user and the key: the edges of a range that hours and days do not cover, and minute buckets.
CREATE TABLE IF NOT EXISTS usage_rollup_by_minute
(
    minute DateTime,
    environment String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, environment, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_minute_mv TO usage_rollup_by_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    environment,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY minute, environment, provider, model_id, user_type;

-- usage_rollup_key_by_minute: per minute by key, without the user: the edges of a keyed range that hours and days do not cover.
CREATE TABLE IF NOT EXISTS usage_rollup_key_by_minute
(
    minute DateTime,
    environment String,
    api_key_id String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, environment, api_key_id, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_minute_mv TO usage_rollup_key_by_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY minute, environment, api_key_id, provider, model_id, user_type;

-- usage_rollup_by_hour: per hour without the user and the key: the unfiltered views.
CREATE TABLE IF NOT EXISTS usage_rollup_by_hour
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_hour_mv TO usage_rollup_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment, provider, model_id, user_type;

-- usage_rollup_key_by_hour: per hour with the key: views grouped or filtered by key.
CREATE TABLE IF NOT EXISTS usage_rollup_key_by_hour
(
    hour DateTime,
    environment String,
    api_key_id String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, api_key_id, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_hour_mv TO usage_rollup_key_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment, api_key_id, provider, model_id, user_type;

-- usage_latency_by_hour: latency per hour by provider and model only: hourly latency over all environments merges one t-digest per model and hour, not one per environment and user type (merging the states is what a latency query costs).
CREATE TABLE IF NOT EXISTS usage_latency_by_hour
(
    hour DateTime,
    provider String,
    model_id String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, provider, model_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_by_hour_mv TO usage_latency_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    provider,
    model_id,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, provider, model_id;

-- usage_latency_env_by_hour: the same per environment: hourly latency grouped or filtered by environment.
CREATE TABLE IF NOT EXISTS usage_latency_env_by_hour
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, provider, model_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_env_by_hour_mv TO usage_latency_env_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment, provider, model_id;

-- usage_rollup_by_day: per UTC day without the user and the key: day buckets and the whole days of a range.
CREATE TABLE IF NOT EXISTS usage_rollup_by_day
(
    day DateTime,
    environment String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_day_mv TO usage_rollup_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment, provider, model_id, user_type;

-- usage_rollup_key_by_day: per UTC day with the key: the same for views grouped or filtered by key.
CREATE TABLE IF NOT EXISTS usage_rollup_key_by_day
(
    day DateTime,
    environment String,
    api_key_id String,
    provider String,
    model_id String,
    user_type String,
    requests AggregateFunction(count),
    successes AggregateFunction(countIf, UInt8),
    errors AggregateFunction(countIf, UInt8),
    input_tokens AggregateFunction(sum, UInt64),
    output_tokens AggregateFunction(sum, UInt64),
    total_tokens AggregateFunction(sum, UInt64),
    cached_input_tokens AggregateFunction(sum, UInt64),
    cache_write_tokens AggregateFunction(sum, UInt64),
    reasoning_tokens AggregateFunction(sum, UInt64),
    cache_reported_input_tokens AggregateFunction(sum, UInt64),
    cost_usd AggregateFunction(sum, Float64),
    unpriced AggregateFunction(countIf, UInt8),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, api_key_id, provider, model_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_day_mv TO usage_rollup_key_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
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
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment, api_key_id, provider, model_id, user_type;

-- usage_rollup_user_by_day: per UTC day by user, usage only, as plain sums (SummingMergeTree: summed much faster than merged states): top users.
CREATE TABLE IF NOT EXISTS usage_rollup_user_by_day
(
    day DateTime,
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
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, user_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_user_by_day_mv TO usage_rollup_user_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    user_id,
    user_type,
    count() AS requests,
    countIf(status = 'success') AS successes,
    countIf(status = 'error') AS errors,
    sum(ifNull(input_tokens, toUInt64(0))) AS input_tokens,
    sum(ifNull(output_tokens, toUInt64(0))) AS output_tokens,
    sum(total_tokens) AS total_tokens,
    sum(ifNull(cached_input_tokens, toUInt64(0))) AS cached_input_tokens,
    sum(ifNull(cache_write_tokens, toUInt64(0))) AS cache_write_tokens,
    sum(ifNull(reasoning_tokens, toUInt64(0))) AS reasoning_tokens,
    sum(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sum(ifNull(cost_usd, toFloat64(0))) AS cost_usd,
    countIf(price_known = 0) AS unpriced
FROM usage_events
GROUP BY day, environment, user_id, user_type;

-- usage_errors_by_hour: the errors rollup per hour (usage_errors_minute covers the edges).
CREATE TABLE IF NOT EXISTS usage_errors_by_hour
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    error_code String,
    error_message String,
    errors AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, provider, model_id, error_code, error_message);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_by_hour_mv TO usage_errors_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    ifNull(error_code, '') AS error_code,
    substring(ifNull(error_message, ''), 1, 200) AS error_message,
    countState() AS errors
FROM usage_events
WHERE status = 'error'
GROUP BY hour, environment, provider, model_id, error_code, error_message;

-- usage_events_by_user: the numbers of each record again, ordered by user, so that one
-- user's records (their analytics, an erasure's look-ups) are read without scanning
-- usage_events, whose key is the event key. ReplacingMergeTree with the same identity
-- (a replay carries the same event key and event time). Small index granules: a
-- user's few records are read without reading thousands of others'.
CREATE TABLE IF NOT EXISTS usage_events_by_user
(
    environment String,
    user_id String,
    event_time DateTime,
    event_key String,
    user_type String,
    api_key_id String,
    provider String,
    model_id String,
    status String,
    input_tokens Nullable(UInt64),
    output_tokens Nullable(UInt64),
    total_tokens UInt64,
    cached_input_tokens Nullable(UInt64),
    cache_write_tokens Nullable(UInt64),
    reasoning_tokens Nullable(UInt64),
    cache_reported_input_tokens UInt64,
    cost_usd Nullable(Float64),
    price_known UInt8,
    latency_ms Nullable(UInt64),
    ttft_ms Nullable(UInt64),
    output_tokens_per_sec Nullable(Float64),
    error_code Nullable(String),
    error_message Nullable(String),
    ingested_at DateTime
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(event_time)
ORDER BY (environment, user_id, event_time, event_key)
SETTINGS index_granularity = 1024;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_events_by_user_mv TO usage_events_by_user AS
SELECT
    environment, user_id, event_time, event_key, user_type, api_key_id, provider, model_id, status,
    input_tokens, output_tokens, total_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens,
    cache_reported_input_tokens, cost_usd, price_known, latency_ms, ttft_ms, output_tokens_per_sec, error_code, error_message,
    ingested_at
FROM usage_events;

-- The backfill's progress: a row per UTC day of usage_events copied into the tables
-- above, and a row in rollup_backfill_done once every day is.
CREATE TABLE IF NOT EXISTS rollup_backfill_days
(
    day Date,
    rows UInt64,
    done_at DateTime
)
ENGINE = ReplacingMergeTree(done_at)
ORDER BY day;

CREATE TABLE IF NOT EXISTS rollup_backfill_done
(
    done_at DateTime
)
ENGINE = MergeTree
ORDER BY done_at;
