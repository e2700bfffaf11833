// The rollups' materialized views, as the migrations define them, for the jobs that
// rebuild rollup rows from usage_events (erasure, re-costing): the rebuild runs the
// view's own SELECT with a narrower WHERE, so it can never count differently from the
// view. A later migration that redefines a view replaces it here (the last one wins).
import fs from 'node:fs';
import path from 'node:path';
import { migrationsDir } from '../migrate.js';

export type RollupView =
  | 'usage_rollup_minute_mv'
  | 'usage_errors_minute_mv'
  | 'usage_rollup_by_minute_mv'
  | 'usage_rollup_key_by_minute_mv'
  | 'usage_rollup_by_hour_mv'
  | 'usage_rollup_key_by_hour_mv'
  | 'usage_rollup_by_day_mv'
  | 'usage_rollup_key_by_day_mv'
  | 'usage_rollup_user_by_day_mv'
  | 'usage_errors_by_hour_mv'
  | 'usage_errors_by_day_mv'
  | `usage_rollup_key_totals_by_${keyof typeof LEVEL_SECONDS}_mv`
  | `${HistogramTable}_mv`;

/**
 * The view of usage_rollup_minute (migration 0002), which the analytics API reads only
 * until the backfill of migration 0008 has finished, and which is dropped then
 * (retireLegacyRollup in backfill.ts). Not among aggregateViews: the jobs that compare,
 * recount or rebuild the rollups keep to those analytics read. rebuildRollupSql still
 * knows it (re-costing re-prices the table while an installation still reads it).
 */
export const LEGACY_ROLLUP_VIEW: RollupView = 'usage_rollup_minute_mv';

/** Seconds a rollup row covers, by its time column. */
const LEVEL_SECONDS = { minute: 60, hour: 3600, day: 86_400 } as const;

/** What the histograms of migration 0010 count: latency, and time to first token. */
const HISTOGRAM_METRICS = ['latency', 'ttft'] as const;
export type HistogramMetric = (typeof HISTOGRAM_METRICS)[number];

/**
 * The histograms' families by the groups they hold, narrowest first: by environment alone
 * (`total`), by provider and model (`model`), and by all three (`env`).
 */
const HISTOGRAM_FAMILIES = { total: 'total_', model: '', env: 'env_' } as const;
export type HistogramFamily = keyof typeof HISTOGRAM_FAMILIES;

const HISTOGRAM_LEVELS = ['hour', 'day'] as const;
type HistogramLevel = (typeof HISTOGRAM_LEVELS)[number];

export type HistogramTable = `usage_${HistogramMetric}_hist_${(typeof HISTOGRAM_FAMILIES)[HistogramFamily]}by_${HistogramLevel}`;

/** A histogram's table: `usage_latency_hist_env_by_hour`. */
export function histogramTable(metric: HistogramMetric, family: HistogramFamily, time: HistogramLevel): HistogramTable {
  return `usage_${metric}_hist_${HISTOGRAM_FAMILIES[family]}by_${time}`;
}

/** The twelve histograms (two metrics, three families, per hour and per day), as SCALED_ROLLUPS lists them. */
const HISTOGRAM_ROLLUPS = HISTOGRAM_METRICS.flatMap((metric) =>
  (Object.keys(HISTOGRAM_FAMILIES) as HistogramFamily[]).flatMap((family) =>
    HISTOGRAM_LEVELS.map((time) => {
      const table = histogramTable(metric, family, time);
      const seconds = LEVEL_SECONDS[time];
      return { view: `${table}_mv` as const, table, time, seconds, kind: 'latency' as const, migration: '0010' as const };
    }),
  ),
);

/**
 * The rollups of migrations 0008 to 0011, by view, with their time column, the seconds a
 * row covers, what they measure (usage: counts, tokens, cost, latency; latency and time
 * to first token only, as histograms (0010); or errors) and the migration that made
 * them: the backfill copies the records stored before a migration into its tables
 * (backfill.ts), and the API reads them once it has.
 */
