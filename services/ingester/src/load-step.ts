// Load: one RowBinary insert per table per load unit (the rows encoded after enrich,
// encode-step.ts), of event keys that table does not hold yet. Redis already dropped
// the keys it knows; this look-up catches the rest (a replay after a crash between the
// insert and marking the keys in Redis, or a Redis that lost its data), so usage_events
// gets each event key once and the materialized rollups, which count every inserted
// row, count it once. It reads usage_event_keys (migration 0012: each key under the day
// it was stored), only the days an earlier copy can have been stored in, so its cost
// follows a day's traffic and not every record ever stored. The look-up runs inside the
// retried unit: a retry after an insert whose outcome was unknown checks again, in the
// table itself for the keys of that insert. usage_io is looked up on its own, so
// the two inserts can run at once. An insert into usage_events that ends without an
// answer is noted (its query id, its event keys): its rows may be stored but not
// counted by every rollup, and the caller has them recounted (rollups/repair.ts in the
// shared package) when a later attempt finds them stored.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { sqlString } from '@otm/shared/clickhouse-values';
import { LONG_QUERY } from '@otm/shared/rollups/repair';
import { clickhouseErrorCode, clickhouseErrorMessage, isDataError } from '@otm/shared/clickhouse-errors';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { INSERT_EVENTS, INSERT_IO, type EncodedRow } from './encode-step.js';

/** Look-up queries stay well under ClickHouse's max_query_size (256 KiB by default). */
const LOOKUP_QUERY_BYTES = 128 * 1024;

