-- Latency per quarter of a UTC day (00:00, 06:00, 12:00, 18:00) by provider and model
-- (docs/ingester.md, "The tables"): the models page's latency over a day or more
-- without buckets. Over the last 24 hours it merged one t-digest state per model and hour
-- (24); from quarter days it merges three or four and the hours at the two edges (at most
-- nine), and a month's edges shrink likewise. A state's size grows with the values it
-- holds (about with their logarithm), so fewer, fuller states also make the cost grow less
-- with traffic. The analytics API reads this table once its backfill (a third generation of
-- rollup-backfill.ts, recorded in rollup_backfill_0010_days) has copied the records stored
-- before it; until then it reads hours and days as before.

-- usage_latency_by_quarter_day: latency per six hours by provider and model.
CREATE TABLE IF NOT EXISTS usage_latency_by_quarter_day
(
    quarter_day DateTime,
    provider String,
    model_id String,
    requests AggregateFunction(count),
    latency_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    ttft_ms AggregateFunction(quantilesTDigestIf(0.5, 0.9, 0.99), UInt64, UInt8),
    tokens_per_sec AggregateFunction(avgIf, Float64, UInt8)
)
ENGINE = AggregatingMergeTree()
PARTITION BY toYYYYMM(quarter_day)
ORDER BY (quarter_day, provider, model_id);

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_latency_by_quarter_day_mv TO usage_latency_by_quarter_day AS
SELECT
    toDateTime(intDiv(toUInt32(event_time), 21600) * 21600) AS quarter_day,
    provider,
    model_id,
    countState() AS requests,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency_ms,
    quantilesTDigestIfState(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft_ms,
    avgIfState(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tokens_per_sec
FROM usage_events
GROUP BY quarter_day, provider, model_id;

-- The backfill's progress for the table above: a row per UTC day of usage_events copied
-- into it, and a row in rollup_backfill_0010_done once every day is.
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
