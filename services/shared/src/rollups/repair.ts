// Recounting the rollups of records whose insert ended without an answer.
//
// ClickHouse writes an INSERT into usage_events first, then into each materialized
// view on it, one after another, each view's part on its own. A server killed in
// between leaves rows in usage_events that some rollups never counted; the ingester's
// retry finds their event keys stored and inserts nothing, so without this step those
// rollups would stay short for good. For such keys (found stored after an attempt whose
// outcome is unknown) recountRollups:
//
//   1. waits until the unanswered INSERTs are no longer running on the server (a client
//      timeout does not stop an insert the server is still writing);
//   2. fences the UTC days of those records (fence.ts) and waits for the inserts in
//      flight: no other row can enter those days' groups while they are compared;
//   3. copies into usage_events_by_user the rows it lacks, by event key;
//   4. for each aggregating view, compares, group by group (the view's own GROUP BY, for
//      the groups those records fall in), the records usage_events holds with the
//      records the rollup counts. Equal: nothing to do. Short by exactly those records
//      of the group: the view missed them (a view writes an insert's rows of a group
//      together or not at all), and the view's own SELECT over them is inserted. Any
//      other difference: the group's rows are deleted and rebuilt from usage_events,
//      as the erasure job rebuilds them;
//   5. compares the changed groups again (a difference left is an error, retried by the
//      caller), then lifts the fence.
//
// Every step can run again: a second run finds the groups equal and changes nothing.
import type { ClickHouseClient } from '../clickhouse.js';
import { sqlString } from '../clickhouse-values.js';
import type { RollupFence, FenceInterval } from './fence.js';
import { mutate } from '../mutations.js';
import { BY_USER_COLUMNS, JOB_BUILT_VIEWS, aggregateViews, rebuildRollupSql, type AggregateView } from './views.js';
import { readDayState } from './day-levels.js';

/** Event keys per look-up (about 60 KiB of literals), groups per comparison and per rebuild. */
const KEYS_PER_QUERY = 1000;
const GROUPS_PER_QUERY = 500;
/** The look-ups carry long IN lists: above the 256 KiB ClickHouse parses by default. */
export const LONG_QUERY = { max_query_size: String(8 * 1024 * 1024) } as const;
const DAY_S = 86_400;

export type RepairFence = Pick<RollupFence, 'fence' | 'liftFence' | 'waitForInsertsInFlight'>;

export interface RecountOptions {
  /** Query ids of the INSERTs that ended without an answer: waited for until the server no longer runs them. */
  unansweredQueryIds?: readonly string[];
  /** How long those may still run before this attempt fails (to be retried). */
  queryWaitMs?: number;
  mutationTimeoutMs?: number;
  /** Cluster mode: the cluster's name ('' for one server). */
  cluster?: string;
}

export interface TableRecount {
  table: string;
  /** Groups the records fall in. */
  groups: number;
  /** Groups that lacked exactly those records, now added. */
  appended: number;
  /** Groups with any other difference, rebuilt from usage_events. */
  rebuilt: number;
}

export interface RecountOutcome {
  /** Event keys found in usage_events. */
  stored: number;
  /** Rows copied into usage_events_by_user. */
  copied: number;
  tables: TableRecount[];
}

/** One rollup group: its GROUP BY values as the comparison reads them (the time as epoch seconds, the rest as hex). */
interface Group {
  values: string[];
  /** Records of the recounted keys in the group. */
  records: number;
  /** Which key chunks hold them. */
  chunks: Set<number>;
}

/** A query's rows, with the long IN lists allowed. */
const rowsOf =
  (clickhouse: ClickHouseClient) =>
  async <T>(query: string): Promise<T[]> =>
    (await clickhouse.query({ query, format: 'JSONEachRow', clickhouse_settings: LONG_QUERY })).json<T>();

export const chunked = <T>(list: readonly T[], size: number): T[][] =>
  Array.from({ length: Math.ceil(list.length / size) }, (_, index) => list.slice(index * size, (index + 1) * size));

