// The backfill of migration 0008's tables (the rollups by minute, hour and day, per key
// and per user, and usage_events_by_user) from the records stored before their views
// existed. A month at a time (usage_events is ordered by event key, so any range of
// time reads its whole month partition: one pass per month, not one per day), with the
// current UTC day apart: the range is fenced (erasures.ts: an ingester holding a record
// of it waits; today's records wait only while today is copied), the rows the views
// already added for it are deleted, the whole range is copied from usage_events FINAL
// through each view's own SELECT, the fence is lifted, and its days are recorded in
// rollup_backfill_days. A day recorded is not copied again, so a run that stops (a
// crash, a restart) resumes where it was; a range copied twice still counts once (its
// rows are deleted before it is copied). Once every day is done, rollup_backfill_done
// gets its row and the analytics API reads the new tables (rollup-plan.ts).
import type { ClickHouseClient } from './clickhouse.js';
import type { ErasureStore, FenceInterval } from './erasures.js';
import { mutate } from './mutations.js';
import { BY_USER_COLUMNS, SCALED_ROLLUPS, rebuildRollupSql } from './rollup-views.js';
import { formatDateTime } from './clickhouse-values.js';

const DAY_S = 86_400;

export interface BackfillOptions {
  mutationTimeoutMs?: number;
  cluster?: string;
  log?: (line: string) => void;
}

export interface BackfillOutcome {
  /** Days copied by this run. */
  days: number;
  /** Records of those days. */
  rows: number;
  /** Whether every day is done now. */
  done: boolean;
}

async function rows<T>(clickhouse: ClickHouseClient, query: string): Promise<T[]> {
  return (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
}

export async function isBackfilled(clickhouse: ClickHouseClient): Promise<boolean> {
  const [row] = await rows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM rollup_backfill_done');
  return Number(row?.n ?? 0) > 0;
}

/**
 * Records the backfill as done when usage_events is empty: called after the migrations
 * (the views exist), no record can be older than the views, so there is nothing to
 * copy. A new installation never runs the backfill.
 */
export async function markBackfilledIfEmpty(clickhouse: ClickHouseClient): Promise<boolean> {
  if (await isBackfilled(clickhouse)) return true;
  const [row] = await rows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events');
  if (Number(row?.n ?? 0) > 0) return false;
  await clickhouse.insert({ table: 'rollup_backfill_done', format: 'JSONEachRow', values: [{ done_at: formatDateTime(Date.now()) }] });
  return true;
}

export async function backfillRollups(
  clickhouse: ClickHouseClient,
  fence: Pick<ErasureStore, 'fence' | 'liftFence' | 'waitForInsertsInFlight'>,
  options: BackfillOptions = {},
): Promise<BackfillOutcome> {
  const log = options.log ?? (() => {});
  if (await isBackfilled(clickhouse)) return { days: 0, rows: 0, done: true };
  const stored = (
    await rows<{ day: string }>(
      clickhouse,
      'SELECT DISTINCT toString(intDiv(toUInt32(event_time), 86400)) AS day FROM usage_events ORDER BY toUInt32(day)',
    )
  ).map((row) => Number(row.day));
  const recorded = new Set(
    (await rows<{ day: string }>(clickhouse, 'SELECT toString(toUInt32(day)) AS day FROM rollup_backfill_days FINAL')).map((row) =>
      Number(row.day),
    ),
  );
  const todo = stored.filter((day) => !recorded.has(day));
  const today = Math.floor(Date.now() / 1000 / DAY_S);
  // The ranges: the days to do grouped by month, today on its own.
  const groups = new Map<string, number[]>();
  for (const day of todo) {
    const key = day >= today ? 'today' : new Date(day * DAY_S * 1000).toISOString().slice(0, 7);
    groups.set(key, [...(groups.get(key) ?? []), day]);
  }
  log(`rollup backfill: ${todo.length} of ${stored.length} days of usage_events to copy, in ${groups.size} ranges`);
  let copied = 0;
  let days = 0;
  for (const group of groups.values()) {
    const fromS = group[0]! * DAY_S;
    const toS = (group[group.length - 1]! + 1) * DAY_S;
    const wanted: FenceInterval = { kind: 'all', fromMs: fromS * 1000, toMs: toS * 1000 };
    const range = (column: string) => `${column} >= toDateTime(${fromS}) AND ${column} < toDateTime(${toS})`;
    const started = Date.now();
    const held = await fence.fence([wanted]);
    let perDay: { day: string; n: string }[] = [];
    try {
      await fence.waitForInsertsInFlight();
      // What the views added for the range since migration 0008 goes: the copy counts all of it.
      for (const table of [
        ...SCALED_ROLLUPS.map(({ table, time }) => ({ table, time })),
        { table: 'usage_events_by_user', time: 'event_time' },
      ]) {
        const [present] = await rows<{ n: string }>(clickhouse, `SELECT count() AS n FROM ${table.table} WHERE ${range(table.time)}`);
        if (Number(present?.n ?? 0) > 0) {
          await mutate(clickhouse, table.table, `DELETE WHERE ${range(table.time)}`, options.mutationTimeoutMs, options.cluster);
        }
      }
      for (const { view } of SCALED_ROLLUPS) {
        await clickhouse.command({ query: rebuildRollupSql(view, range('event_time'), true) });
      }
      await clickhouse.command({
        query: `INSERT INTO usage_events_by_user (${BY_USER_COLUMNS}) SELECT ${BY_USER_COLUMNS} FROM usage_events FINAL WHERE ${range('event_time')}`,
      });
      perDay = await rows<{ day: string; n: string }>(
        clickhouse,
        `SELECT toString(intDiv(toUInt32(event_time), 86400)) AS day, count() AS n FROM usage_events FINAL WHERE ${range('event_time')} GROUP BY day`,
      );
    } finally {
      await fence.liftFence(held);
    }
    const counts = new Map(perDay.map((row) => [Number(row.day), Number(row.n)]));
    const doneAt = formatDateTime(Date.now());
    const dayRows = group.map((day) => ({
      day: new Date(day * DAY_S * 1000).toISOString().slice(0, 10),
      rows: counts.get(day) ?? 0,
      done_at: doneAt,
    }));
    await clickhouse.insert({ table: 'rollup_backfill_days', format: 'JSONEachRow', values: dayRows });
    const count = dayRows.reduce((sum, row) => sum + row.rows, 0);
    copied += count;
    days += group.length;
    log(
      `rollup backfill: ${dayRows[0]!.day}..${dayRows[dayRows.length - 1]!.day} copied (${count} records, ${((Date.now() - started) / 1000).toFixed(1)} s); ${days} of ${todo.length} days`,
    );
  }
  await clickhouse.insert({ table: 'rollup_backfill_done', format: 'JSONEachRow', values: [{ done_at: formatDateTime(Date.now()) }] });
  log(`rollup backfill: done (${days} days, ${copied} records); analytics read the new rollups`);
  return { days, rows: copied, done: true };
}
