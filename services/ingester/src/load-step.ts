// Load: one RowBinary insert per table per load unit (the rows encoded after enrich,
// encode-step.ts), of event keys that table does not hold yet (key-lookup.ts). The
// look-up runs inside the retried unit: a retry after an insert whose outcome was
// unknown checks again, in the table itself for the keys of that insert. usage_io is
// looked up on its own, so the two inserts can run at once. An insert into usage_events
// that ends without an answer is noted (its query id, its event keys): its rows may be
// stored but not counted by every rollup, and the load unit has them recounted
// (rollups/repair.ts in the shared package) when a later attempt finds them stored.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { LONG_QUERY } from '@otm/shared/rollups/repair';
import { clickhouseErrorCode, clickhouseErrorMessage, isDataError } from '@otm/shared/clickhouse-errors';
import { randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import { INSERT_EVENTS, INSERT_IO } from './encode-step.js';
import {
  DEFAULT_KEY_LOOKUP,
  KEY_SOURCE,
  existingEventKeys,
  indexedEventKeys,
  keySet,
  storedSince,
  type KeyLookup,
  type KeyedTable,
} from './key-lookup.js';
import { noneUnanswered, type IsolatedLoad, type Unanswered } from './ports.js';
import type { EncodedRow } from './rows.js';

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

/** Rows lying one after the other in memory over at least this many bytes are sent where they lie. */
const SENT_AS_THEY_LIE_BYTES = BODY_PIECE_BYTES / 8;

/**
 * The rows one after the other, in pieces of about BODY_PIECE_BYTES. Rows that lie one
 * after the other in memory, as the encoder leaves the rows it encodes one after the
 * other (row-binary.ts), go as one view of where they lie, without a copy; the others
 * (around a row already stored, at the end of a block) are copied together into pieces
 * that end with the row that reaches that size. The body of a unit is never one buffer
 * of all its rows beside the rows themselves, nor thousands of writes of one row each.
 */
export function* bodyPieces(rows: readonly Buffer[]): Generator<Buffer> {
  let copied: Buffer[] = [];
  let copiedBytes = 0;
  // The run: rows lying one after the other in `runMemory`, from `runStart` to `runEnd`.
  let runMemory: ArrayBufferLike | null = null;
  let runStart = 0;
  let runEnd = 0;
  function* takeCopied(): Generator<Buffer> {
    if (copiedBytes > 0) yield Buffer.concat(copied, copiedBytes);
    copied = [];
    copiedBytes = 0;
  }
  function* endRun(): Generator<Buffer> {
    if (runMemory === null) return;
    const run = Buffer.from(runMemory, runStart, runEnd - runStart);
    runMemory = null;
    if (run.length >= SENT_AS_THEY_LIE_BYTES) {
      yield* takeCopied();
      yield run;
      return;
    }
    copied.push(run);
    copiedBytes += run.length;
    if (copiedBytes >= BODY_PIECE_BYTES) yield* takeCopied();
  }
  for (const row of rows) {
    if (row.buffer !== runMemory || row.byteOffset !== runEnd || runEnd - runStart >= BODY_PIECE_BYTES) {
      yield* endRun();
      runMemory = row.buffer;
      runStart = row.byteOffset;
    }
    runEnd = row.byteOffset + row.length;
  }
  yield* endRun();
  yield* takeCopied();
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
  const { usage_events: eventsThere, usage_io: ioThere } = lookup.unsafeSkip
    ? { usage_events: new Set<string>(), usage_io: new Set<string>() }
    : await storedKeys(clickhouse, rows, withIo, unanswered, since);
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
    // Both ended before the attempt does, whichever failed: a retry (or the halving of a
    // refused unit) looks its keys up again, and an insert still running then could store
    // what the retry does not find, and the retry store it again. A failure of the
    // connection goes before a refused row: the whole unit is tried again, not halved.
    const outcomes = await Promise.allSettled([insertIo(), insertEvents()]);
    const failures = outcomes.flatMap((outcome) => (outcome.status === 'rejected' ? [outcome.reason as unknown] : []));
    if (failures.length > 0) throw failures.find((error) => !isDataError(error)) ?? failures[0];
  }
  return [...eventsThere];
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
