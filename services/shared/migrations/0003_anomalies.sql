-- What the ingester had to change to store a record it did not refuse (a timestamp
-- outside what DateTime holds, set to NULL; lone surrogates replaced by U+FFFD), as
-- `field:problem` items; empty for nearly every row. See enrich-step.ts.
ALTER TABLE usage_events ADD COLUMN anomalies Array(String) AFTER flag_latency_mismatch;
