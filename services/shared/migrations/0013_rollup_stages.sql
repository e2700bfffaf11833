-- Rollups fed in stages (docs/ingester.md, "The tables"). Each materialized view on
-- usage_events reads every inserted record again: with 27 of them, ClickHouse spent
-- several times its own insert on each record. Here the records are read once per
-- family: a view aggregates an insert's records into a stage, a table of engine Null
-- (nothing is stored), at the finest grain of the family, and the family's rollups are
-- filled from that stage's few rows with -MergeState, which counts exactly what their
-- own SELECT over usage_events counted (the rebuild jobs still use that SELECT:
-- services/shared/src/rollups/views.ts). What stays on usage_events: the four stages,
-- the users' days, the copy ordered by user, and the event keys.
--
-- A view that reads what another view writes fires by that view's name on ClickHouse 18.x
-- and by its target table's name on current releases. The views below read the stage
-- table; on a server of the first kind the migration runner makes them read the stage's
-- view instead (FROM usage_rollup_stage_mv), having asked the server which kind it is,
-- and at every later run it checks them again and makes them anew if the server changed
-- kind (an upgrade): services/shared/src/cascade-probe.ts.
--
-- Between a DROP and its CREATE below, a record inserted by a running ingester misses
-- that rollup: apply this migration before the ingesters consume (every service
-- applies it at start, before consuming; in a rolling upgrade, run npm run migrate
-- first, with the ingesters stopped). docs/ingester.md.

-- usage_rollup_stage: per minute by environment, key, provider, model and user type, with every measure of the usage rollups: one pass over the inserted records for the nine usage rollups of minutes, hours and days, with and without the key.
CREATE TABLE IF NOT EXISTS usage_rollup_stage
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
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_stage_mv TO usage_rollup_stage AS
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

-- usage_errors_stage: the errors per minute by environment, provider, model, code and message: one pass over the inserted errors for the three errors rollups.
CREATE TABLE IF NOT EXISTS usage_errors_stage
(
    minute DateTime,
    environment String,
    provider String,
    model_id String,
    error_code String,
    error_message String,
    errors AggregateFunction(count)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_stage_mv TO usage_errors_stage AS
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

-- usage_latency_hist_stage: latency per hour by environment, provider, model and bucket: one pass over the inserted records for the six latency histograms.
CREATE TABLE IF NOT EXISTS usage_latency_hist_stage
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_stage_mv TO usage_latency_hist_stage AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment, provider, model_id, bucket;

-- usage_ttft_hist_stage: time to first token per hour by environment, provider, model and bucket: one pass over the inserted records for the six time to first token histograms.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_stage
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = Null;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_stage_mv TO usage_ttft_hist_stage AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY hour, environment, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_rollup_key_by_minute_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_minute_mv TO usage_rollup_key_by_minute AS
SELECT
    minute,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY minute, environment, api_key_id, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_by_minute_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_minute_mv TO usage_rollup_by_minute AS
SELECT
    minute,
    environment,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY minute, environment, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_key_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_hour_mv TO usage_rollup_key_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY hour, environment, api_key_id, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_hour_mv TO usage_rollup_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY hour, environment, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_key_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_by_day_mv TO usage_rollup_key_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 86400) * 86400) AS day,
    environment,
    api_key_id,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY day, environment, api_key_id, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_by_day_mv TO usage_rollup_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(latency_ms) AS latency_ms,
    quantilesTDigestIfMergeState(0.5, 0.9, 0.99)(ttft_ms) AS ttft_ms,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_rollup_stage
GROUP BY day, environment, provider, model_id, user_type;

DROP TABLE IF EXISTS usage_rollup_key_totals_by_minute_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_minute_mv TO usage_rollup_key_totals_by_minute AS
SELECT
    minute,
    environment,
    api_key_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced
FROM usage_rollup_stage
GROUP BY minute, environment, api_key_id, user_type;

DROP TABLE IF EXISTS usage_rollup_key_totals_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_hour_mv TO usage_rollup_key_totals_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour,
    environment,
    api_key_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced
