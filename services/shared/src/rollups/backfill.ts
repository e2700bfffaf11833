// The backfill of the rollups of migrations 0008 to 0011 (the rollups by minute, hour
// and day, per key and per user, usage_events_by_user, and the latency totals) from the
// records stored before their views existed. Each migration is a generation of its own
// with its own record of progress, so that an installation that finished 0008's copies
// only 0009's tables. A month at a time (usage_events is ordered by event key, so any
// range of time reads its whole month partition: one pass per month, not one per day),
// with the current UTC day apart: the range is fenced (fence.ts: an ingester holding
// a record of it waits; today's records wait only while today is copied), the rows the
// views already added for it to the tables of the generations not done with those days
// are deleted, the whole range is copied from usage_events FINAL through each view's own
// SELECT, the fence is lifted, and its days are recorded in each generation's days table.
// A day recorded is not copied again, so a run that stops (a crash, a restart) resumes
// where it was; a range copied twice still counts once (its rows are deleted before it
// is copied). Once every day of a generation is done, its done table gets its row and the
// analytics API reads its tables (rollup-plan.ts). Once 0008's is, the view of the
// rollup the API read before it (usage_rollup_minute) is dropped: retireLegacyRollup.
import type { ClickHouseClient } from '../clickhouse.js';
import type { RollupFence, FenceInterval } from './fence.js';
import { mutate } from '../mutations.js';
import { BY_USER_COLUMNS, LEGACY_ROLLUP_VIEW, SCALED_ROLLUPS, rebuildRollupSql, type RollupMigration } from './views.js';
import { formatDateTime } from '../clickhouse-values.js';
import { UNKNOWN_TABLE, clickhouseErrorCode } from '../clickhouse-errors.js';
import { onCluster } from '../cluster-ddl.js';

const DAY_S = 86_400;

export interface BackfillOptions {
  mutationTimeoutMs?: number;
  cluster?: string;
  /** Whether to drop the legacy minute rollup's view once 0008 is done (a user with DDL rights); true by default. */
  retireLegacy?: boolean;
  log?: (line: string) => void;
}

export interface BackfillOutcome {
  /** Days copied by this run. */
  days: number;
  /** Records of those days. */
  rows: number;
  /** Whether every generation is done now (false while a migration has not run yet). */
  done: boolean;
}