export const SCALED_ROLLUPS = [
  { view: 'usage_rollup_by_minute_mv', table: 'usage_rollup_by_minute', time: 'minute', seconds: 60, kind: 'usage', migration: '0008' },
  {
    view: 'usage_rollup_key_by_minute_mv',
    table: 'usage_rollup_key_by_minute',
    time: 'minute',
    seconds: 60,
    kind: 'usage',
    migration: '0008',
  },
  { view: 'usage_rollup_by_hour_mv', table: 'usage_rollup_by_hour', time: 'hour', seconds: 3600, kind: 'usage', migration: '0008' },
  { view: 'usage_rollup_key_by_hour_mv', table: 'usage_rollup_key_by_hour', time: 'hour', seconds: 3600, kind: 'usage', migration: '0008' },
  { view: 'usage_rollup_by_day_mv', table: 'usage_rollup_by_day', time: 'day', seconds: 86_400, kind: 'usage', migration: '0008' },
  { view: 'usage_rollup_key_by_day_mv', table: 'usage_rollup_key_by_day', time: 'day', seconds: 86_400, kind: 'usage', migration: '0008' },
  {
    view: 'usage_rollup_user_by_day_mv',
    table: 'usage_rollup_user_by_day',
    time: 'day',
    seconds: 86_400,
    kind: 'usage',
    migration: '0008',
  },
  { view: 'usage_errors_by_hour_mv', table: 'usage_errors_by_hour', time: 'hour', seconds: 3600, kind: 'errors', migration: '0008' },
  { view: 'usage_errors_by_day_mv', table: 'usage_errors_by_day', time: 'day', seconds: 86_400, kind: 'errors', migration: '0009' },
  ...HISTOGRAM_ROLLUPS,
  ...(Object.keys(LEVEL_SECONDS) as (keyof typeof LEVEL_SECONDS)[]).map((time) => ({
    view: `usage_rollup_key_totals_by_${time}_mv` as const,
    table: `usage_rollup_key_totals_by_${time}` as const,
    time,
    seconds: LEVEL_SECONDS[time],
    kind: 'usage' as const,
    migration: '0011' as const,
  })),
] as const satisfies readonly ScaledRollup[];

interface ScaledRollup {
  view: RollupView;
  table: string;
  time: string;
  seconds: number;
  kind: 'usage' | 'latency' | 'errors';
  migration: RollupMigration;
}

/** The migrations whose rollups the backfill copies stored records into. */
export type RollupMigration = '0008' | '0009' | '0010' | '0011';

/** The usage measures every usage rollup holds (as states, or as plain sums per user), in their tables' order. */
export const USAGE_MEASURES = [
  'requests',
  'successes',
  'errors',
  'input_tokens',
  'output_tokens',
  'total_tokens',
  'cached_input_tokens',
  'cache_write_tokens',
  'reasoning_tokens',
  'cache_reported_input_tokens',
  'cost_usd',
  'unpriced',
] as const;

/** The usage rollups (those that count requests, tokens and cost), by table name. */
export const USAGE_ROLLUP_TABLES = SCALED_ROLLUPS.filter(({ kind }) => kind === 'usage').map(({ table }) => table);

/** The latency-only rollups, by table name. */
export const LATENCY_ROLLUP_TABLES = SCALED_ROLLUPS.filter(({ kind }) => kind === 'latency').map(({ table }) => table);

/** The columns usage_events_by_user copies from usage_events (migration 0008), in its order. */
export const BY_USER_COLUMNS =
  'environment, user_id, event_time, event_key, user_type, api_key_id, provider, model_id, status, input_tokens, output_tokens, total_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens, cache_reported_input_tokens, cost_usd, price_known, latency_ms, ttft_ms, output_tokens_per_sec, error_code, error_message, ingested_at';

/**
 * The day rollups whose views migration 0014 dropped: a job builds each UTC day of them
 * from the hour rollups once the day is over (day-levels.ts), so an insert writes no
 * part into them. Their tables, rows and the SELECTs the jobs rebuild them with are
 * unchanged.
 */
export const JOB_BUILT_DAY_ROLLUPS = SCALED_ROLLUPS.filter(
  (rollup) => rollup.time === 'day' && rollup.view !== 'usage_rollup_user_by_day_mv',
);

