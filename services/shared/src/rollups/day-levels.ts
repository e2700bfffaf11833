// The day rollups built by a job (migration 0014, docs/analytics-api.md, "Days built
// from the hours"). The inserts fill the minute and hour rollups through their views;
// once a UTC day is over, the job merges its hours into the ten day rollups. Every
// answer stays exact at every instant: the analytics API reads a day from the day
// rollups only while the day is built and unchanged since, and its hours otherwise.
//
// What keeps that true, in rollup_day_levels:
//
//   the watermark  every day before it has been handed to the job (none at first: the
//                  job builds every day the hours hold, the oldest first). The job raises it
//                  (in ClickHouse, then Redis) before it builds a day; an ingester reads
//                  it with its erasure lease (fence.ts), in the same Redis pipeline.
//   marks          a unit holding a record of a day before the watermark marks the day
//                  before its insert; a job that rebuilt rollup rows marks their days
//                  when it lifts its fence.
//   builds         the job counts a day's marks, then waits for every insert lease that
//                  exists (fence.ts), deletes what the day rollups hold of the day, merges
//                  its hours into them, and records the build with the marks it counted.
//
// A day is built while it has no more marks than its newest build counted. A unit that
// read the watermark before the job raised it held a lease the job waited for, so its
// rows are in the hours the job merged; one that read it after marked the day, and its
// mark either came before the job counted (and its lease was waited for) or after (and
// the day reads as changed until the job builds it again). A job that failed halfway
// recorded no build: the next run deletes and builds the day again. A day changed
// without a mark (an ingester of the version before 0014, during an upgrade) is found at
// the next run: its requests and tokens no longer equal its hours' (driftedDays); so is a
// per-user week that no longer equals its days (driftedWeeks: two builders at once, each
// summing it, under Redis prefixes of their own).
import type { ClickHouseClient } from '../clickhouse.js';
import { UNKNOWN_TABLE, clickhouseErrorCode } from '../clickhouse-errors.js';
import { mutate } from '../mutations.js';
import type { DayLevelsLedger } from './fence.js';
import { JOB_BUILT_DAY_ROLLUPS, USAGE_MEASURES, derivedRangeSql, rollupsFinestFirst } from './views.js';
import { weekEndS, weekStartS } from './weeks.js';

export const DAY_LEVELS_TABLE = 'rollup_day_levels';

/** The Redis key (after the prefix) of the lock one builder holds at a time: two would each merge a day's hours into it. */
export const DAY_BUILD_LOCK = 'rollup-day-build-lock';
const DAY_S = 86_400;
const DAY_MS = DAY_S * 1000;
/** The hours the days are merged from; its first hour is the first day owed. */
const HOURS = 'usage_rollup_by_hour';
/** The day rollup checked against those hours at every run (driftedDays). */
const DAYS = 'usage_rollup_by_day';
/** The per-user days, a view's (migration 0008), and the weeks the job sums them into (migration 0015, weeks.ts). */
const USER_DAYS = 'usage_rollup_user_by_day';
export const USER_WEEKS = 'usage_rollup_user_by_week';
/** The marks of the days of the week starting at `weekS`. */
function weekMarks(marks: ReadonlyMap<number, number>, weekS: number): number {
  let n = 0;
  for (let day = weekS; day < weekEndS(weekS); day += DAY_S) n += marks.get(day) ?? 0;
  return n;
}
/** The last second a UInt32 day holds. */
const LAST_DAY_S = 2 ** 32 - 1;

/** The start of the UTC day of an instant, in epoch milliseconds. */
export const dayStartMs = (ms: number) => Math.floor(ms / DAY_MS) * DAY_MS;

