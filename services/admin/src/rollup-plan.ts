// Which rollup answers an analytics query (migration 0008, docs/analytics-api.md,
// "Which table answers"). The range [from, to) is in whole minutes; it is cut into the
// coarsest pieces a table holds: whole UTC days from the day rollup, the hours around
// them from an hour rollup, the minutes at the edges from the minute rollup. Every
// piece is exact, so the sum is: a 30-day query reads about 30 day rows per group plus
// at most two days of hours and two hours of minutes, whatever the traffic was.
//
//   query                                   tables (coarsest first)
//   a userId filter                         usage_events_by_user (that user's records, found
//                                           by its sorting key)
//   grouped by userId (usage, day or none,  usage_rollup_user_by_day: the range widened to
//   with environment or userType at most)   whole UTC days (the answer's from/to say so);
//                                           without buckets, usage_rollup_user_by_week for
//                                           the weeks the job built (migration 0015)
//   grouped by userId otherwise             usage_events_by_user, every record of the range
//                                           (exact; slow over long ranges: not a dashboard view)
//   latency in whole hours or days,         the latency histograms (migration 0010) and
//   by environment at most                  their time to first token twins:
//                                           usage_latency_hist_total_by_day, …_by_hour
//   by provider and model at most           usage_latency_hist_by_day, …_by_hour
//   with environment                        usage_latency_hist_env_by_day, …_by_hour
//   usage by keyId, with environment or     usage_rollup_key_totals_by_day, …_by_hour,
//   userType at most                        …_by_minute (migration 0011)
//   anything else                           usage_rollup_by_day and usage_rollup_by_hour,
//                                           or usage_rollup_key_by_day and
//                                           usage_rollup_key_by_hour (with keyId), then
//                                           usage_rollup_by_minute (usage_rollup_key_by_minute)
//   errors                                  usage_errors_by_day (0009), usage_errors_by_hour,
//                                           usage_errors_minute
//
// Latency is counted in whole buckets: hourly latency over whole hours, daily over whole
// days, and with no buckets over whole hours once the range spans a day (the answer's
// from/to say so). A percentile state of a minute holds that minute's values, so
// minutes at the edges would cost what the traffic in them was; whole hours and days
// cost what the chart shows (docs/analytics-api.md, "Latency in whole buckets").
//
// Until the backfill of migration 0008 has finished, every usage and latency query reads
// usage_rollup_minute and every errors query usage_errors_minute, as before it; until
// that of migration 0010 has, latency reads the usage rollups' t-digest states (0010
// dropped the t-digest latency rollups of 0008 and 0009); until that of migration 0011
// has, usage by key reads the keyed rollups of 0008.

import { histogramTable, type RollupMigration } from '@otm/shared/rollups/views';
import { weekEndS, weeksWithin } from '@otm/shared/rollups/weeks';

const MINUTE = 60;
const HOUR = 3600;
const DAY = 86_400;

export interface Level {
  /** Seconds a row of the table covers. */
  seconds: number;
  table: string;
  /** The table's time column. */
  time: string;
  /** Whether the table holds the whole row starting at `startS` (the job-built days); every row when absent. */
  holds?: (startS: number) => boolean;
}

/** A range of one table to read: [fromS, toS) in epoch seconds. */
export interface Piece {
  table: string;
  time: string;
  fromS: number;
  toS: number;
}

/**
 * Cuts [fromS, toS) into pieces of the coarsest level whose rows fit whole, then the next
 * level around them, down to the last level, which takes what is left. Levels coarsest first.
 */
export function cover(fromS: number, toS: number, levels: readonly Level[]): Piece[] {
  if (fromS >= toS || levels.length === 0) return [];
  const [level, ...finer] = levels as [Level, ...Level[]];
  if (finer.length === 0) return [{ table: level.table, time: level.time, fromS, toS }];
  const start = Math.ceil(fromS / level.seconds) * level.seconds;
  const end = Math.floor(toS / level.seconds) * level.seconds;
  if (start >= end) return cover(fromS, toS, finer);
  const piece = (from: number, to: number) => ({ table: level.table, time: level.time, fromS: from, toS: to });
  if (!level.holds) return [piece(start, end), ...cover(fromS, start, finer), ...cover(end, toS, finer)];
  // Runs of rows the table holds, and of rows it does not (read from the finer levels).
  const held: Piece[] = [];
  const gaps: Piece[] = [];
  let runFrom = start;
  for (let at = start; at < end; at += level.seconds) {
    const next = at + level.seconds;
    const holds = level.holds(at);
    if (next < end && level.holds(next) === holds) continue;
    if (holds) held.push(piece(runFrom, next));
    else gaps.push(...cover(runFrom, next, finer));
    runFrom = next;
  }
  return joinAdjacent([...held, ...cover(fromS, start, finer), ...gaps, ...cover(end, toS, finer)]);
}