FROM usage_rollup_stage
GROUP BY hour, environment, api_key_id, user_type;

DROP TABLE IF EXISTS usage_rollup_key_totals_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_day_mv TO usage_rollup_key_totals_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 86400) * 86400) AS day,
    environment,
    api_key_id,
    user_type,
    countMergeState(requests) AS requests,
    countIfMergeState(successes) AS successes,
    countIfMergeState(errors) AS errors,
    sumMergeState(input_tokens) AS input_tokens,
    sumMergeState(output_tokens) AS output_tokens,
    sumMergeState(total_tokens) AS total_tokens,
    sumMergeState(cached_input_tokens) AS cached_input_tokens,
    sumMergeState(cache_write_tokens) AS cache_write_tokens,
    sumMergeState(reasoning_tokens) AS reasoning_tokens,
    sumMergeState(cache_reported_input_tokens) AS cache_reported_input_tokens,
    sumMergeState(cost_usd) AS cost_usd,
    countIfMergeState(unpriced) AS unpriced
FROM usage_rollup_stage
GROUP BY day, environment, api_key_id, user_type;

DROP TABLE IF EXISTS usage_errors_minute_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_minute_mv TO usage_errors_minute AS
SELECT
    minute,
    environment,
    provider,
    model_id,
    error_code,
    error_message,
    countMergeState(errors) AS errors
FROM usage_errors_stage
GROUP BY minute, environment, provider, model_id, error_code, error_message;

DROP TABLE IF EXISTS usage_errors_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_by_hour_mv TO usage_errors_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    error_code,
    error_message,
    countMergeState(errors) AS errors
FROM usage_errors_stage
GROUP BY hour, environment, provider, model_id, error_code, error_message;

DROP TABLE IF EXISTS usage_errors_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_errors_by_day_mv TO usage_errors_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(minute), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    error_code,
    error_message,
    countMergeState(errors) AS errors
FROM usage_errors_stage
GROUP BY day, environment, provider, model_id, error_code, error_message;

DROP TABLE IF EXISTS usage_latency_hist_env_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_env_by_hour_mv TO usage_latency_hist_env_by_hour AS
SELECT
    hour,
    environment,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY hour, environment, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_latency_hist_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_by_hour_mv TO usage_latency_hist_by_hour AS
SELECT
    hour,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY hour, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_latency_hist_total_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_total_by_hour_mv TO usage_latency_hist_total_by_hour AS
SELECT
    hour,
    environment,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY hour, environment, bucket;

DROP TABLE IF EXISTS usage_latency_hist_env_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_env_by_day_mv TO usage_latency_hist_env_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY day, environment, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_latency_hist_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_by_day_mv TO usage_latency_hist_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY day, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_latency_hist_total_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_total_by_day_mv TO usage_latency_hist_total_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    environment,
    bucket,
    countMergeState(requests) AS requests,
    avgIfMergeState(tokens_per_sec) AS tokens_per_sec
FROM usage_latency_hist_stage
GROUP BY day, environment, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_env_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_env_by_hour_mv TO usage_ttft_hist_env_by_hour AS
SELECT
    hour,
    environment,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY hour, environment, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_by_hour_mv TO usage_ttft_hist_by_hour AS
SELECT
    hour,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY hour, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_total_by_hour_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_total_by_hour_mv TO usage_ttft_hist_total_by_hour AS
SELECT
    hour,
    environment,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY hour, environment, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_env_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_env_by_day_mv TO usage_ttft_hist_env_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY day, environment, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_by_day_mv TO usage_ttft_hist_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    provider,
    model_id,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY day, provider, model_id, bucket;

DROP TABLE IF EXISTS usage_ttft_hist_total_by_day_mv;
CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_total_by_day_mv TO usage_ttft_hist_total_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(hour), 86400) * 86400) AS day,
    environment,
    bucket,
    countMergeState(requests) AS requests
FROM usage_ttft_hist_stage
GROUP BY day, environment, bucket;