/** What separates the keys in a look-up's one string literal (a key holding it is looked up in a list of literals instead). */
const KEY_SEPARATOR = '\n';
const ESCAPED = /[\\']/;

/** usage_event_keys.source (migration 0012): the table a key was stored in. */
const KEY_SOURCE = { usage_events: 1, usage_io: 2 } as const;

const DAY_MS = 86_400_000;

/** How far back the look-up before an insert reaches (docs/ingester.md, "Stored once"). */
export interface KeyLookup {
  /** The dedupe window (DEDUPE_TTL_SECONDS): a record received this long after an earlier one with its key is still the same record. */
  windowS: number;
  /** False where migration 0012 is not applied (an ingester held to earlier migrations): every look-up reads the table itself. */
  keyTable: boolean;
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

type KeyedTable = keyof typeof KEY_SOURCE;

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

/**
 * The keys of `rows` that usage_events holds and those of `withIo` that usage_io holds:
 * the keys of an insert that ended without an answer from the table itself, the others
 * from usage_event_keys from the day `since` on, for both tables at once (all from the
 * tables themselves when `since` is null: no key table).
 */
async function storedKeys(
  clickhouse: ClickHouseClient,
  rows: readonly EncodedRow[],
  withIo: readonly EncodedRow[],
  unanswered: Unanswered,
  since: string | null,
): Promise<Record<KeyedTable, Set<string>>> {
  const keysOf = (list: readonly EncodedRow[]) => list.map((row) => row.eventKey);
  if (since === null) {
    const [events, io] = await Promise.all([
      existingEventKeys(clickhouse, 'usage_events', keysOf(rows), null),
      existingEventKeys(clickhouse, 'usage_io', keysOf(withIo), null),
    ]);
    return { usage_events: events, usage_io: io };
  }
  const split = (list: readonly EncodedRow[], unsure: ReadonlySet<string>) => ({
    unsure: unsure.size === 0 ? [] : keysOf(list.filter((row) => unsure.has(row.eventKey))),
    rest: unsure.size === 0 ? keysOf(list) : keysOf(list.filter((row) => !unsure.has(row.eventKey))),
  });
  const events = split(rows, unanswered.eventKeys);
  const io = split(withIo, unanswered.ioEventKeys);
  const [indexed, directEvents, directIo] = await Promise.all([
    indexedEventKeys(clickhouse, { usage_events: events.rest, usage_io: io.rest }, since),
    events.unsure.length === 0 ? new Set<string>() : existingEventKeys(clickhouse, 'usage_events', events.unsure, null),
    io.unsure.length === 0 ? new Set<string>() : existingEventKeys(clickhouse, 'usage_io', io.unsure, null),
  ]);
  for (const [table, direct] of [
    ['usage_events', directEvents],
    ['usage_io', directIo],
  ] as const) {
    if (direct.size === 0) continue;
    // Stored by an insert that ended without an answer, perhaps without their keys
    // reaching usage_event_keys: recorded there now, so that a later replay finds them
    // (a key recorded twice is harmless).
    await clickhouse.command({
      query: `INSERT INTO usage_event_keys (stored_date, source, event_key)
              SELECT toDate(ingested_at), toUInt8(${KEY_SOURCE[table]}), event_key FROM ${table}
              WHERE event_key IN ${keySet([...direct])} LIMIT 1 BY event_key`,
      clickhouse_settings: LONG_QUERY,
    });
    for (const key of direct) indexed[table].add(key);
  }
  return indexed;
}

/**
 * One INSERT of JSONEachRow lines already serialised: the body is the lines joined,
 * sent as they are (the canary's probes).
 */
export async function insertLines(
  clickhouse: ClickHouseClient,
  table: string,
  lines: readonly string[],
  queryId: string = randomUUID(),
): Promise<void> {
  if (lines.length === 0) return;
  await insertBody(clickhouse, `INSERT INTO ${table} FORMAT JSONEachRow`, [`${lines.join('\n')}\n`], queryId);
}

/** One INSERT of rows already encoded in RowBinary for `statement` (INSERT_EVENTS, INSERT_IO): the body is the rows one after the other. */
export async function insertEncoded(
  clickhouse: ClickHouseClient,
  statement: string,
  rows: readonly Buffer[],
  queryId: string = randomUUID(),
): Promise<void> {
  if (rows.length === 0) return;
  await insertBody(clickhouse, statement, bodyPieces(rows), queryId);
}

/** The size of the pieces an insert body is sent in. */
export const BODY_PIECE_BYTES = 256 * 1024;

/**
 * The rows one after the other, in pieces of about BODY_PIECE_BYTES (a piece ends with
 * the row that reaches that size): the body of a unit is never one buffer of all its
 * rows beside the rows themselves (ten megabytes and more, mapped and unmapped at each
 * insert), nor thousands of writes of one row each.
 */
export function* bodyPieces(rows: readonly Buffer[]): Generator<Buffer> {
  let start = 0;
  let bytes = 0;
  for (let index = 0; index < rows.length; index++) {
    bytes += rows[index]!.length;
    if (bytes >= BODY_PIECE_BYTES) {
      yield Buffer.concat(rows.slice(start, index + 1), bytes);
      start = index + 1;
      bytes = 0;
    }
  }
  if (start < rows.length) yield Buffer.concat(rows.slice(start), bytes);
}

async function insertBody(
  clickhouse: ClickHouseClient,
  statement: string,
  body: Iterable<string | Buffer>,
  queryId: string,
): Promise<void> {
  const { stream } = await clickhouse.exec({
    query: statement,
    values: Readable.from(body, { objectMode: false }),
    query_id: queryId,
  });
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject).on('end', resolve).resume();
  });
}

/** Inserts that ended without an answer, noted across the attempts of one load unit. */
export interface Unanswered {
  /** Those into usage_events: their rollups are recounted (rollups/repair.ts). */
  queryIds: Set<string>;
  eventKeys: Set<string>;
  /** The event keys of those into usage_io. */
  ioEventKeys: Set<string>;
}

export const noneUnanswered = (): Unanswered => ({ queryIds: new Set(), eventKeys: new Set(), ioEventKeys: new Set() });