export async function recountRollups(
  clickhouse: ClickHouseClient,
  fence: RepairFence,
  eventKeys: readonly string[],
  options: RecountOptions = {},
): Promise<RecountOutcome> {
  const rows = rowsOf(clickhouse);
  const literalChunks = chunked([...new Set(eventKeys)].map(sqlString), KEYS_PER_QUERY);
  const keyChunks = literalChunks.map((literals) => literals.join(','));
  const outcome: RecountOutcome = { stored: 0, copied: 0, tables: [] };
  if (keyChunks.length === 0) return outcome;

  await waitUntilFinished(clickhouse, options.unansweredQueryIds ?? [], options.queryWaitMs ?? 60_000);

  const days = new Set<number>();
  for (const keys of keyChunks) {
    const found = await rows<{ day: number; n: string }>(
      `SELECT intDiv(toUInt32(event_time), ${DAY_S}) AS day, uniqExact(event_key) AS n FROM usage_events WHERE event_key IN (${keys}) GROUP BY day`,
    );
    for (const { day, n } of found) {
      days.add(Number(day));
      outcome.stored += Number(n);
    }
  }
  if (days.size === 0) return outcome;
  const wanted: FenceInterval[] = [...days].map((day) => ({ kind: 'all', fromMs: day * DAY_S * 1000, toMs: (day + 1) * DAY_S * 1000 }));
  const fromS = Math.min(...days) * DAY_S;
  const toS = (Math.max(...days) + 1) * DAY_S;
  const range = `event_time >= toDateTime(${fromS}) AND event_time < toDateTime(${toS})`;

  const intervals = await fence.fence(wanted);
  try {
    await fence.waitForInsertsInFlight();

    // The copy ordered by user: rows are copied whole, so a missing one is missing by key.
    for (const [chunk, keys] of keyChunks.entries()) {
      const present = await rows<{ event_key: string }>(
        `SELECT DISTINCT event_key FROM usage_events_by_user WHERE ${range} AND event_key IN (${keys})`,
      );
      const there = new Set(present.map((row) => sqlString(row.event_key)));
      const missing = literalChunks[chunk]!.filter((literal) => !there.has(literal));
      if (missing.length === 0) continue;
      const [counted] = await rows<{ n: string }>(`SELECT count() AS n FROM usage_events WHERE event_key IN (${missing.join(',')})`);
      if (Number(counted!.n) === 0) continue;
      await clickhouse.command({
        query: `INSERT INTO usage_events_by_user SELECT ${BY_USER_COLUMNS} FROM usage_events WHERE event_key IN (${missing.join(',')}) LIMIT 1 BY event_key`,
        clickhouse_settings: LONG_QUERY,
      });
      outcome.copied += Number(counted!.n);
    }

    // The day rollups a job builds (day-levels.ts) are left to it: it builds their days
    // from the hours recounted here (a built day was marked by the unit before its insert).
    const jobBuilt = (await readDayState(clickhouse, 0, 0)).jobBuilt ? JOB_BUILT_VIEWS : new Set<string>();
    for (const view of aggregateViews().filter(({ view }) => !jobBuilt.has(view))) {
      outcome.tables.push(await recountView(clickhouse, view, keyChunks, range, options));
    }
  } finally {
    await fence.liftFence(intervals);
  }
  return outcome;
}

/**
 * The groups of one aggregating view that given records fall in, noted from usage_events
 * while it holds them: compared (records usage_events holds against records the rollup
 * counts) and rebuilt from usage_events group by group. Used by the recount below and by
 * record removal (removal.ts), which notes the groups before deleting the records.
 */
export class RollupGroups {
  readonly groups = new Map<string, Group>();

  private constructor(
    private readonly clickhouse: ClickHouseClient,
    readonly view: AggregateView,
  ) {}

  /** The view's groups of the records of `keyChunks` (event key literals, comma-joined), with how many each holds. */
  static async note(clickhouse: ClickHouseClient, view: AggregateView, keyChunks: readonly string[]): Promise<RollupGroups> {
    const noted = new RollupGroups(clickhouse, view);
    for (const [chunk, keys] of keyChunks.entries()) {
      const found = await rowsOf(clickhouse)<Record<string, string>>(
        `SELECT ${noted.read(noted.expressions)}, count() AS k FROM usage_events WHERE ${noted.where(`event_key IN (${keys})`)} GROUP BY ${noted.aliases}`,
      );
      for (const row of found) {
        const id = noted.idOf(row);
        const group = noted.groups.get(id) ?? {
          values: view.groups.map((_, index) => String(row[`g${index}`])),
          records: 0,
          chunks: new Set(),
        };
        group.records += Number(row.k);
        group.chunks.add(chunk);
        noted.groups.set(id, group);
      }
    }
    return noted;
  }

