// Load: one RowBinary insert per table per load unit (the rows encoded after enrich,
// encode-step.ts), of event keys that table does not hold yet. Redis already dropped
// the keys it knows; this look-up catches the rest (a replay after a crash between the
// insert and marking the keys in Redis, or a Redis that lost its data), so usage_events
// gets each event key once and the materialized rollups, which count every inserted
// row, count it once. The look-up runs inside the retried unit: a retry after an
// insert whose outcome was unknown checks again. usage_io is looked up on its own, so
// the two inserts can run at once. An insert into usage_events that ends without an
// answer is noted (its query id, its event keys): its rows may be stored but not
// counted by every rollup, and the caller has them recounted (rollups/repair.ts in the
// shared package) when a later attempt finds them stored.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { sqlString } from '@otm/shared/clickhouse-values';
import { clickhouseErrorCode, clickhouseErrorMessage, isDataError } from '@otm/shared/clickhouse-errors';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { INSERT_EVENTS, INSERT_IO, type EncodedRow } from './encode-step.js';

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
  await insertBody(clickhouse, `INSERT INTO ${table} FORMAT JSONEachRow`, `${lines.join('\n')}\n`, queryId);
}

/** One INSERT of rows already encoded in RowBinary for `statement` (INSERT_EVENTS, INSERT_IO): the body is the rows one after the other. */
export async function insertEncoded(
  clickhouse: ClickHouseClient,
  statement: string,
  rows: readonly Buffer[],
  queryId: string = randomUUID(),
): Promise<void> {
  if (rows.length === 0) return;
  await insertBody(clickhouse, statement, Buffer.concat(rows), queryId);
}

async function insertBody(clickhouse: ClickHouseClient, statement: string, body: string | Buffer, queryId: string): Promise<void> {
  const { stream } = await clickhouse.exec({
    query: statement,
    values: Readable.from([body], { objectMode: false }),
    query_id: queryId,
  });
  await new Promise<void>((resolve, reject) => {
    stream.on('error', reject).on('end', resolve).resume();
  });
}

/** Inserts into usage_events that ended without an answer, noted across the attempts of one load unit. */
export interface Unanswered {
  queryIds: Set<string>;
  eventKeys: Set<string>;
}

export const noneUnanswered = (): Unanswered => ({ queryIds: new Set(), eventKeys: new Set() });

/** Inserts the rows ClickHouse does not hold yet; returns the event keys that were already there. */
export async function loadStep(
  clickhouse: ClickHouseClient,
  rows: readonly EncodedRow[],
  order: 'together' | 'io first' = 'together',
  unanswered: Unanswered = noneUnanswered(),
): Promise<string[]> {
  if (rows.length === 0) return [];
  const withIo = rows.filter((row) => row.io !== null);
  const [eventsThere, ioThere] = await Promise.all([
    existingEventKeys(
      clickhouse,
      'usage_events',
      rows.map((row) => row.eventKey),
    ),
    existingEventKeys(
      clickhouse,
      'usage_io',
      withIo.map((row) => row.eventKey),
    ),
  ]);
  const missing = rows.filter((row) => !eventsThere.has(row.eventKey));
  const events = missing.map((row) => row.event);
  const io = withIo.filter((row) => !ioThere.has(row.eventKey)).map((row) => row.io!);
  // Both tables at once: each is looked up on its own, so a unit that failed halfway
  // (one insert in, the other not) completes on its retry or redelivery.
  const insertIo = () => insertEncoded(clickhouse, INSERT_IO, io);
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
): Promise<IsolatedLoad<T>> {
  const result: IsolatedLoad<T> = { loaded: [], refused: [], alreadyLoaded: [] };
  const attempt = async (part: readonly T[], order: 'together' | 'io first'): Promise<void> => {
    try {
      result.alreadyLoaded.push(...(await loadStep(clickhouse, part.map(rowOf), order, unanswered)));
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