export interface DayState {
  /** Whether migration 0014 has run: before it, views fill the day rollups and every day is whole. */
  jobBuilt: boolean;
  /** Every day before it (epoch seconds) has been handed to the job; 0 before its first. */
  watermarkS: number;
  /** Whether the day rollups hold the whole of the UTC day starting at `dayS` (epoch seconds). */
  built(dayS: number): boolean;
  /**
   * Whether usage_rollup_user_by_week holds the whole of the week starting at `weekS`
   * (weeks.ts): built, and its days unchanged since. The range read must cover the week.
   */
  weekBuilt(weekS: number): boolean;
  /** The days of the range read that have marks. */
  marked: number[];
}

const BEFORE_0014: DayState = { jobBuilt: false, watermarkS: Infinity, built: () => true, weekBuilt: () => false, marked: [] };

interface StateRow {
  kind: string;
  day_s: string | number;
  n: string | number;
  m: string | number;
}

async function rows<T>(clickhouse: ClickHouseClient, query: string): Promise<T[]> {
  return (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
}

/** The state of the days in [fromS, toS) (epoch seconds), in one query: the watermark, and the marks and builds of those days. */
export async function readDayState(clickhouse: ClickHouseClient, fromS: number, toS: number): Promise<DayState> {
  let found: StateRow[];
  try {
    found = await rows<StateRow>(
      clickhouse,
      `SELECT 'watermark' AS kind, max(day_s) AS day_s, toUInt64(count()) AS n, toUInt64(0) AS m FROM ${DAY_LEVELS_TABLE} WHERE kind = 'watermark'
       UNION ALL
       SELECT kind, day_s, toUInt64(count()) AS n, max(marks) AS m FROM ${DAY_LEVELS_TABLE}
       WHERE kind IN ('mark', 'build', 'week') AND day_s >= ${Math.max(0, Math.floor(fromS))} AND day_s < ${Math.min(LAST_DAY_S, Math.ceil(toS))}
       GROUP BY kind, day_s`,
    );
  } catch (error) {
    if (clickhouseErrorCode(error) !== UNKNOWN_TABLE) throw error;
    return BEFORE_0014;
  }
  const watermarkS = Number(found.find((row) => row.kind === 'watermark')?.day_s ?? 0);
  const marks = new Map<number, number>();
  const builds = new Map<number, number>();
  const weeks = new Map<number, number>();
  for (const row of found) {
    if (row.kind === 'mark') marks.set(Number(row.day_s), Number(row.n));
    else if (row.kind === 'build') builds.set(Number(row.day_s), Number(row.m));
    else if (row.kind === 'week') weeks.set(Number(row.day_s), Number(row.m));
  }
  return {
    jobBuilt: true,
    watermarkS,
    marked: [...marks.keys()].sort((a, b) => a - b),
    built(dayS) {
      const seen = builds.get(dayS);
      return dayS < watermarkS && seen !== undefined && (marks.get(dayS) ?? 0) <= seen;
    },
    weekBuilt(weekS) {
      const seen = weeks.get(weekS);
      return seen !== undefined && weekEndS(weekS) <= watermarkS && weekMarks(marks, weekS) <= seen;
    },
  };
}

/** The days handed to the job, as the ingester reads them when Redis does not hold them. */
export async function readDayWatermarkMs(clickhouse: ClickHouseClient): Promise<number> {
  const state = await readDayState(clickhouse, 0, 0);
  return state.jobBuilt ? state.watermarkS * 1000 : 0;
}

/** Marks days (epoch ms, any instant of each) whose rollup rows changed after they were handed to the job. */
export async function markDays(clickhouse: ClickHouseClient, instantsMs: Iterable<number>): Promise<void> {
  const days = [...new Set([...instantsMs].map((ms) => dayStartMs(ms) / 1000))];
  if (days.length === 0) return;
  const at = Date.now();
  await clickhouse
    .insert({
      table: DAY_LEVELS_TABLE,
      values: days.map((day) => ({ kind: 'mark', day_s: day, marks: 0, at_ms: at })),
      format: 'JSONEachRow',
    })
    .catch((error: unknown) => {
      // Before migration 0014 views fill the day rollups: nothing to mark.
      if (clickhouseErrorCode(error) !== UNKNOWN_TABLE) throw error;
    });
}

/** The fence's view of the day rollups (fence.ts): marks, and the watermark as ClickHouse holds it. */
export function dayLevelsLedger(clickhouse: ClickHouseClient): DayLevelsLedger {
  return {
    markDays: (instantsMs) => markDays(clickhouse, instantsMs),
    watermarkMs: () => readDayWatermarkMs(clickhouse),
  };
}

/** What the job needs of the erasure fence (fence.ts): the watermark's copy in Redis, and the leases. */
export interface DayBuildFence {
  setDayWatermark(watermarkMs: number): Promise<void>;
  waitForInsertsInFlight(pollMs?: number): Promise<void>;
}

export interface DayBuildOptions {
  /** Now, in epoch ms (tests). */
  nowMs?: number;
  /** How long after its end a day is built: records of it that arrive later mark it (ROLLUP_DAY_BUILD_DELAY_MS). */
  delayMs: number;
  /** Days built in one run at most, the oldest first. */
  maxDays?: number;
  /** Per-user weeks built in one run at most, the oldest first. */
  maxWeeks?: number;
  mutationTimeoutMs?: number;
  cluster?: string;
  log?: (line: string) => void;
}

export interface DayBuildOutcome {
  /** The days built by this run (epoch seconds). */
  built: number[];
  /** The per-user weeks built by this run (their first days, epoch seconds). */
  weeks: number[];
  /** The watermark after it (epoch seconds); 0 before migration 0014. */
  watermarkS: number;
}

const isoDay = (dayS: number) => new Date(dayS * 1000).toISOString().slice(0, 10);

/** `<column> < <the watermark>`: the rows of the days handed to the job. */
const beforeWatermark = (column: string, watermarkS: number) => `${column} < toDateTime(${Math.min(LAST_DAY_S, watermarkS)})`;

/**
 * The days before the watermark (epoch seconds) whose requests or tokens in
 * usage_rollup_by_day differ from the sum of their hours in usage_rollup_by_hour, in one
 * query over both tables (the smallest of their levels: a few hundred rows an hour).
 */
export async function driftedDays(clickhouse: ClickHouseClient, watermarkS: number): Promise<number[]> {
  if (watermarkS === 0) return [];
  const below = (column: string) => beforeWatermark(column, watermarkS);
  const found = await rows<{ d: string | number }>(
    clickhouse,
    `SELECT d FROM (
       SELECT toUInt32(day) AS d, toInt64(countMerge(requests)) AS n, toInt64(sumMerge(total_tokens)) AS t
       FROM ${DAYS} WHERE ${below('day')} GROUP BY d
       UNION ALL
       SELECT toUInt32(intDiv(toUInt32(hour), ${DAY_S}) * ${DAY_S}) AS d, -toInt64(countMerge(requests)) AS n, -toInt64(sumMerge(total_tokens)) AS t
       FROM ${HOURS} WHERE ${below('hour')} GROUP BY d
     ) GROUP BY d HAVING sum(n) != 0 OR sum(t) != 0 ORDER BY d`,
  );
  return found.map((row) => Number(row.d));
}

/**
 * The built weeks (weekBuilt) whose requests or tokens in usage_rollup_user_by_week differ
 * from the sum of their per-user days: their sums per day and per week (a few hundred
 * rows), compared here, where the weeks are cut (weeks.ts). The weeks' table must exist
 * (migration 0015: hasUserWeeks).
 */
async function driftedWeeks(clickhouse: ClickHouseClient, state: DayState): Promise<number[]> {
  if (state.watermarkS === 0) return [];
  const sums = (table: string, time: string) =>
    rows<{ s: string | number; n: string | number; t: string | number }>(
      clickhouse,
      `SELECT toUInt32(${time}) AS s, toString(sum(requests)) AS n, toString(sum(total_tokens)) AS t
       FROM ${table} WHERE ${beforeWatermark(time, state.watermarkS)} GROUP BY s`,
    );
  const [weeks, days] = await Promise.all([sums(USER_WEEKS, 'week'), sums(USER_DAYS, 'day')]);
  // Per week: its own sums less its days' (BigInt: token sums pass 2^53).
  const differences = new Map<number, [bigint, bigint]>();
  const add = (weekS: number, n: string | number, t: string | number, sign: bigint) => {
    const [requests, tokens] = differences.get(weekS) ?? [0n, 0n];
    differences.set(weekS, [requests + sign * BigInt(n), tokens + sign * BigInt(t)]);
  };
  for (const row of weeks) add(Number(row.s), row.n, row.t, 1n);
  for (const row of days) add(weekStartS(Number(row.s)), row.n, row.t, -1n);
  return [...differences]
    .filter(([weekS, [requests, tokens]]) => (requests !== 0n || tokens !== 0n) && state.weekBuilt(weekS))
    .map(([weekS]) => weekS)
    .sort((a, b) => a - b);
}

/**
 * Builds the days the job owes: each day over for `delayMs` past the watermark, and each
 * day before it changed since it was built. Run by one process at a time: the caller
 * holds the lock (DAY_BUILD_LOCK). The watermark's copy in Redis is written at every run.
 */
export async function buildDays(clickhouse: ClickHouseClient, fence: DayBuildFence, options: DayBuildOptions): Promise<DayBuildOutcome> {
  const nowMs = options.nowMs ?? Date.now();
  const lastDueS = (dayStartMs(nowMs - options.delayMs) - DAY_MS) / 1000;
  let state = await readDayState(clickhouse, 0, LAST_DAY_S);
  if (!state.jobBuilt) return { built: [], weeks: [], watermarkS: 0 };
  // Redis's copy first: a run that failed after raising ClickHouse's may have left it
  // behind, and an ingester reading it would not mark a day built below. A unit that read
  // it before holds a lease the builds below wait for.
  await fence.setDayWatermark(state.watermarkS * 1000);
  // Days (epoch seconds) marked as changed, logged, and the state read again.
  const markDrifted = async (days: readonly number[], what: string) => {
    if (days.length === 0) return;
    await markDays(
      clickhouse,
      days.map((day) => day * 1000),
    );
    for (const day of days) options.log?.(`${what} for ${isoDay(day)}: marked`);
    state = await readDayState(clickhouse, 0, LAST_DAY_S);
  };
  // A built day whose hours no longer add up to it changed without a mark (an ingester
  // from before migration 0014 during an upgrade, which marks nothing): marked, so it is
  // read from its hours and built again below.
  await markDrifted(
    (await driftedDays(clickhouse, state.watermarkS)).filter((day) => state.built(day)),
    'day rollups differed from their hours',
  );
  // So with a built week whose days no longer add up to it (two builders summing it at
  // once): its first day marked, so the week is read from its days and summed again below.
  const weeksPresent = await hasUserWeeks(clickhouse);
  if (weeksPresent) await markDrifted(await driftedWeeks(clickhouse, state), 'per-user week differed from its days');
  // The first day the hours hold: the days before the migration, which views filled, are built once too.
  // (An empty table's least hour is 0.)
  const [found] = await rows<{ first: string | number }>(clickhouse, `SELECT toUInt32(min(hour)) AS first FROM ${HOURS}`);
  const firstS = Number(found?.first ?? 0) > 0 ? Math.floor(Number(found!.first) / DAY_S) * DAY_S : undefined;
  if (firstS === undefined && state.watermarkS === 0) return { built: [], weeks: [], watermarkS: 0 };
  // Owed, the oldest first: the days before the watermark not built (never, changed
  // since, or a run that failed halfway), then the days over since it.
  const from = Math.min(firstS ?? state.watermarkS, ...state.marked);
  const due: number[] = [];
  for (let day = from; day < state.watermarkS; day += DAY_S) if (!state.built(day)) due.push(day);
  for (let day = Math.max(state.watermarkS, from); day <= lastDueS; day += DAY_S) due.push(day);
  const days = due.slice(0, options.maxDays ?? 31);
  const watermarkS = days.length > 0 ? Math.max(state.watermarkS, days.at(-1)! + DAY_S) : state.watermarkS;
  const weeks = weeksPresent ? await dueWeeks(clickhouse, state, watermarkS, options.maxWeeks ?? 8) : [];
  if (days.length === 0 && weeks.length === 0) return { built: [], weeks: [], watermarkS };
  // Hand the new days over first (ClickHouse's watermark, then Redis's), count the marks
  // of the days and weeks owed, then wait for every insert in flight: one that read the
  // old watermark, or marked a day before the count, ends before its day is built.
  if (watermarkS > state.watermarkS) {
    await clickhouse.insert({
      table: DAY_LEVELS_TABLE,
      values: [{ kind: 'watermark', day_s: watermarkS, marks: 0, at_ms: Date.now() }],
      format: 'JSONEachRow',
    });
    await fence.setDayWatermark(watermarkS * 1000);
  }
  const owed = [
    ...(days.length > 0 ? [`day_s IN (${days.join(', ')})`] : []),
    ...weeks.map((week) => `(day_s >= ${week} AND day_s < ${weekEndS(week)})`),
  ];
  const counted = await rows<{ day_s: string | number; n: string | number }>(
    clickhouse,
    `SELECT day_s, count() AS n FROM ${DAY_LEVELS_TABLE} WHERE kind = 'mark' AND (${owed.join(' OR ')}) GROUP BY day_s`,
  );
  const marks = new Map(counted.map((row) => [Number(row.day_s), Number(row.n)]));
  await fence.waitForInsertsInFlight();
  if (days.length > 0) await buildTheDays(clickhouse, days, marks, options);
  if (weeks.length > 0) await buildWeeks(clickhouse, weeks, marks, options);
  return { built: days, weeks, watermarkS };
}

/** Deletes what the day rollups hold of `days`, merges their hours into them, and records the builds. */
async function buildTheDays(
  clickhouse: ClickHouseClient,
  days: readonly number[],
  marks: ReadonlyMap<number, number>,
  options: DayBuildOptions,
) {
  const list = days.join(', ');
  // What the day rollups hold of those days already (the views' rows before 0014, a run
  // that failed halfway, a job's rebuild of a day not built): deleted first.
  const dayOf = (column: string) => `toUInt32(intDiv(toUInt32(${column}), ${DAY_S}) * ${DAY_S})`;
  const held = await rows<{ t: string; d: string | number }>(
    clickhouse,
    JOB_BUILT_DAY_ROLLUPS.map(
      ({ table }) => `SELECT DISTINCT '${table}' AS t, toUInt32(day) AS d FROM ${table} WHERE toUInt32(day) IN (${list})`,
    ).join(' UNION ALL '),
  );
  for (const { table } of JOB_BUILT_DAY_ROLLUPS) {
    const heldDays = held.filter((row) => row.t === table).map((row) => Number(row.d));
    if (heldDays.length > 0) {
      await mutate(clickhouse, table, `DELETE WHERE toUInt32(day) IN (${heldDays.join(', ')})`, options.mutationTimeoutMs, options.cluster);
    }
  }
  // Each day the hours hold, merged into each day rollup from the finer rollup it merges
  // (an hour rollup, or a day rollup with more groups built just before).
  const withHours = await rows<{ d: string | number }>(
    clickhouse,
    `SELECT DISTINCT ${dayOf('hour')} AS d FROM ${HOURS} WHERE ${dayOf('hour')} IN (${list})`,
  );
  const jobBuilt = new Set<string>(JOB_BUILT_DAY_ROLLUPS.map(({ view }) => view));
  const rollups = rollupsFinestFirst().filter(({ view }) => jobBuilt.has(view));
  for (const day of withHours.map((row) => Number(row.d)).sort((a, b) => a - b)) {
    for (const rollup of rollups) {
      const query = derivedRangeSql(rollup.view, day, day + DAY_S);
      if (!query) throw new Error(`no finer rollup holds what ${rollup.table} does`);
      await clickhouse.command({ query });
    }
  }
  const at = Date.now();
  await clickhouse.insert({
    table: DAY_LEVELS_TABLE,
    values: days.map((day) => ({ kind: 'build', day_s: day, marks: marks.get(day) ?? 0, at_ms: at })),
    format: 'JSONEachRow',
  });
  for (const day of days) options.log?.(`day rollups built for ${isoDay(day)}`);
}

/** Whether usage_rollup_user_by_week exists (migration 0015 has run). */
export async function hasUserWeeks(clickhouse: ClickHouseClient): Promise<boolean> {
  const [found] = await rows<{ n: string | number }>(
    clickhouse,
    `SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = '${USER_WEEKS}'`,
  );
  return Number(found?.n ?? 0) > 0;
}

/**
 * The weeks owed (weeks.ts), the oldest first, `max` at most: each week over before the
 * watermark, from the first the per-user days hold, not built (never, or changed since).
 * The weeks' table must exist (migration 0015: hasUserWeeks).
 */
async function dueWeeks(clickhouse: ClickHouseClient, state: DayState, watermarkS: number, max: number): Promise<number[]> {
  if (max === 0) return [];
  const [found] = await rows<{ first: string | number }>(clickhouse, `SELECT toUInt32(min(day)) AS first FROM ${USER_DAYS}`);
  const first = Number(found?.first ?? 0);
  if (first === 0) return [];
  const weeks: number[] = [];
  for (let week = weekStartS(first); weekEndS(week) <= watermarkS && weeks.length < max; week = weekEndS(week)) {
    if (!state.weekBuilt(week)) weeks.push(week);
  }
  return weeks;
}

/** Deletes what usage_rollup_user_by_week holds of `weeks`, sums their per-user days into it, and records the builds. */
async function buildWeeks(
  clickhouse: ClickHouseClient,
  weeks: readonly number[],
  marks: ReadonlyMap<number, number>,
  options: DayBuildOptions,
) {
  const list = weeks.join(', ');
  const held = await rows<{ w: string | number }>(
    clickhouse,
    `SELECT DISTINCT toUInt32(week) AS w FROM ${USER_WEEKS} WHERE toUInt32(week) IN (${list})`,
  );
  if (held.length > 0) {
    const heldWeeks = held.map((row) => Number(row.w)).join(', ');
    await mutate(clickhouse, USER_WEEKS, `DELETE WHERE toUInt32(week) IN (${heldWeeks})`, options.mutationTimeoutMs, options.cluster);
  }
  // Aliases apart from the columns: a sum named as its own column reads as nested.
  const sums = USAGE_MEASURES.map((column) => `sum(${column}) AS summed_${column}`).join(', ');
  for (const week of weeks) {
    await clickhouse.command({
      query: `INSERT INTO ${USER_WEEKS} (week, environment, user_id, user_type, ${USAGE_MEASURES.join(', ')})
              SELECT toDateTime(${week}) AS summed_week, environment, user_id, user_type, ${sums}
              FROM ${USER_DAYS} WHERE day >= toDateTime(${week}) AND day < toDateTime(${weekEndS(week)})
              GROUP BY environment, user_id, user_type`,
    });
  }
  const at = Date.now();
  await clickhouse.insert({
    table: DAY_LEVELS_TABLE,
    values: weeks.map((week) => ({ kind: 'week', day_s: week, marks: weekMarks(marks, week), at_ms: at })),
    format: 'JSONEachRow',
  });
  for (const week of weeks) options.log?.(`per-user week built for ${isoDay(week)}`);
}