/** The views of JOB_BUILT_DAY_ROLLUPS. */
export const JOB_BUILT_VIEWS: ReadonlySet<string> = new Set(JOB_BUILT_DAY_ROLLUPS.map(({ view }) => view));

interface ViewQuery {
  view: string;
  table: string;
  /** `SELECT … FROM usage_events` */
  select: string;
  /** The view's own WHERE condition, if it has one. */
  where: string | undefined;
  /** `GROUP BY …` */
  groupBy: string;
}

let views: Map<string, ViewQuery> | undefined;

function load(): Map<string, ViewQuery> {
  const found = new Map<string, ViewQuery>();
  const files = fs
    .readdirSync(migrationsDir)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  // Each view is `CREATE MATERIALIZED VIEW IF NOT EXISTS <view> TO <rollup> AS SELECT … FROM
  // usage_events [WHERE …] GROUP BY …;`: cut at its markers (no backtracking regex).
  const marker = 'CREATE MATERIALIZED VIEW IF NOT EXISTS ';
  const from = 'FROM usage_events';
  for (const file of files) {
    const text = fs.readFileSync(path.join(migrationsDir, file), 'utf8');
    // A view a later migration drops (`DROP TABLE IF EXISTS <view>;`) is gone, but for
    // those whose tables a job builds since (day-levels.ts): their SELECT is still how
    // the jobs that rebuild rollup rows count them.
    for (const dropped of text.matchAll(/^DROP TABLE IF EXISTS (\w+);/gm)) {
      if (!JOB_BUILT_VIEWS.has(dropped[1]!)) found.delete(dropped[1]!);
    }
    for (const chunk of text.split(marker).slice(1)) {
      const statement = chunk.slice(0, chunk.indexOf(';'));
      const head = /^(\w+) TO (\w+) AS\s/.exec(statement);
      const fromAt = statement.indexOf(from);
      const groupAt = statement.indexOf('GROUP BY ', fromAt);
      if (!head || fromAt < 0 || groupAt < 0) continue;
      const between = statement.slice(fromAt + from.length, groupAt).trim();
      if (between !== '' && !between.startsWith('WHERE ')) continue;
      found.set(head[1]!, {
        view: head[1]!,
        table: head[2]!,
        select: statement.slice(head[0].length, fromAt + from.length).trim(),
        where: between === '' ? undefined : between.slice('WHERE '.length).trim(),
        groupBy: statement.slice(groupAt).trim(),
      });
    }
  }
  return found;
}

/**
 * `INSERT INTO <rollup> <the view's SELECT> WHERE <the view's condition> AND <condition> GROUP BY …`;
 * `final` reads usage_events FINAL (a record loaded twice, not merged yet, counted once).
 */
export function rebuildRollupSql(view: RollupView, condition: string, final = false): string {
  views ??= load();
  const query = views.get(view);
  if (!query) throw new Error(`no migration defines the view ${view}`);
  const where = [query.where, condition]
    .filter(Boolean)
    .map((part) => `(${part})`)
    .join(' AND ');
  const select = final ? query.select.replace(/FROM usage_events$/, 'FROM usage_events FINAL') : query.select;
  return `INSERT INTO ${query.table} ${select} WHERE ${where} ${query.groupBy}`;
}

/** A materialized view on usage_events that aggregates (every one but the copy ordered by user). */
export interface AggregateView {
  view: RollupView;
  table: string;
  /** The view's own WHERE condition, if it has one. */
  where: string | undefined;
  /** Its GROUP BY columns in order, each with the expression the view computes it from (the first is the time bucket). */
  groups: { name: string; expression: string }[];
  /** The column counting the records of a rollup row, and how the rows of a group add it up. */
  count: { column: string; merge: 'countMerge' | 'sum' };
}

/**
 * The items of a SELECT list: top-level commas split them (none inside parentheses or
 * quotes); `expression AS alias` names one, a bare column names itself.
 */