async function rows<T>(clickhouse: ClickHouseClient, query: string): Promise<T[]> {
  return (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
}

/** Each generation's record of progress: the days copied, and a row once all are. */
export const BACKFILL_GENERATIONS: readonly { migration: RollupMigration; days: string; done: string }[] = [
  { migration: '0008', days: 'rollup_backfill_days', done: 'rollup_backfill_done' },
  { migration: '0009', days: 'rollup_backfill_0009_days', done: 'rollup_backfill_0009_done' },
  { migration: '0010', days: 'rollup_backfill_0010_days', done: 'rollup_backfill_0010_done' },
  { migration: '0011', days: 'rollup_backfill_0011_days', done: 'rollup_backfill_0011_done' },
];

/** The tables a generation fills: its rollups, and for 0008 the copy ordered by user. */
function tablesOf(migration: RollupMigration): { table: string; time: string }[] {
  const rollups = SCALED_ROLLUPS.filter((rollup) => rollup.migration === migration).map(({ table, time }) => ({ table, time }));
  return migration === '0008' ? [...rollups, { table: 'usage_events_by_user', time: 'event_time' }] : rollups;
}

/** Where each generation stands: done, pending, or absent (its migration has not run yet). */
async function generationStates(clickhouse: ClickHouseClient): Promise<Map<RollupMigration, 'done' | 'pending' | 'absent'>> {
  const states = new Map<RollupMigration, 'done' | 'pending' | 'absent'>();
  for (const generation of BACKFILL_GENERATIONS) {
    try {
      const [row] = await rows<{ n: string }>(clickhouse, `SELECT count() AS n FROM ${generation.done}`);
      states.set(generation.migration, Number(row?.n ?? 0) > 0 ? 'done' : 'pending');
    } catch (error) {
      if (clickhouseErrorCode(error) !== UNKNOWN_TABLE) throw error;
      states.set(generation.migration, 'absent');
    }
  }
  return states;
}

/** The generations whose backfill has finished. A ClickHouse failure is thrown. */
export async function backfilledMigrations(clickhouse: ClickHouseClient): Promise<Set<RollupMigration>> {
  const states = await generationStates(clickhouse);
  return new Set(BACKFILL_GENERATIONS.map(({ migration }) => migration).filter((migration) => states.get(migration) === 'done'));
}

/** Whether the backfill of migration 0008 (the rollups and the copy ordered by user) has finished. */
export async function isBackfilled(clickhouse: ClickHouseClient): Promise<boolean> {
  return (await backfilledMigrations(clickhouse)).has('0008');
}

/** Whether every generation's backfill has finished. */
export async function isFullyBackfilled(clickhouse: ClickHouseClient): Promise<boolean> {
  return (await backfilledMigrations(clickhouse)).size === BACKFILL_GENERATIONS.length;
}

/**
 * The view that fills usage_rollup_minute (migration 0002, every dimension with the user
 * and the key: about a row per record, with quantile states) was the costliest step of
 * every insert: on 18.16 it took 28 % of ClickHouse's CPU per record with all the views
 * (docs/ingester.md, "The tables"). The analytics API reads that table only until the
 * backfill of migration 0008 has finished (rollup-plan.ts), so from then on nothing
 * needs it filled: its view is dropped. The table stays, as it was (erasure still deletes
 * a user's rows from it; retention drops its old partitions). Idempotent. It needs DDL
 * rights: a service started with MIGRATE_ON_START=false leaves it to npm run migrate.
 */
export async function retireLegacyRollup(clickhouse: ClickHouseClient, cluster = ''): Promise<void> {
  await clickhouse.command({ query: `DROP TABLE IF EXISTS ${LEGACY_ROLLUP_VIEW}${onCluster(cluster)}` });
}

/**
 * Records every backfill as done when usage_events is empty: called after the
 * migrations (the views exist), no record can be older than the views, so there is
 * nothing to copy. A new installation never runs the backfill. Once 0008's backfill is
 * done (now or before), its legacy view is retired.
 */
export async function markBackfilledIfEmpty(clickhouse: ClickHouseClient, cluster = '', retireLegacy = true): Promise<boolean> {
  const states = await generationStates(clickhouse);
  const pending = BACKFILL_GENERATIONS.filter(({ migration }) => states.get(migration) === 'pending');
  const empty =
    pending.length > 0 && Number((await rows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events'))[0]?.n ?? 0) === 0;
  if (empty) {
    for (const generation of pending) {
      await clickhouse.insert({ table: generation.done, format: 'JSONEachRow', values: [{ done_at: formatDateTime(Date.now()) }] });
    }
  }
  const done = (migration: RollupMigration) => states.get(migration) === 'done' || (empty && states.get(migration) === 'pending');
  if (retireLegacy && done('0008')) await retireLegacyRollup(clickhouse, cluster);
  return pending.length === 0 ? [...states.values()].every((state) => state === 'done') : empty;
}

export async function backfillRollups(
  clickhouse: ClickHouseClient,
  fence: Pick<RollupFence, 'fence' | 'liftFence' | 'waitForInsertsInFlight'>,
  options: BackfillOptions = {},
): Promise<BackfillOutcome> {
  const log = options.log ?? (() => {});
  // The generations whose tables exist and are not done (an ingester that knows only the
  // migrations up to 0008 backfills 0008's alone).
  const states = await generationStates(clickhouse);
  const pending = BACKFILL_GENERATIONS.filter(({ migration }) => states.get(migration) === 'pending');
  const absent = BACKFILL_GENERATIONS.some(({ migration }) => states.get(migration) === 'absent');
  const retire = async () => {
    if (options.retireLegacy === false) return;
    await retireLegacyRollup(clickhouse, options.cluster).catch((error: Error) =>
      log(`rollup backfill: the legacy minute rollup's view stays (${error.message.slice(0, 200)}); npm run migrate drops it`),
    );
  };
  if (pending.length === 0) {
    if (states.get('0008') === 'done') await retire();
    return { days: 0, rows: 0, done: !absent };
  }
  const stored = (
    await rows<{ day: string }>(
      clickhouse,
      'SELECT DISTINCT toString(intDiv(toUInt32(event_time), 86400)) AS day FROM usage_events ORDER BY toUInt32(day)',
    )
  ).map((row) => Number(row.day));
  // The days each pending generation has recorded.
  const recorded = new Map<RollupMigration, Set<number>>();
  for (const generation of pending) {
    const days = await rows<{ day: string }>(clickhouse, `SELECT toString(toUInt32(day)) AS day FROM ${generation.days} FINAL`);
    recorded.set(generation.migration, new Set(days.map((row) => Number(row.day))));
  }
  const today = Math.floor(Date.now() / 1000 / DAY_S);
  // The ranges: the days to do grouped by month (today on its own) and by the generations lacking them.
  const groups = new Map<string, { days: number[]; generations: typeof pending }>();
  for (const day of stored) {
    const lacking = pending.filter(({ migration }) => !recorded.get(migration)!.has(day));
    if (lacking.length === 0) continue;
    const month = day >= today ? 'today' : new Date(day * DAY_S * 1000).toISOString().slice(0, 7);
    const key = `${month} ${lacking.map(({ migration }) => migration).join(',')}`;
    const group = groups.get(key) ?? { days: [], generations: lacking };
    group.days.push(day);
    groups.set(key, group);
  }
  const todo = [...groups.values()].reduce((sum, group) => sum + group.days.length, 0);
  log(
    `rollup backfill (migrations ${pending.map(({ migration }) => migration).join(', ')}): ${todo} of ${stored.length} days of usage_events to copy, in ${groups.size} ranges`,
  );
  let copied = 0;
  let days = 0;
  for (const { days: group, generations } of groups.values()) {
    const fromS = group[0]! * DAY_S;
    const toS = (group[group.length - 1]! + 1) * DAY_S;
    const wanted: FenceInterval = { kind: 'all', fromMs: fromS * 1000, toMs: toS * 1000 };
    const range = (column: string) => `${column} >= toDateTime(${fromS}) AND ${column} < toDateTime(${toS})`;
    const migrations = new Set(generations.map(({ migration }) => migration));
    const started = Date.now();
    const held = await fence.fence([wanted]);
    let perDay: { day: string; n: string }[] = [];
    try {
      await fence.waitForInsertsInFlight();
      // What the views added for the range since the migration goes: the copy counts all of it.
      for (const table of generations.flatMap(({ migration }) => tablesOf(migration))) {
        const [present] = await rows<{ n: string }>(clickhouse, `SELECT count() AS n FROM ${table.table} WHERE ${range(table.time)}`);
        if (Number(present?.n ?? 0) > 0) {
          await mutate(clickhouse, table.table, `DELETE WHERE ${range(table.time)}`, options.mutationTimeoutMs, options.cluster);
        }
      }
      for (const { view } of SCALED_ROLLUPS.filter(({ migration }) => migrations.has(migration))) {
        await clickhouse.command({ query: rebuildRollupSql(view, range('event_time'), true) });
      }
      if (migrations.has('0008')) {
        await clickhouse.command({
          query: `INSERT INTO usage_events_by_user (${BY_USER_COLUMNS}) SELECT ${BY_USER_COLUMNS} FROM usage_events FINAL WHERE ${range('event_time')}`,
        });
      }
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
    for (const generation of generations) {
      await clickhouse.insert({ table: generation.days, format: 'JSONEachRow', values: dayRows });
    }
    const count = dayRows.reduce((sum, row) => sum + row.rows, 0);
    copied += count;
    days += group.length;
    log(
      `rollup backfill: ${dayRows[0]!.day}..${dayRows[dayRows.length - 1]!.day} copied for ${[...migrations].join(', ')} (${count} records, ${((Date.now() - started) / 1000).toFixed(1)} s); ${days} of ${todo} days`,
    );
  }
  for (const generation of pending) {
    await clickhouse.insert({ table: generation.done, format: 'JSONEachRow', values: [{ done_at: formatDateTime(Date.now()) }] });
  }
  await retire();
  log(`rollup backfill: done (${days} days, ${copied} records); analytics read the new rollups`);
  return { days, rows: copied, done: !absent };
}