/** Pieces of one table that meet, joined: by table, then in time order. */
function joinAdjacent(pieces: readonly Piece[]): Piece[] {
  const sorted = [...pieces].sort((a, b) => (a.table === b.table ? a.fromS - b.fromS : a.table < b.table ? -1 : 1));
  const joined: Piece[] = [];
  for (const piece of sorted) {
    const last = joined.at(-1);
    if (last && last.table === piece.table && last.toS === piece.fromS) joined[joined.length - 1] = { ...last, toS: piece.toS };
    else joined.push(piece);
  }
  return joined;
}

export type Plan =
  /** Pieces of rollups with the 0008 measures (t-digest quantiles), merged together. */
  | { kind: 'rollups'; pieces: Piece[] }
  /** Pieces of the latency histograms of migration 0010 (and their time to first token twins), added together. */
  | { kind: 'histograms'; pieces: Piece[] }
  /** usage_events_by_user, aggregated as it is read (one user's records, or a range's). */
  | { kind: 'byUser' }
  /** usage_rollup_minute (or usage_errors_minute), every dimension, as before 0008. */
  | { kind: 'legacy' };

export interface PlanInput {
  route: 'usage' | 'latency' | 'errors';
  /** Bucket seconds; 0 for none. */
  bucketSeconds: number;
  /** Dimensions grouped by or filtered on (API names). */
  dimensions: readonly string[];
  /** Whether the query is for one user (a userId filter). */
  oneUser: boolean;
  fromS: number;
  toS: number;
  /** The migrations whose rollups' backfill has finished (0008 to 0011). */
  backfilled: ReadonlySet<RollupMigration>;
  /**
   * Whether the day rollups hold the whole UTC day starting at `dayS` (epoch seconds): a
   * job builds them (migration 0014), and a day not built, or changed since, is read
   * from its hours. Every day when absent (before 0014).
   */
  dayBuilt?: (dayS: number) => boolean;
  /**
   * Whether usage_rollup_user_by_week holds the whole week starting at `weekS` (epoch
   * seconds; migration 0015, weeks.ts): the job built it and its days are unchanged
   * since. No week when absent.
   */
  weekBuilt?: (weekS: number) => boolean;
}

const userDays = (fromS: number, toS: number): Piece => ({ table: 'usage_rollup_user_by_day', time: 'day', fromS, toS });

/** Whole UTC days [fromS, toS) of the per-user rollups: each week built read from the weeks, the other days from the days. */
function userWeeks(fromS: number, toS: number, weekBuilt: (weekS: number) => boolean): Piece[] {
  const weeks: Piece[] = [];
  const days: Piece[] = [];
  let at = fromS;
  for (const week of weeksWithin(fromS, toS).filter(weekBuilt)) {
    if (week > at) days.push(userDays(at, week));
    weeks.push({ table: 'usage_rollup_user_by_week', time: 'week', fromS: week, toS: weekEndS(week) });
    at = weekEndS(week);
  }
  if (at < toS) days.push(userDays(at, toS));
  return joinAdjacent([...weeks, ...days]);
}

/** The levels usable for a bucket: a level's rows must fall inside one bucket each. */
const fits = (bucketSeconds: number) => (level: Level) => bucketSeconds === 0 || bucketSeconds % level.seconds === 0;

const USER_DAY_DIMENSIONS = new Set(['environment', 'userType', 'userId']);
/** What the key totals (migration 0011) hold besides the time. */
const KEY_TOTALS_DIMENSIONS = new Set(['keyId', 'environment', 'userType']);
/**
 * The latency histograms (migration 0010) by what they hold, narrowest first: by
 * environment alone; by provider and model; the same per environment. The tables of
 * latency; those of time to first token are named alike (`histogramTables`).
 */
const LATENCY_HISTOGRAMS = (
  [
    [['environment'], 'total'],
    [['provider', 'model'], 'model'],
    [['environment', 'provider', 'model'], 'env'],
  ] as const
).map(([dimensions, family]) => ({
  dimensions: new Set<string>(dimensions),
  hour: histogramTable('latency', family, 'hour'),
  day: histogramTable('latency', family, 'day'),
}));

/** A latency histogram's table and its time to first token's twin. */
export function histogramTables(latencyTable: string): { latency: string; ttft: string } {
  return { latency: latencyTable, ttft: latencyTable.replace(/^usage_latency_hist/, 'usage_ttft_hist') };
}

