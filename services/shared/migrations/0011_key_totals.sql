-- Usage per key without the provider and the model (docs/ingester.md, "The tables";
-- docs/analytics-api.md, "Which table answers"). The keyed rollups of migration 0008 hold
-- a row per key, model and user type in each minute, hour and day: with 50 keys and 50
-- models a busy hour fills thousands of them, and a minute nearly one per record, so a
-- query grouped by key read more rows as traffic grew (about 1.5 times from 10 to 100
-- million events over 7 days). Most views of keys ask only for the key (and the
-- environment or the user type): these hold a row per key, environment and user type,
-- a few hundred per minute whatever the traffic, and answer those; a view that also
-- asks for the provider or the model still reads the rollups of 0008. Counts, tokens and
-- cost only (no latency states: latency by key reads 0008's). The analytics API reads
-- these tables once their backfill (a fourth generation of rollups/backfill.ts, recorded
-- in rollup_backfill_0011_days) has copied the records stored before them; until then
-- usage by key reads the keyed rollups of 0008.

-- usage_rollup_key_totals_by_minute: per minute by key, environment and user type: the edges of a range that hours and days do not cover, and minute buckets.
CREATE TABLE IF NOT EXISTS usage_rollup_key_totals_by_minute
(
    minute DateTime,
    environment String,
    api_key_id String,
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
    unpriced AggregateFunction(countIf, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(minute)
ORDER BY (minute, environment, api_key_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_minute_mv TO usage_rollup_key_totals_by_minute AS
SELECT
    toStartOfMinute(event_time) AS minute,
    environment,
    api_key_id,
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
    countIfState(price_known = 0) AS unpriced
FROM usage_events
GROUP BY minute, environment, api_key_id, user_type;

-- usage_rollup_key_totals_by_hour: per hour by key, environment and user type: hours, and the hours around whole days.
CREATE TABLE IF NOT EXISTS usage_rollup_key_totals_by_hour
(
    hour DateTime,
    environment String,
    api_key_id String,
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
    unpriced AggregateFunction(countIf, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(hour)
ORDER BY (hour, environment, api_key_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_hour_mv TO usage_rollup_key_totals_by_hour AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 3600) * 3600) AS hour,
    environment,
    api_key_id,
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
    countIfState(price_known = 0) AS unpriced
FROM usage_events
GROUP BY hour, environment, api_key_id, user_type;

-- usage_rollup_key_totals_by_day: per UTC day by key, environment and user type: whole UTC days.
CREATE TABLE IF NOT EXISTS usage_rollup_key_totals_by_day
(
    day DateTime,
    environment String,
    api_key_id String,
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
    unpriced AggregateFunction(countIf, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(day)
ORDER BY (day, environment, api_key_id, user_type);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_rollup_key_totals_by_day_mv TO usage_rollup_key_totals_by_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 86400) * 86400) AS day,
    environment,
    api_key_id,
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
    countIfState(price_known = 0) AS unpriced
FROM usage_events
GROUP BY day, environment, api_key_id, user_type;

-- The backfill's progress for the tables above: a row per UTC day of usage_events copied
-- into them, and a row in rollup_backfill_0011_done once every day is.
CREATE TABLE IF NOT EXISTS rollup_backfill_0011_days
(
    day Date,
    rows UInt64,
    done_at DateTime
)
ENGINE = ReplacingMergeTree(done_at)
ORDER BY day;

CREATE TABLE IF NOT EXISTS rollup_backfill_0011_done
(
    done_at DateTime
)
ENGINE = MergeTree
ORDER BY done_at;