  private where(condition: string): string {
    return [this.view.where, condition]
      .filter(Boolean)
      .map((part) => `(${part})`)
      .join(' AND ');
  }

  // The group's values as the comparison reads them: the time bucket as epoch seconds, the
  // others as text (a histogram's bucket is a number) in hex (an error message cut at 200
  // bytes may end inside a UTF-8 character); matched as text too.
  private read(expressions: readonly string[]): string {
    return expressions
      .map((expression, index) => (index === 0 ? `toUInt32(${expression}) AS g0` : `hex(${expression}) AS g${index}`))
      .join(', ');
  }

  private get aliases(): string {
    return this.view.groups.map((_, index) => `g${index}`).join(', ');
  }

  private static asText(expression: string, index: number): string {
    return index === 0 ? expression : `toString(${expression})`;
  }

  get expressions(): string[] {
    return this.view.groups.map((group, index) => RollupGroups.asText(group.expression, index));
  }

  private get columns(): string[] {
    return this.view.groups.map((group, index) => RollupGroups.asText(group.name, index));
  }

  private idOf(row: Record<string, unknown>): string {
    return this.view.groups.map((_, index) => String(row[`g${index}`])).join('\u0000');
  }

  /** The groups of `ids` as a list of tuples of the view's group expressions. */
  tuples(ids: readonly string[]): string {
    return ids
      .map(
        (id) =>
          `(${this.groups
            .get(id)!
            .values.map((value, index) => (index === 0 ? `toDateTime(${Number(value)})` : `unhex(${sqlString(value)})`))
            .join(', ')})`,
      )
      .join(', ');
  }

  /** Records usage_events holds (within `range`) and the rollup counts, per group. */
  async compare(ids: readonly string[], range: string): Promise<{ stored: Map<string, number>; counted: Map<string, number> }> {
    const rows = rowsOf(this.clickhouse);
    const stored = new Map<string, number>();
    const counted = new Map<string, number>();
    for (const part of chunked(ids, GROUPS_PER_QUERY)) {
      const tuples = this.tuples(part);
      const raw = await rows<Record<string, string>>(
        `SELECT ${this.read(this.expressions)}, count() AS n FROM usage_events WHERE ${this.where(`${range} AND (${this.expressions.join(', ')}) IN (${tuples})`)} GROUP BY ${this.aliases}`,
      );
      for (const row of raw) stored.set(this.idOf(row), Number(row.n));
      const rollup = await rows<Record<string, string>>(
        `SELECT ${this.read(this.columns)}, ${this.view.count.merge}(${this.view.count.column}) AS n FROM ${this.view.table} WHERE (${this.columns.join(', ')}) IN (${tuples}) GROUP BY ${this.aliases}`,
      );
      for (const row of rollup) counted.set(this.idOf(row), Number(row.n));
    }
    return { stored, counted };
  }

  /** The groups' rows deleted and rebuilt from what usage_events holds within `range`. */
  async rebuild(ids: readonly string[], range: string, options: Pick<RecountOptions, 'mutationTimeoutMs' | 'cluster'>): Promise<void> {
    for (const part of chunked(ids, GROUPS_PER_QUERY)) {
      const tuples = this.tuples(part);
      await mutate(
        this.clickhouse,
        this.view.table,
        `DELETE WHERE (${this.columns.join(', ')}) IN (${tuples})`,
        options.mutationTimeoutMs,
        options.cluster,
      );
      await this.clickhouse.command({
        query: rebuildRollupSql(this.view.view, `${range} AND (${this.expressions.join(', ')}) IN (${tuples})`),
        clickhouse_settings: LONG_QUERY,
      });
    }
  }

  /** Throws when a group of `ids` still differs between usage_events and the rollup. */
  async verify(ids: readonly string[], range: string, after: string): Promise<void> {
    if (ids.length === 0) return;
    const { stored, counted } = await this.compare(ids, range);
    const left = ids.filter((id) => (stored.get(id) ?? 0) !== (counted.get(id) ?? 0));
    if (left.length > 0) throw new Error(`${this.view.table}: ${left.length} groups still differ from usage_events after ${after}`);
  }
}

