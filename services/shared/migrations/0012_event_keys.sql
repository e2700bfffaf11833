-- The event keys the ingester looks up before each insert (docs/ingester.md, "Stored
-- once"). usage_events and usage_io are ordered by event_key, one index mark per 8,192
-- rows: a look-up of a unit's thousands of scattered keys touched nearly every mark, so
-- it read nearly the whole table, and its cost grew with every record ever stored (9.1 of
-- 10 million rows read for 5,000 keys). Here each key is a row of the day it was stored,
-- one mark per 256 rows: the look-up reads only the days a duplicate of its records can
-- have been stored in (from a day before the oldest record's receipt less the dedupe
-- window), so its cost follows a day's traffic, not the table's size. source: 1 for
-- usage_events, 2 for usage_io (each is looked up on its own). Retention drops whole days
-- (RETENTION_EVENT_KEYS_DAYS).
CREATE TABLE IF NOT EXISTS usage_event_keys
(
    stored_date Date,
    source UInt8,
    event_key String
)
ENGINE = MergeTree()
PARTITION BY stored_date
ORDER BY (source, event_key)
SETTINGS index_granularity = 256;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_event_keys_events_mv TO usage_event_keys AS
SELECT toDate(ingested_at) AS stored_date, toUInt8(1) AS source, event_key FROM usage_events;

CREATE MATERIALIZED VIEW IF NOT EXISTS usage_event_keys_io_mv TO usage_event_keys AS
SELECT toDate(ingested_at) AS stored_date, toUInt8(2) AS source, event_key FROM usage_io;

-- The keys of the rows stored in the last 10 days before this migration (the look-up's
-- reach with the default retention); rows stored while it runs may be copied twice,
-- which the look-up does not mind.
INSERT INTO usage_event_keys (stored_date, source, event_key)
SELECT toDate(ingested_at) AS stored_date, toUInt8(1) AS source, event_key FROM usage_events WHERE ingested_at >= now() - 864000;

INSERT INTO usage_event_keys (stored_date, source, event_key)
SELECT toDate(ingested_at) AS stored_date, toUInt8(2) AS source, event_key FROM usage_io WHERE ingested_at >= now() - 864000