export function selectItems(select: string): { name: string; expression: string }[] {
  const from = 'FROM usage_events';
  const text = select.trim();
  const list = (text.endsWith(from) ? text.slice(0, -from.length) : text).replace(/^SELECT\s/, '');
  const items: string[] = [];
  let depth = 0;
  let quoted = false;
  let start = 0;
  for (let i = 0; i < list.length; i++) {
    const c = list[i];
    if (quoted) {
      if (c === '\\') i++;
      else if (c === "'") quoted = false;
    } else if (c === "'") quoted = true;
    else if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      items.push(list.slice(start, i));
      start = i + 1;
    }
  }
  items.push(list.slice(start));
  return items.map((item) => {
    const text = item.trim();
    const as = text.lastIndexOf(' AS ');
    // An alias is one word after the last top-level AS; `CAST(x AS T)` has its AS inside parentheses.
    const alias = as < 0 ? '' : text.slice(as + 4).trim();
    return /^\w+$/.test(alias) && !text.slice(as).includes(')')
      ? { name: alias, expression: text.slice(0, as).trim() }
      : { name: text, expression: text };
  });
}

let aggregates: AggregateView[] | undefined;

/** Every aggregating view on usage_events, as the migrations define them (the last definition of each), but the retired LEGACY_ROLLUP_VIEW. */
export function aggregateViews(): AggregateView[] {
  views ??= load();
  aggregates ??= [...views.values()]
    .filter((query) => query.view !== LEGACY_ROLLUP_VIEW)
    .map((query) => {
      const items = new Map(selectItems(query.select).map((item) => [item.name, item.expression]));
      const groups = query.groupBy
        .slice('GROUP BY '.length)
        .split(',')
        .map((name) => name.trim())
        .map((name) => ({ name, expression: items.get(name) ?? name }));
      const counted = [...items].find(([, expression]) => expression === 'countState()' || expression === 'count()');
      if (!counted) throw new Error(`the view ${query.view} counts no records (no countState() or count() column)`);
      return {
        view: query.view as RollupView,
        table: query.table,
        where: query.where,
        groups,
        count: { column: counted[0], merge: counted[1] === 'countState()' ? 'countMerge' : 'sum' },
      };
    });
  return aggregates;
}

