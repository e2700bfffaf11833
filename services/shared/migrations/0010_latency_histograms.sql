-- Latency and time to first token as histograms (docs/ingester.md, "The tables";
-- docs/analytics-api.md, "Percentiles"). A t-digest state grows with the values it holds,
-- so the latency queries of migrations 0008 and 0009 cost more as traffic grew (about
-- 1.5 times from 10 to 100 million events). Here a value is counted in a fixed bucket
-- instead: 25 buckets per factor e (each about 4.1 % wide; bucket 0 holds the records
-- without a value, bucket 1 the zeros, bucket b >= 2 the values v with
-- floor(ln(v) * 25) = b - 2), one row per time, group and bucket with its count. A
-- rollup's rows stop growing once its buckets are filled, rows are merged by addition,
-- and a percentile is read from the buckets' running sum: the value it gives is within
-- 2 % of the exact one (the bucket's harmonic middle, services/admin/src/analytics.ts).
-- The analytics API reads these tables once their backfill (a third generation of
-- rollups/backfill.ts, recorded in rollup_backfill_0010_days) has copied the records stored
-- before them; until then latency reads the usage rollups of migration 0008. The t-digest
-- latency rollups of 0008 and 0009 are no longer read: their views and tables are dropped
-- (each view costs ClickHouse work on every inserted row).
DROP TABLE IF EXISTS usage_latency_by_hour_mv;
DROP TABLE IF EXISTS usage_latency_env_by_hour_mv;
DROP TABLE IF EXISTS usage_latency_total_by_hour_mv;
DROP TABLE IF EXISTS usage_latency_total_by_day_mv;
DROP TABLE IF EXISTS usage_latency_by_day_mv;
DROP TABLE IF EXISTS usage_latency_env_by_day_mv;
DROP TABLE IF EXISTS usage_latency_by_hour;
DROP TABLE IF EXISTS usage_latency_env_by_hour;
DROP TABLE IF EXISTS usage_latency_total_by_hour;
DROP TABLE IF EXISTS usage_latency_total_by_day;
DROP TABLE IF EXISTS usage_latency_by_day;
DROP TABLE IF EXISTS usage_latency_env_by_day;

-- usage_latency_hist_total_by_hour: latency per hour by environment alone: the overview's latency; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_total_by_hour
(
    hour DateTime,
    environment String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_total_by_hour_mv TO usage_latency_hist_total_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, environment, bucket;

-- usage_latency_hist_total_by_day: latency per UTC day by environment alone: the overview's latency; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_total_by_day
(
    day DateTime,
    environment String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_total_by_day_mv TO usage_latency_hist_total_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment, bucket;

-- usage_latency_hist_by_hour: latency per hour by provider and model: latency by model; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_by_hour
(
    hour DateTime,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_by_hour_mv TO usage_latency_hist_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    provider,
    model_id,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY hour, provider, model_id, bucket;

-- usage_latency_hist_by_day: latency per UTC day by provider and model: latency by model; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_by_day
(
    day DateTime,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_by_day_mv TO usage_latency_hist_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    provider,
    model_id,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, provider, model_id, bucket;

-- usage_latency_hist_env_by_hour: latency per hour by environment, provider and model; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_env_by_hour
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_env_by_hour_mv TO usage_latency_hist_env_by_hour AS
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

-- usage_latency_hist_env_by_day: latency per UTC day by environment, provider and model; records (all of them: bucket 0 counts those without latency), output tokens per second.
CREATE TABLE IF NOT EXISTS usage_latency_hist_env_by_day
(
    day DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_hist_env_by_day_mv TO usage_latency_hist_env_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    multiIf(isNull(latency_ms), toUInt16(0), assumeNotNull(latency_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(latency_ms), 1))) * 25))) AS bucket,
    countState() AS requests,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY day, environment, provider, model_id, bucket;

-- usage_ttft_hist_total_by_hour: time to first token per hour by environment alone: the overview's latency; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_total_by_hour
(
    hour DateTime,
    environment String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_total_by_hour_mv TO usage_ttft_hist_total_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY hour, environment, bucket;

-- usage_ttft_hist_total_by_day: time to first token per UTC day by environment alone: the overview's latency; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_total_by_day
(
    day DateTime,
    environment String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_total_by_day_mv TO usage_ttft_hist_total_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY day, environment, bucket;

-- usage_ttft_hist_by_hour: time to first token per hour by provider and model: latency by model; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_by_hour
(
    hour DateTime,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_by_hour_mv TO usage_ttft_hist_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    provider,
    model_id,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY hour, provider, model_id, bucket;

-- usage_ttft_hist_by_day: time to first token per UTC day by provider and model: latency by model; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_by_day
(
    day DateTime,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_by_day_mv TO usage_ttft_hist_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    provider,
    model_id,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY day, provider, model_id, bucket;

-- usage_ttft_hist_env_by_hour: time to first token per hour by environment, provider and model; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_env_by_hour
(
    hour DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_env_by_hour_mv TO usage_ttft_hist_env_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    provider,
    model_id,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY hour, environment, provider, model_id, bucket;

-- usage_ttft_hist_env_by_day: time to first token per UTC day by environment, provider and model; records.
CREATE TABLE IF NOT EXISTS usage_ttft_hist_env_by_day
(
    day DateTime,
    environment String,
    provider String,
    model_id String,
    bucket UInt16,
    requests AggregateFunction(count)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, provider, model_id, bucket);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_ttft_hist_env_by_day_mv TO usage_ttft_hist_env_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    provider,
    model_id,
    multiIf(isNull(ttft_ms), toUInt16(0), assumeNotNull(ttft_ms) = 0, toUInt16(1), toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(ttft_ms), 1))) * 25))) AS bucket,
    countState() AS requests
FROM usage_events
GROUP BY day, environment, provider, model_id, bucket;

-- The backfill's progress for the tables above: a row per UTC day of usage_events copied
-- into them, and a row in rollup_backfill_0010_done once every day is.
CREATE TABLE IF NOT EXISTS rollup_backfill_0010_days
(
    day Date,
    rows UInt64,
    done_at DateTime
)
ENGINE = ReplacingMergeTree(done_at)
ORDER BY day;

CREATE TABLE IF NOT EXISTS rollup_backfill_0010_done
(
    done_at DateTime
)
ENGINE = MergeTree
ORDER BY done_at;
