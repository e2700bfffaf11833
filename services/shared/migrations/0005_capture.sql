-- The capture policy applied at the gateway (docs/privacy.md): `full`, `redact` or
-- `metadata-only`; rows of records queued before policies existed are `full`. The
-- lengths of prompt and response (UTF-16 units) are kept also when metadata-only
-- dropped the text, and `redactions` counts the spans replaced by placeholders.
ALTER TABLE usage_events ADD COLUMN capture_policy String DEFAULT 'full' AFTER anomalies;
ALTER TABLE usage_events ADD COLUMN prompt_chars Nullable(UInt64) AFTER capture_policy;
ALTER TABLE usage_events ADD COLUMN response_chars Nullable(UInt64) AFTER prompt_chars;
ALTER TABLE usage_events ADD COLUMN redactions UInt32 DEFAULT 0 AFTER response_chars;
