// Which event keys ClickHouse holds already: the look-up before every insert (load-step.ts).
// Redis already dropped the keys it knows; this catches the rest (a replay after a crash
// between the insert and marking the keys in Redis, or a Redis that lost its data), so
// usage_events gets each event key once and the rollups count it once. It reads
// usage_event_keys (migration 0012: each key under the day it was stored), only the days
// an earlier copy can have been stored in, so its cost follows a day's traffic and not
// every record ever stored; the keys of an insert that ended without an answer are read
// from the table itself.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { sqlString } from '@otm/shared/clickhouse-values';

/** Look-up queries stay well under ClickHouse's max_query_size (256 KiB by default). */
const LOOKUP_QUERY_BYTES = 128 * 1024;

/** What separates the keys in a look-up's one string literal (a key holding it is looked up in a list of literals instead). */
const KEY_SEPARATOR = '\n';
const ESCAPED = /[\\']/;

/** usage_event_keys.source (migration 0012): the table a key was stored in. */
export const KEY_SOURCE = { usage_events: 1, usage_io: 2 } as const;

const DAY_MS = 86_400_000;

/** How far back the look-up before an insert reaches (docs/ingester.md, "Stored once"). */
export interface KeyLookup {
  /** The dedupe window (DEDUPE_TTL_SECONDS): a record received this long after an earlier one with its key is still the same record. */
  windowS: number;
  /** False where migration 0012 is not applied (an ingester held to earlier migrations): every look-up reads the table itself. */
  keyTable: boolean;
  /** Tests only (INGEST_FAULT_INJECTION=skip-dedupe): nothing is looked up, every row is inserted as new. */
  unsafeSkip?: boolean;
}

export const DEFAULT_KEY_LOOKUP: KeyLookup = { windowS: 86_400, keyTable: true };

/**
 * The first UTC day ('YYYY-MM-DD') on which an earlier copy of these records can have
 * been stored: a copy is stored after its receipt, and an earlier request with the same
 * key was received at most the window before; one day more for the clocks of the
 * gateway (receipt) and the ingester (storage) disagreeing. Pure.
 */
export function storedSince(receivedAtMs: readonly number[], windowS: number): string {
  let oldest = Number.POSITIVE_INFINITY;
  for (const ms of receivedAtMs) if (ms < oldest) oldest = ms;
  const from = Math.max(0, (Number.isFinite(oldest) ? oldest : Date.now()) - windowS * 1000 - DAY_MS);
  return new Date(Math.floor(from / DAY_MS) * DAY_MS).toISOString().slice(0, 10);
}

export type KeyedTable = keyof typeof KEY_SOURCE;

/**
 * The keys of `keys` that `table` holds. With `since`, from usage_event_keys (the days
 * from `since` on: a day's keys, not the whole table); without it, from the table itself,
 * every row it ever stored: the answer after an insert that ended without one, whose
 * rows may be in the table without their keys having reached usage_event_keys.
 */
export async function existingEventKeys(
  clickhouse: ClickHouseClient,
  table: KeyedTable,
  keys: readonly string[],
  since: string | null,
): Promise<Set<string>> {
  if (since !== null) return (await indexedEventKeys(clickhouse, { [table]: keys }, since))[table];
  const found = await Promise.all(
    keyChunks(keys).map((chunk) =>
      queryRows<{ event_key: string }>(clickhouse, `SELECT DISTINCT event_key FROM ${table} WHERE event_key IN ${keySet(chunk)}`),
    ),
  );
  return new Set(found.flat().map((row) => row.event_key));
}

/**
 * The keys of each table's `keys` that usage_event_keys holds for that table from the day
 * `since` on, asked of it once for both tables (a query per chunk of keys, with both
 * sources: it reads the same index ranges as two, and builds the set of keys once).
 */
export async function indexedEventKeys(
  clickhouse: ClickHouseClient,
  keys: Partial<Record<KeyedTable, readonly string[]>>,
  since: string,
): Promise<Record<KeyedTable, Set<string>>> {
  const found: Record<KeyedTable, Set<string>> = { usage_events: new Set(), usage_io: new Set() };
  const asked = (Object.keys(KEY_SOURCE) as KeyedTable[]).filter((table) => (keys[table]?.length ?? 0) > 0);
  if (asked.length === 0) return found;
  const wanted = Object.fromEntries(asked.map((table) => [KEY_SOURCE[table], { table, keys: new Set(keys[table]) }]));
  const union = asked.length === 1 ? keys[asked[0]!]! : [...new Set(asked.flatMap((table) => keys[table]!))];
  const rows = await Promise.all(
    keyChunks(union).map((chunk) =>
      queryRows<{ source: number; event_key: string }>(
        clickhouse,
        `SELECT DISTINCT source, event_key FROM usage_event_keys
         WHERE source IN (${asked.map((table) => KEY_SOURCE[table]).join(', ')}) AND stored_date >= toDate(${sqlString(since)})
           AND event_key IN ${keySet(chunk)}`,
      ),
    ),
  );
  for (const row of rows.flat()) {
    const of = wanted[Number(row.source)];
    // Only what was asked of that table: the keys of the other may be among the chunk's.
    if (of?.keys.has(row.event_key)) found[of.table].add(row.event_key);
  }
  return found;
}

/** `keys` in chunks whose literals stay under LOOKUP_QUERY_BYTES. */
function keyChunks(keys: readonly string[]): string[][] {
  const lists: string[][] = [];
  let list: string[] = [];
  let bytes = 0;
  for (const key of keys) {
    // A key's bytes in the query: its literal's (its quotes and escapes), as a list would hold it.
    const length = ESCAPED.test(key) ? sqlString(key).length : key.length + 2;
    if (bytes + length > LOOKUP_QUERY_BYTES && list.length > 0) {
      lists.push(list);
      list = [];
      bytes = 0;
    }
    list.push(key);
    bytes += length + 1;
  }
  if (list.length > 0) lists.push(list);
  return lists;
}

async function queryRows<Row>(clickhouse: ClickHouseClient, query: string): Promise<Row[]> {
  const result = await clickhouse.query({ query, format: 'JSONEachRow' });
  return result.json<Row>();
}

/**
 * The right-hand side of `event_key IN …` for `keys`: one string literal that ClickHouse
 * splits into the set (its primary key index is used with it as with a list, on 18.16 as
 * on current releases), not a list of thousands of literals, which cost ClickHouse about
 * twice the CPU on 18.16 (docs/ingester.md, "Stored once: the look-up's keys"). Keys that
 * hold the separator go as a list.
 */
export function keySet(keys: readonly string[]): string {
  if (keys.some((key) => key.includes(KEY_SEPARATOR))) return `(${keys.map(sqlString).join(',')})`;
  return `(SELECT arrayJoin(splitByChar(${sqlString(KEY_SEPARATOR)}, ${sqlString(keys.join(KEY_SEPARATOR))})))`;
}