/** A view's aggregate state columns: `name` and the `-State` call it is built with, e.g. `quantilesTDigestIf(0.5, 0.9, 0.99)`. */
function stateColumns(view: RollupView): Map<string, string> {
  views ??= load();
  const query = views.get(view);
  if (!query) throw new Error(`no migration defines the view ${view}`);
  const states = new Map<string, string>();
  for (const item of selectItems(query.select)) {
    // `fnState(params)(arguments)` or `fnState(arguments)`: the function and its parameters.
    const call = /^(\w+?)State(\([^()]*\))?\(/.exec(item.expression);
    if (call) states.set(item.name, `${call[1]}${call[2] ?? ''}`);
  }
  return states;
}

interface Derivation {
  /** The finer rollup the rows are merged from. */
  source: (typeof SCALED_ROLLUPS)[number];
  target: (typeof SCALED_ROLLUPS)[number];
  /** The target's groups after its time column. */
  dimensions: string[];
  /** `name: fn(params)` of each of the target's state columns. */
  states: Map<string, string>;
}

let derivations: Map<RollupView, Derivation | undefined> | undefined;

/**
 * The finer rollup a rollup's rows can be merged from instead of read from usage_events:
 * one of at least an hour whose rows fit in the target's, holding every group the target
 * has (the same expressions), the same view condition, and every state column the target
 * has (the same function and parameters); the coarsest such, then the one with the fewest
 * groups. Hours and days only: the minute rollups are not a source (a job rebuilding them
 * reads usage_events anyway).
 */
function derivation(view: RollupView): Derivation | undefined {
  derivations ??= new Map();
  if (derivations.has(view)) return derivations.get(view);
  const all = aggregateViews();
  const target = SCALED_ROLLUPS.find((rollup) => rollup.view === view);
  const own = all.find((candidate) => candidate.view === view);
  let found: Derivation | undefined;
  if (target && own && !own.groups.some((group) => group.name === 'user_id')) {
    const dimensions = own.groups.slice(1);
    const states = stateColumns(view);
    const candidates = SCALED_ROLLUPS.filter(
      (rollup) => rollup.view !== view && rollup.seconds >= 3600 && target.seconds % rollup.seconds === 0,
    )
      .map((rollup) => ({ rollup, groups: all.find((candidate) => candidate.view === rollup.view)! }))
      .filter(({ rollup, groups }) => {
        const theirs = new Map(groups.groups.slice(1).map((group) => [group.name, group.expression]));
        const theirStates = stateColumns(rollup.view);
        const finer = rollup.seconds < target.seconds || theirs.size > dimensions.length;
        return (
          finer &&
          groups.where === own.where &&
          !theirs.has('user_id') &&
          dimensions.every((group) => theirs.get(group.name) === group.expression) &&
          [...states].every(([name, call]) => theirStates.get(name) === call)
        );
      })
      .sort((a, b) => b.rollup.seconds - a.rollup.seconds || a.groups.groups.length - b.groups.groups.length);
    const best = candidates[0];
    if (best) found = { source: best.rollup, target, dimensions: dimensions.map((group) => group.name), states };
  }
  derivations.set(view, found);
  return found;
}

/**
 * `INSERT INTO <rollup> SELECT … FROM <a finer rollup> WHERE (<time>, <groups>) IN (<keys>)`:
 * the rollup's rows of those keys merged from the finer rollup's states (its rows of the
 * same keys must be right already), or undefined when no finer rollup holds what it does.
 * `keys` are tuples of the rollup's own time column and groups, as its rows hold them.
 */
export function derivedRollupSql(view: RollupView, keys: string): string | undefined {
  return mergedSql(view, (time, dimensions) => `(${[time, ...dimensions].join(', ')}) IN (${keys})`);
}

/**
 * `INSERT INTO <rollup> SELECT … FROM <a finer rollup> WHERE <its time> in [fromS, toS)`:
 * every row of the rollup in that range merged from the finer rollup (day-levels.ts
 * builds the days from the hours so), or undefined when no finer rollup holds what it
 * does. The range is in epoch seconds, whole rows of the rollup.
 */
export function derivedRangeSql(view: RollupView, fromS: number, toS: number): string | undefined {
  return mergedSql(view, (_time, _dimensions, source) => `${source} >= toDateTime(${fromS}) AND ${source} < toDateTime(${toS})`);
}

function mergedSql(view: RollupView, condition: (time: string, dimensions: string[], sourceTime: string) => string): string | undefined {
  const found = derivation(view);
  if (!found) return undefined;
  const { source, target, dimensions, states } = found;
  const time =
    source.seconds === target.seconds ? source.time : `toDateTime(intDiv(toUInt32(${source.time}), ${target.seconds}) * ${target.seconds})`;
  const select = [
    time === target.time ? time : `${time} AS ${target.time}`,
    ...dimensions,
    ...[...states].map(([name, call]) => {
      const open = call.indexOf('(');
      const merged = open < 0 ? `${call}MergeState` : `${call.slice(0, open)}MergeState${call.slice(open)}`;
      return `${merged}(${name}) AS ${name}`;
    }),
  ].join(', ');
  return `INSERT INTO ${target.table} SELECT ${select} FROM ${source.table} WHERE ${condition(time, dimensions, source.time)} GROUP BY ${[target.time, ...dimensions].join(', ')}`;
}

/** The rollup a rollup's rows are merged from by derivedRollupSql, if any. */
export function derivedFrom(view: RollupView): string | undefined {
  return derivation(view)?.source.table;
}

/**
 * The rollups in an order where each comes after the one derivedRollupSql merges it from:
 * by the seconds a row covers, then the most groups first.
 */
export function rollupsFinestFirst(): (typeof SCALED_ROLLUPS)[number][] {
  const groups = new Map(aggregateViews().map((view) => [view.view, view.groups.length]));
  return [...SCALED_ROLLUPS].sort((a, b) => a.seconds - b.seconds || (groups.get(b.view) ?? 0) - (groups.get(a.view) ?? 0));
}