/**
 * The range a latency query counts: [fromS, toS) widened to whole buckets (hours or
 * days), or with no buckets to whole hours once it spans a day; minute buckets, and
 * shorter ranges without buckets, stay as asked.
 */
export function latencyRange(bucketSeconds: number, fromS: number, toS: number): { fromS: number; toS: number } {
  const unit = bucketSeconds >= HOUR ? bucketSeconds : bucketSeconds === 0 && toS - fromS >= DAY ? HOUR : 0;
  if (unit === 0) return { fromS, toS };
  return { fromS: Math.floor(fromS / unit) * unit, toS: Math.ceil(toS / unit) * unit };
}

/** The plan for a query; `fromS`/`toS` come back changed when the plan counts a wider range. */
export function planQuery(input: PlanInput): { plan: Plan; fromS: number; toS: number } {
  const { route, bucketSeconds, dimensions } = input;
  // Latency over the rollups: whole buckets (above). One user's records stay as asked.
  const widened =
    route === 'latency' && input.backfilled.has('0008') && !input.oneUser && !dimensions.includes('userId')
      ? latencyRange(bucketSeconds, input.fromS, input.toS)
      : { fromS: input.fromS, toS: input.toS };
  const { fromS, toS } = widened;
  const same = (plan: Plan) => ({ plan, fromS, toS });
  if (!input.backfilled.has('0008')) return same({ kind: 'legacy' });
  if (route === 'errors') {
    const levels = [
      ...(input.backfilled.has('0009') ? [{ seconds: DAY, table: 'usage_errors_by_day', time: 'day', holds: input.dayBuilt }] : []),
      { seconds: HOUR, table: 'usage_errors_by_hour', time: 'hour' },
      { seconds: MINUTE, table: 'usage_errors_minute', time: 'minute' },
    ].filter(fits(bucketSeconds));
    return same({ kind: 'rollups', pieces: cover(fromS, toS, levels) });
  }
  if (input.oneUser) return same({ kind: 'byUser' });
  if (dimensions.includes('userId')) {
    // Grouped (not filtered) by user: per-user days, or every dimension per minute.
    if (route === 'usage' && (bucketSeconds === 0 || bucketSeconds === DAY) && dimensions.every((d) => USER_DAY_DIMENSIONS.has(d))) {
      const wideFrom = Math.floor(fromS / DAY) * DAY;
      const wideTo = Math.ceil(toS / DAY) * DAY;
      const pieces = bucketSeconds === 0 && input.weekBuilt ? userWeeks(wideFrom, wideTo, input.weekBuilt) : [userDays(wideFrom, wideTo)];
      return { plan: { kind: 'rollups', pieces }, fromS: wideFrom, toS: wideTo };
    }
    return same({ kind: 'byUser' });
  }
  const keyed = dimensions.includes('keyId');
  // Latency without the key, in whole hours (or days): the first histogram holding every
  // dimension asked for, once migration 0010's backfill is done. Anything else (minute
  // edges, user type, key) reads the usage rollups' t-digest states: the pieces of one
  // query merge one kind of state.
  const histogram =
    route === 'latency' && !keyed && input.backfilled.has('0010') && fromS % HOUR === 0 && toS % HOUR === 0 && bucketSeconds % HOUR === 0
      ? LATENCY_HISTOGRAMS.find((rollup) => dimensions.every((name) => rollup.dimensions.has(name)))
      : undefined;
  if (histogram) {
    const levels = [
      { seconds: DAY, table: histogram.day, time: 'day', holds: input.dayBuilt },
      { seconds: HOUR, table: histogram.hour, time: 'hour' },
    ].filter(fits(bucketSeconds));
    return same({ kind: 'histograms', pieces: cover(fromS, toS, levels) });
  }
  // Usage by key alone (with the environment or the user type at most): the key totals
  // (migration 0011), once their backfill is done; with the provider or the model, or
  // latency, the keyed rollups of 0008.
  const family = !keyed
    ? 'usage_rollup'
    : route === 'usage' && input.backfilled.has('0011') && dimensions.every((name) => KEY_TOTALS_DIMENSIONS.has(name))
      ? 'usage_rollup_key_totals'
      : 'usage_rollup_key';
  const levels = [
    { seconds: DAY, table: `${family}_by_day`, time: 'day', holds: input.dayBuilt },
    { seconds: HOUR, table: `${family}_by_hour`, time: 'hour' },
    { seconds: MINUTE, table: `${family}_by_minute`, time: 'minute' },
  ].filter(fits(bucketSeconds));
  return same({ kind: 'rollups', pieces: cover(fromS, toS, levels) });
}