/** Inserts the rows ClickHouse does not hold yet; returns the event keys that were already there. */
export async function loadStep(
  clickhouse: ClickHouseClient,
  rows: readonly EncodedRow[],
  order: 'together' | 'io first' = 'together',
  unanswered: Unanswered = noneUnanswered(),
  lookup: KeyLookup = DEFAULT_KEY_LOOKUP,
): Promise<string[]> {
  if (rows.length === 0) return [];
  const withIo = rows.filter((row) => row.io !== null);
  // One reach for both tables: the unit's oldest receipt (null: the tables themselves).
  const since = lookup.keyTable
    ? storedSince(
        rows.map((row) => row.receivedAtMs),
        lookup.windowS,
      )
    : null;
  const { usage_events: eventsThere, usage_io: ioThere } = await storedKeys(clickhouse, rows, withIo, unanswered, since);
  const missing = rows.filter((row) => !eventsThere.has(row.eventKey));
  const events = missing.map((row) => row.event);
  const ioMissing = withIo.filter((row) => !ioThere.has(row.eventKey));
  const io = ioMissing.map((row) => row.io!);
  // Both tables at once: each is looked up on its own, so a unit that failed halfway
  // (one insert in, the other not) completes on its retry or redelivery.
  const insertIo = async () => {
    try {
      await insertEncoded(clickhouse, INSERT_IO, io);
    } catch (error) {
      if (!isDataError(error)) for (const row of ioMissing) unanswered.ioEventKeys.add(row.eventKey);
      throw error;
    }
  };
  const insertEvents = async () => {
    const queryId = randomUUID();
    try {
      await insertEncoded(clickhouse, INSERT_EVENTS, events, queryId);
    } catch (error) {
      // Refused for its data: nothing written. Anything else: perhaps written, perhaps in part.
      if (!isDataError(error)) {
        unanswered.queryIds.add(queryId);
        for (const row of missing) unanswered.eventKeys.add(row.eventKey);
      }
      throw error;
    }
  };
  if (order === 'io first') {
    // Looking for a bad row: an event (what analytics count) is stored only once its
    // text is, so a record refused by either table is a dead letter and never a count.
    await insertIo();
    await insertEvents();
  } else {
    await Promise.all([insertIo(), insertEvents()]);
  }
  return [...eventsThere];
}

export interface RefusedRow<T> {
  item: T;
  /** ClickHouse's error code and message for this row alone. */
  code: number;
  message: string;
}

export interface IsolatedLoad<T> {
  loaded: T[];
  refused: RefusedRow<T>[];
  /** Event keys usage_events held already (a replay). */
  alreadyLoaded: string[];
}

/**
 * Loads the items; when ClickHouse refuses the data itself (a data error, see
 * clickhouse-errors.ts) the batch is halved until each refused row stands alone, the
 * good halves are loaded and the refused rows are returned with ClickHouse's reason
 * for the dead-letter topic. One bad row costs about 2·log2(n) extra inserts and
 * never blocks the others. Any other failure is thrown, for the caller to retry.
 */
export async function loadIsolatingBadRows<T>(
  clickhouse: ClickHouseClient,
  items: readonly T[],
  rowOf: (item: T) => EncodedRow,
  unanswered: Unanswered = noneUnanswered(),
  lookup: KeyLookup = DEFAULT_KEY_LOOKUP,
): Promise<IsolatedLoad<T>> {
  const result: IsolatedLoad<T> = { loaded: [], refused: [], alreadyLoaded: [] };
  const attempt = async (part: readonly T[], order: 'together' | 'io first'): Promise<void> => {
    try {
      result.alreadyLoaded.push(...(await loadStep(clickhouse, part.map(rowOf), order, unanswered, lookup)));
      result.loaded.push(...part);
    } catch (error) {
      if (!isDataError(error)) throw error;
      if (part.length === 1) {
        result.refused.push({ item: part[0]!, code: clickhouseErrorCode(error)!, message: clickhouseErrorMessage(error) });
        return;
      }
      const middle = Math.ceil(part.length / 2);
      await attempt(part.slice(0, middle), 'io first');
      await attempt(part.slice(middle), 'io first');
    }
  };
  await attempt(items, 'together');
  return result;
}
