// Load: one JSONEachRow insert per table per batch. An insert either lands whole
// or fails; on failure nothing is committed and the batch is retried, which the
// event-key collapsing (and the query-side GROUP BY event_key) absorbs.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { EnrichedRecord } from './enrich-step.js';

/** ClickHouse error codes that mean "this data is wrong", not "try again". */
const DATA_ERROR_CODES = new Set(['6', '26', '27', '32', '38', '41', '53', '69', '70', '72', '117', '130', '131', '135']);

export function isDataError(error: unknown): boolean {
  const code = (error as { code?: string }).code;
  return code !== undefined && DATA_ERROR_CODES.has(String(code));
}

export async function loadStep(clickhouse: ClickHouseClient, records: readonly EnrichedRecord[]): Promise<void> {
  if (records.length === 0) return;
  const io = records.flatMap((record) => (record.io ? [record.io] : []));
  // Text first: an events row never exists without its io row.
  if (io.length > 0) await clickhouse.insert({ table: 'usage_io', values: io, format: 'JSONEachRow' });
  await clickhouse.insert({ table: 'usage_events', values: records.map((record) => record.event), format: 'JSONEachRow' });
}
