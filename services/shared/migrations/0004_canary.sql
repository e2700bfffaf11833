-- Freshness canary probes (see canary.ts): records sent with the canary's API key
-- land here, never in usage_events, so no analytics query or rollup ever sees them.
-- One row per probe loaded (a retried load may write one twice; the canary only asks
-- whether it arrived).
CREATE TABLE IF NOT EXISTS canary_probes
(
    probe_id String,
    received_at_ms UInt64,
    loaded_at DateTime
)
ENGINE = MergeTree
ORDER BY probe_id;
