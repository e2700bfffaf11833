-- One row per distinct usage record. Numbers only: prompt and response text live in
-- usage_io so analytics never read them. Times are DateTime (seconds) plus epoch
-- milliseconds in UInt64 columns: 18.16 has no DateTime64.
-- ReplacingMergeTree collapses rows with the same event_key (the scoped
-- idempotency key) in the background; queries still group by event_key, so a
-- duplicate that is not merged yet never counts twice.
CREATE TABLE IF NOT EXISTS usage_events
(
    event_key String,
    request_id String,
    event_time DateTime,
    event_date Date,
    received_at DateTime,
    received_at_ms UInt64,
    api_key_id String,
    environment String,
    gateway_id String,
    idempotency_key Nullable(String),
    model_id String,
    provider String,
    status String,
    user_id String,
    user_type String,
    user_name Nullable(String),
    input_tokens Nullable(UInt64),
    output_tokens Nullable(UInt64),
    sent_total_tokens Nullable(UInt64),
    start_time_ms Nullable(UInt64),
    first_token_time_ms Nullable(UInt64),
    last_token_time_ms Nullable(UInt64),
    sent_latency_ms Nullable(UInt64),
    error_code Nullable(String),
    error_message Nullable(String),
    error_stack Nullable(String),
    context String,
    total_tokens UInt64,
    latency_ms Nullable(UInt64),
    ttft_ms Nullable(UInt64),
    output_tokens_per_sec Nullable(Float64),
    cost_usd Nullable(Float64),
    price_known UInt8,
    price_table_version String,
    flag_out_of_order UInt8,
    flag_total_mismatch UInt8,
    flag_latency_mismatch UInt8,
    ingested_at DateTime
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(event_date)
ORDER BY event_key;

CREATE TABLE IF NOT EXISTS usage_io
(
    event_key String,
    event_date Date,
    prompt Nullable(String),
    response Nullable(String),
    ingested_at DateTime
)
ENGINE = ReplacingMergeTree(ingested_at)
PARTITION BY toYYYYMM(event_date)
ORDER BY event_key;
