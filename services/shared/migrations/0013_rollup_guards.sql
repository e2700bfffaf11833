-- The erasure fence kept in ClickHouse as well as in Redis (docs/ingester.md, "When
-- Redis is down"): tombstones of erased users (a SHA-256 of environment and user id,
-- never the id), intervals of rollup rows being rebuilt, and the insert leases of
-- ingesters loading while Redis is unreachable. Each row is a version of its (kind, id):
-- the newest says whether a lease ended or a fence was lifted. Every row carries when it
-- stops mattering (expires_ms); retention deletes those past it. A few rows per erasure
-- or re-costing, and two per load unit while Redis is down.
CREATE TABLE IF NOT EXISTS rollup_guards
(
    kind String,
    id String,
    erased_at_ms UInt64,
    fence_kind String,
    from_ms UInt64,
    to_ms UInt64,
    expires_ms UInt64,
    ended UInt8,
    version UInt64
)
ENGINE = MergeTree
ORDER BY (kind, id);
