// Load: one JSONEachRow insert per table per batch, of event keys ClickHouse does
// not hold yet. Redis already dropped the keys it knows; this look-up catches the
// rest (a replay after a crash between the insert and marking the keys in Redis, or
// a Redis that lost its data), so usage_events gets each event key once and the
// materialized rollups, which count every inserted row, count it once. The look-up
// runs inside the retried unit: a retry after an insert whose outcome was unknown
// checks again.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { EnrichedRecord } from './enrich-step.js';

/** ClickHouse error codes that mean "this data is wrong", not "try again". */
const DATA_ERROR_CODES = new Set(['6', '26', '27', '32', '38', '41', '53', '69', '70', '72', '117', '130', '131', '135']);

export function isDataError(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return code !== undefined && DATA_ERROR_CODES.has(String(code));
}

/** A ClickHouse string literal (18.16 has no query parameters). */
export function sqlString(value: string): string {
  return `'${value.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
}

export async function existingEventKeys(clickhouse: ClickHouseClient, keys: readonly string[]): Promise<Set<string>> {
  if (keys.length === 0) return new Set();
  const result = await clickhouse.query({
    query: `SELECT DISTINCT event_key FROM usage_events WHERE event_key IN (${keys.map(sqlString).join(',')})`,
    format: 'JSONEachRow',
  });
  return new Set((await result.json<{ event_key: string }>()).map((row) => row.event_key));
}

/** Inserts the records ClickHouse does not hold yet; returns how many were already there. */
export async function loadStep(clickhouse: ClickHouseClient, records: readonly EnrichedRecord[]): Promise<number> {
  if (records.length === 0) return 0;
  const existing = await existingEventKeys(
    clickhouse,
    records.map((record) => record.event.event_key),
  );
  const fresh = existing.size === 0 ? records : records.filter((record) => !existing.has(record.event.event_key));
  if (fresh.length === 0) return existing.size;
  const io = fresh.flatMap((record) => (record.io ? [record.io] : []));
  // Text first: an events row never exists without its io row.
  if (io.length > 0) await clickhouse.insert({ table: 'usage_io', values: io, format: 'JSONEachRow' });
  await clickhouse.insert({ table: 'usage_events', values: fresh.map((record) => record.event), format: 'JSONEachRow' });
  return existing.size;
}
