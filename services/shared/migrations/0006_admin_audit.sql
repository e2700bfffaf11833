-- The audit log of the admin API and the CLI (docs/privacy.md): one row per change
-- (key created or deleted, a capture policy set), written before the change is made,
-- and one more when it failed. Append-only: nothing in the project updates or deletes
-- rows here, and retention never touches the table.
CREATE TABLE IF NOT EXISTS admin_audit
(
    at DateTime,
    at_ms UInt64,
    actor String,
    action String,
    target String,
    details String,
    request_id String
)
ENGINE = MergeTree
PARTITION BY toYYYYMM(at)
ORDER BY (at_ms, action);
