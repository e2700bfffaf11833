// Load: one JSONEachRow insert per table per load unit, of event keys that table
// does not hold yet. Redis already dropped the keys it knows; this look-up catches the
// rest (a replay after a crash between the insert and marking the keys in Redis, or
// a Redis that lost its data), so usage_events gets each event key once and the
// materialized rollups, which count every inserted row, count it once. The look-up
// runs inside the retried unit: a retry after an insert whose outcome was unknown
// checks again. usage_io is looked up on its own, so the two inserts can run at once.
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

/** Look-up queries stay well under ClickHouse's max_query_size (256 KiB by default). */
const LOOKUP_QUERY_BYTES = 128 * 1024;

export async function existingEventKeys(
  clickhouse: ClickHouseClient,
  table: 'usage_events' | 'usage_io',
  keys: readonly string[],
): Promise<Set<string>> {
  const lists: string[][] = [];
  let list: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    const literal = sqlString(key);
    if (bytes + literal.length > LOOKUP_QUERY_BYTES && list.length > 0) {
      lists.push(list);
      list = [];
      bytes = 0;
    }
    list.push(literal);
    bytes += literal.length + 1;
  }
  if (list.length > 0) lists.push(list);
  const found = await Promise.all(
    lists.map(async (literals) => {
      const result = await clickhouse.query({
        query: `SELECT DISTINCT event_key FROM ${table} WHERE event_key IN (${literals.join(',')})`,
        format: 'JSONEachRow',
      });
      return (await result.json<{ event_key: string }>()).map((row) => row.event_key);
    }),
  );
  return new Set(found.flat());
}

/** Inserts the rows ClickHouse does not hold yet; returns how many events were already there. */
export async function loadStep(clickhouse: ClickHouseClient, records: readonly EnrichedRecord[]): Promise<number> {
  if (records.length === 0) return 0;
  const withIo = records.filter((record) => record.io !== null);
  const [eventsThere, ioThere] = await Promise.all([
    existingEventKeys(
      clickhouse,
      'usage_events',
      records.map((record) => record.event.event_key),
    ),
    existingEventKeys(
      clickhouse,
      'usage_io',
      withIo.map((record) => record.event.event_key),
    ),
  ]);
  const events = records.filter((record) => !eventsThere.has(record.event.event_key)).map((record) => record.event);
  const io = withIo.filter((record) => !ioThere.has(record.event.event_key)).map((record) => record.io!);
  // Both tables at once: each is looked up on its own, so a unit that failed halfway
  // (one insert in, the other not) completes on its retry or redelivery.
  await Promise.all([
    io.length > 0 ? clickhouse.insert({ table: 'usage_io', values: io, format: 'JSONEachRow' }) : undefined,
    events.length > 0 ? clickhouse.insert({ table: 'usage_events', values: events, format: 'JSONEachRow' }) : undefined,
  ]);
  return eventsThere.size;
}