async function recountView(
  clickhouse: ClickHouseClient,
  view: AggregateView,
  keyChunks: readonly string[],
  range: string,
  options: RecountOptions,
): Promise<TableRecount> {
  const noted = await RollupGroups.note(clickhouse, view, keyChunks);
  const { groups } = noted;
  const ids = [...groups.keys()];
  const { stored, counted } = await noted.compare(ids, range);
  const append: string[] = [];
  const rebuild: string[] = [];
  for (const id of ids) {
    const shortBy = (stored.get(id) ?? 0) - (counted.get(id) ?? 0);
    if (shortBy === 0) continue;
    if (shortBy === groups.get(id)!.records) append.push(id);
    else rebuild.push(id);
  }

  // Short by exactly the records: the view's SELECT over them, key chunk by key chunk.
  for (const [chunk, keys] of keyChunks.entries()) {
    const inChunk = append.filter((id) => groups.get(id)!.chunks.has(chunk));
    for (const part of chunked(inChunk, GROUPS_PER_QUERY)) {
      await clickhouse.command({
        query: rebuildRollupSql(view.view, `event_key IN (${keys}) AND (${noted.expressions.join(', ')}) IN (${noted.tuples(part)})`),
        clickhouse_settings: LONG_QUERY,
      });
    }
  }
  // Any other difference: the group's rows deleted and rebuilt from what usage_events holds.
  await noted.rebuild(rebuild, range, options);
  await noted.verify([...append, ...rebuild], range, 'the recount');
  return { table: view.table, groups: groups.size, appended: append.length, rebuilt: rebuild.length };
}

/** Waits until none of the queries is running on the server (polled in system.processes). */
async function waitUntilFinished(clickhouse: ClickHouseClient, queryIds: readonly string[], timeoutMs: number): Promise<void> {
  if (queryIds.length === 0) return;
  const list = queryIds.map(sqlString).join(',');
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await clickhouse.query({
      query: `SELECT count() AS n FROM system.processes WHERE query_id IN (${list})`,
      format: 'JSONEachRow',
    });
    const [running] = await result.json<{ n: string }>();
    if (Number(running!.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`${running!.n} unanswered inserts still running on the server`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/**
 * Every rollup's count beside the records usage_events holds for it (each event key
 * once, under the view's own condition), and usage_events_by_user's rows beside
 * usage_events': a stored record the rollups do not count, or count twice, shows as a
 * difference. The chaos suite compares them before and after each scenario.
 */
export async function rollupTotals(clickhouse: ClickHouseClient): Promise<{ table: string; stored: number; counted: number }[]> {
  const one = async (query: string) => {
    const result = await clickhouse.query({ query, format: 'JSONEachRow' });
    const [row] = await result.json<{ n: string }>();
    return Number(row?.n ?? 0);
  };
  const totals: { table: string; stored: number; counted: number }[] = [];
  // The day rollups a job builds (day-levels.ts) hold the days it has built: compared over those.
  const days = await readDayState(clickhouse, 0, 2 ** 32 - 1);
  const dayOf = 'toUInt32(intDiv(toUInt32(event_time), 86400) * 86400)';
  let built: number[] = [];
  if (days.jobBuilt) {
    const result = await clickhouse.query({ query: `SELECT DISTINCT ${dayOf} AS day FROM usage_events`, format: 'JSONEachRow' });
    built = (await result.json<{ day: string | number }>()).map((row) => Number(row.day)).filter((day) => days.built(day));
  }
  for (const view of aggregateViews()) {
    const inBuilt = days.jobBuilt && JOB_BUILT_VIEWS.has(view.view);
    const storedWhere = [view.where, inBuilt ? `${dayOf} IN (${built.join(',') || 'NULL'})` : undefined].filter(Boolean).join(' AND ');
    totals.push({
      table: view.table,
      stored: await one(`SELECT uniqExact(event_key) AS n FROM usage_events${storedWhere ? ` WHERE ${storedWhere}` : ''}`),
      counted: await one(
        `SELECT ${view.count.merge}(${view.count.column}) AS n FROM ${view.table}${inBuilt ? ` WHERE toUInt32(day) IN (${built.join(',') || 'NULL'})` : ''}`,
      ),
    });
  }
  totals.push({
    table: 'usage_events_by_user',
    stored: await one('SELECT uniqExact(event_key) AS n FROM usage_events'),
    counted: await one('SELECT count() AS n FROM usage_events_by_user'),
  });
  return totals;
}
