// Analytics over the ClickHouse rollups. Which table answers a query is decided in
// rollup-plan.ts (the coarsest that answers it exactly); the SQL is built here.
// Buckets are computed from epoch seconds so they are UTC whatever the server's
// time zone. Every value is a string literal or a number we produced: ClickHouse
// 18.16 has no query parameters.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { clickhouseErrorCode } from '@otm/shared/clickhouse-errors';
import { sqlString } from '@otm/shared/clickhouse-values';
import { BACKFILL_GENERATIONS, backfilledMigrations } from '@otm/shared/rollups/backfill';
import { readDayState } from '@otm/shared/rollups/day-levels';
import { USAGE_MEASURES, type RollupMigration } from '@otm/shared/rollups/views';
import { ENVIRONMENTS, parseTimestamp } from '@otm/schemas';
import { histogramTables, planQuery, type Piece } from './rollup-plan.js';
import { bucketValue } from '@otm/shared/rollups/histogram';
import type { FromSchema } from 'json-schema-to-ts';

/** Seconds in a UTC day. */
const DAY_S = 86_400;

const BUCKET_NAMES = ['minute', 'hour', 'day', 'none'] as const;
export type Bucket = (typeof BUCKET_NAMES)[number];
/** Seconds per time bucket; `none` is one row for the whole range. */
export const BUCKETS: Record<Bucket, number> = { minute: 60, hour: 3600, day: 86400, none: 0 };

/** Dimensions: API name -> rollup column. */
export const DIMENSIONS = {
  environment: 'environment',
  provider: 'provider',
  model: 'model_id',
  userType: 'user_type',
  userId: 'user_id',
  keyId: 'api_key_id',
} as const;
export type Dimension = keyof typeof DIMENSIONS;
export const ERROR_DIMENSIONS = ['environment', 'provider', 'model', 'errorCode', 'errorMessage'] as const;
export type ErrorDimension = (typeof ERROR_DIMENSIONS)[number];
const ERROR_COLUMNS: Record<ErrorDimension, string> = {
  environment: 'environment',
  provider: 'provider',
  model: 'model_id',
  errorCode: 'error_code',
  errorMessage: 'error_message',
};

export const MAX_ROWS = 10_000;

export interface AnalyticsQuery {
  from: Date;
  to: Date;
  bucket: Bucket;
  groupBy: string[];
  filters: Partial<Record<string, string>>;
  limit: number;
  orderBy?: string;
  /** The request's id, given to ClickHouse as the query id: system.query_log finds the query by it. */
  queryId?: string;
}

/** JSON Schema of the query string, shared by every analytics route (Fastify validates it). */
export const analyticsQuerySchema = {
  type: 'object',
  additionalProperties: false,
  properties: {
    from: { type: 'string', maxLength: 40 },
    to: { type: 'string', maxLength: 40 },
    since: { type: 'string', pattern: '^[0-9]{1,4}[mhd]$' },
    bucket: { type: 'string', enum: BUCKET_NAMES },
    groupBy: { type: 'string', maxLength: 200 },
    limit: { type: 'integer', minimum: 1, maximum: MAX_ROWS },
    orderBy: { type: 'string', enum: ['requests', 'totalTokens', 'costUsd', 'errors'] },
    environment: { type: 'string', enum: [...ENVIRONMENTS] },
    provider: { type: 'string', maxLength: 1024 },
    model: { type: 'string', maxLength: 1024 },
    userType: { type: 'string', enum: ['external', 'internal'] },
    userId: { type: 'string', maxLength: 1024 },
    keyId: { type: 'string', maxLength: 64 },
  },
} as const;

/**
 * The query string as Fastify hands it over after validating it against the route's
 * schema: the type is derived from the schema itself (json-schema-to-ts), never
 * written beside it. The error route's schema differs only in its filters.
 */
export type RawQuery = FromSchema<typeof analyticsQuerySchema> & { errorCode?: string };

export class QueryError extends Error {
  constructor(
    readonly path: string,
    message: string,
  ) {
    super(message);
  }
}

const UNIT_MS = { m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

export function parseSince(since: string): number {
  const unit = since.slice(-1) as keyof typeof UNIT_MS;
  return Number(since.slice(0, -1)) * UNIT_MS[unit];
}

/** Turns validated query-string values into a query; throws QueryError on a bad combination. */
export function parseAnalyticsQuery(raw: RawQuery, allowed: readonly string[], now = Date.now()): AnalyticsQuery {
  // RFC 3339 only (with a zone): `2026`, `11/22/2026` or a bare date are refused, not guessed.
  const instant = (text: string, path: string) => {
    const at = parseTimestamp(text);
    if (at === null) throw new QueryError(path, 'must be an RFC 3339 date-time with a time zone');
    return new Date(at);
  };
  const to = raw.to ? instant(raw.to, '/to') : new Date(now);
  let from: Date;
  if (raw.from) {
    from = instant(raw.from, '/from');
  } else {
    from = new Date(to.getTime() - (raw.since ? parseSince(raw.since) : 86_400_000));
  }
  if (from >= to) throw new QueryError('/from', 'must be before to');
  if (to.getTime() - from.getTime() > 400 * 86_400_000) throw new QueryError('/from', 'the range may span at most 400 days');
  const bucket = raw.bucket ?? 'hour';
  if (bucket === 'minute' && to.getTime() - from.getTime() > 7 * 86_400_000) {
    throw new QueryError('/bucket', 'minute buckets cover at most 7 days; use hour or day');
  }
  const groupBy = raw.groupBy
    ? raw.groupBy
        .split(',')
        .map((item) => item.trim())
        .filter(Boolean)
    : [];
  for (const item of groupBy) {
    if (!allowed.includes(item)) throw new QueryError('/groupBy', `unknown dimension "${item}"; one of ${allowed.join(', ')}`);
  }
  if (new Set(groupBy).size !== groupBy.length || groupBy.length > 3) throw new QueryError('/groupBy', 'at most 3 distinct dimensions');
  const filters: Partial<Record<string, string>> = {};
  for (const name of allowed) {
    const value = (raw as Record<string, unknown>)[name];
    if (typeof value === 'string') filters[name] = value;
  }
  return { from, to, bucket, groupBy, filters, limit: raw.limit ?? 1000, orderBy: raw.orderBy };
}

/**
 * One query over a rollup table: the time range and filters, the time bucket and the
 * dimensions grouped by, the measures, the order and the limit. Every analytics
 * route's SQL is built here and only here (unit-tested in analytics.test.ts).
 */
export interface RollupQuery {
  table: 'usage_rollup_minute' | 'usage_errors_minute';
  /** Dimension and filter names to the table's columns. */
  columns: Record<string, string>;
  /** The SELECT list of measures (aggregate-state merges with their names). */
  measures: string;
  query: AnalyticsQuery;
  /** ORDER BY, given what is grouped by (`bucket` first when there are buckets). */
  order: (group: readonly string[]) => string;
}

/** Grouped: by the groups (time first); otherwise by `measure`, largest first. */
const byGroupsElse = (measure: string) => (group: readonly string[]) => (group.length ? group.join(', ') : `${measure} DESC`);

export function rollupSql(spec: RollupQuery): string {
  const { query, columns } = spec;
  const seconds = BUCKETS[query.bucket];
  const bucketSelect = seconds === 0 ? '' : `intDiv(toUInt32(minute), ${seconds}) * ${seconds} AS bucket, `;
  const group = [...(seconds === 0 ? [] : ['bucket']), ...query.groupBy];
  const dimensions = query.groupBy.map((name) => `${columns[name]} AS ${name}, `).join('');
  const conditions = [
    `minute >= toDateTime(${Math.floor(query.from.getTime() / 1000)})`,
    `minute < toDateTime(${Math.ceil(query.to.getTime() / 1000)})`,
  ];
  for (const [name, value] of Object.entries(query.filters)) {
    if (value !== undefined) conditions.push(`${columns[name]} = ${sqlString(value)}`);
  }
  return [
    `SELECT ${bucketSelect}${dimensions}${spec.measures.trim()}`,
    `FROM ${spec.table} WHERE ${conditions.join(' AND ')}`,
    ...(group.length ? [`GROUP BY ${group.join(', ')}`] : []),
    `ORDER BY ${spec.order(group)} LIMIT ${query.limit}`,
  ].join(' ');
}

/**
 * A query over pieces of rollups (rollup-plan.ts): each table's pieces are one branch
 * of a UNION ALL selecting the time, the dimensions needed and the aggregate states;
 * the outer query buckets and merges them as one.
 */
export interface PiecesQuery {
  pieces: readonly Piece[];
  columns: Record<string, string>;
  /** The aggregate-state columns the measures merge. */
  states: readonly string[];
  measures: string;
  query: AnalyticsQuery;
  order: (group: readonly string[]) => string;
  /** Conditions added to every branch (the second step of a top-N query). */
  where?: readonly string[];
}

export function piecesSql(spec: PiecesQuery): string {
  const { query, columns } = spec;
  const seconds = BUCKETS[query.bucket];
  const bucketSelect = seconds === 0 ? '' : `intDiv(toUInt32(t), ${seconds}) * ${seconds} AS bucket, `;
  const group = [...(seconds === 0 ? [] : ['bucket']), ...query.groupBy];
  const dimensionColumns = [...new Set(query.groupBy.map((name) => columns[name]!))];
  const dimensions = query.groupBy.map((name) => `${columns[name]} AS ${name}, `).join('');
  return [
    `SELECT ${bucketSelect}${dimensions}${spec.measures.trim()}`,
    `FROM (${unionSql(spec.pieces, [...dimensionColumns, ...spec.states], query, columns, spec.where)})`,
    ...(group.length ? [`GROUP BY ${group.join(', ')}`] : []),
    `ORDER BY ${spec.order(group)} LIMIT ${query.limit}`,
  ].join(' ');
}

/**
 * A latency query over pieces of the histograms (rollup-plan.ts): each piece's latency
 * table and its time to first token twin are branches of one UNION ALL whose rows are
 * (time, dimensions, metric: 0 latency or 1 time to first token, the bucket as `b`, its
 * count as `n`, output tokens per second as a state; empty on the twin's rows); the outer
 * query adds the counts up per bucket and reads the percentiles from their running sum.
 */
export function histogramSql(spec: {
  pieces: readonly Piece[];
  measures: string;
  query: AnalyticsQuery;
  order: (group: readonly string[]) => string;
}): string {
  const { query } = spec;
  const columns = DIMENSIONS as Record<string, string>;
  const seconds = BUCKETS[query.bucket];
  const bucketSelect = seconds === 0 ? '' : `intDiv(toUInt32(t), ${seconds}) * ${seconds} AS bucket, `;
  const group = [...(seconds === 0 ? [] : ['bucket']), ...query.groupBy];
  const dimensionColumns = [...new Set(query.groupBy.map((name) => columns[name]!))];
  const dimensions = query.groupBy.map((name) => `${columns[name]} AS ${name}, `).join('');
  const twin = spec.pieces.map((piece) => ({ ...piece, table: histogramTables(piece.table).ttft }));
  const latency = unionSql(
    spec.pieces,
    [...dimensionColumns, 'toUInt8(0) AS metric', 'bucket AS b', 'finalizeAggregation(requests) AS n', 'tokens_per_sec'],
    query,
    columns,
  );
  const ttft = unionSql(
    twin,
    [
      ...dimensionColumns,
      'toUInt8(1) AS metric',
      'bucket AS b',
      'finalizeAggregation(requests) AS n',
      `arrayReduce('avgIfState', [toFloat64(0)], [toUInt8(0)]) AS tokens_per_sec`,
    ],
    query,
    columns,
  );
  return [
    `SELECT ${bucketSelect}${dimensions}${spec.measures.trim()}`,
    `FROM (${latency} UNION ALL ${ttft})`,
    ...(group.length ? [`GROUP BY ${group.join(', ')}`] : []),
    `ORDER BY ${spec.order(group)} LIMIT ${query.limit}`,
  ].join(' ');
}

/**
 * The rows of the pieces: one branch per table, each selecting the time (as `t`) and
 * `select`, filtered by the query's filters and `where`.
 */
function unionSql(
  pieces: readonly Piece[],
  select: readonly string[],
  query: AnalyticsQuery,
  columns: Record<string, string>,
  where: readonly string[] = [],
): string {
  const filters = Object.entries(query.filters)
    .filter(([, value]) => value !== undefined)
    .map(([name, value]) => `${columns[name]} = ${sqlString(value!)}`)
    .concat(where);
  const tables = [...new Set(pieces.map((piece) => piece.table))];
  return tables
    .map((table) => {
      const own = pieces.filter((piece) => piece.table === table);
      const time = own[0]!.time;
      const ranges = own.map((piece) => `(${time} >= toDateTime(${piece.fromS}) AND ${time} < toDateTime(${piece.toS}))`).join(' OR ');
      return `SELECT ${[`${time} AS t`, ...select].join(', ')} FROM ${table} WHERE (${ranges})${filters.map((filter) => ` AND ${filter}`).join('')}`;
    })
    .join(' UNION ALL ');
}

/** One user's records (usage_events_by_user), aggregated as they are read. */
export function byUserSql(spec: {
  measures: string;
  query: AnalyticsQuery;
  fromS: number;
  toS: number;
  order: (group: readonly string[]) => string;
}): string {
  const { query } = spec;
  const seconds = BUCKETS[query.bucket];
  const bucketSelect = seconds === 0 ? '' : `intDiv(toUInt32(event_time), ${seconds}) * ${seconds} AS bucket, `;
  const group = [...(seconds === 0 ? [] : ['bucket']), ...query.groupBy];
  const conditions = [`event_time >= toDateTime(${spec.fromS})`, `event_time < toDateTime(${spec.toS})`];
  for (const [name, value] of Object.entries(query.filters)) {
    if (value !== undefined) conditions.push(`${DIMENSIONS[name as Dimension]} = ${sqlString(value)}`);
  }
  const dimensions = query.groupBy.map((name) => `${DIMENSIONS[name as Dimension]} AS ${name}, `).join('');
  return [
    `SELECT ${bucketSelect}${dimensions}${spec.measures.trim()}`,
    `FROM usage_events_by_user WHERE ${conditions.join(' AND ')}`,
    ...(group.length ? [`GROUP BY ${group.join(', ')}`] : []),
    `ORDER BY ${spec.order(group)} LIMIT ${query.limit}`,
  ].join(' ');
}

/** The range in whole minutes as the minute rollups count it: minutes starting at or after from, before to. */
export function minuteRange(query: AnalyticsQuery): { fromS: number; toS: number } {
  return { fromS: Math.ceil(query.from.getTime() / 60_000) * 60, toS: Math.ceil(query.to.getTime() / 60_000) * 60 };
}

type Row = Record<string, string | number | number[] | null>;

/** What one analytics query may cost (ANALYTICS_QUERY_TIMEOUT_MS, ANALYTICS_MAX_ROWS_TO_READ). */
export interface QueryLimits {
  timeoutMs: number;
  /** Rows ClickHouse may read for one query; 0: no limit. */
  maxRowsToRead: number;
  /**
   * Groups one thread of a query aggregates in a plain hash table before it switches to
   * a two-level one (ClickHouse group_by_two_level_threshold; ANALYTICS_GROUP_BY_TWO_LEVEL_THRESHOLD).
   */
  twoLevelGroups?: number;
  /**
   * ClickHouse's priority of the query (its `priority` setting; ANALYTICS_CLICKHOUSE_PRIORITY):
   * queries of a larger number wait while it runs. 0 or absent: none.
   */
  priority?: number;
}

/**
 * ClickHouse's own default switches at 100,000 groups, where a month of users sits: top
 * users over 24 hours took 34 ms at 100 M events (every user active, two days of
 * per-user rows) against 20 ms at 10 M, and 22 ms at 100 M with the plain table; over 30
 * days 87 against 70 ms (two cores: merging two plain tables costs less than converting
 * them). A machine with many cores may want two-level tables sooner (docs/analytics-api.md).
 */
export const TWO_LEVEL_GROUPS = 1_000_000;

/** Where analytics read, and what each query may cost. */
export interface AnalyticsStore {
  clickhouse: ClickHouseClient;
  limits: QueryLimits;
  /** The migrations whose rollups hold every stored record (their backfill has finished). */
  backfilled(): Promise<ReadonlySet<RollupMigration>>;
}

/**
 * The migrations whose rollups' backfill has finished, asked of ClickHouse at most every
 * 30 s (none while it cannot be asked). Once every one has, the answer stays.
 */
export function backfillState(clickhouse: ClickHouseClient, everyMs = 30_000): () => Promise<ReadonlySet<RollupMigration>> {
  let known: ReadonlySet<RollupMigration> = new Set();
  let askedAt = -Infinity;
  return async () => {
    if (known.size === BACKFILL_GENERATIONS.length || Date.now() - askedAt < everyMs) return known;
    askedAt = Date.now();
    known = await backfilledMigrations(clickhouse).catch(() => known);
    return known;
  };
}

const NARROW =
  'narrow it: a shorter range (from/to or since), a coarser bucket, a filter (environment, provider, model, keyId, userId) or fewer groupBy dimensions';

/** A query stopped at its execution limit: answered 504 QueryTimeout with what to narrow. */
export class QueryLimitExceeded extends Error {}

/** ClickHouse's codes for a query stopped by a limit: TOO_MANY_ROWS, TIMEOUT_EXCEEDED, TOO_SLOW, TOO_MANY_BYTES. */
const LIMIT_CODES = new Map([
  [158, 'rows'],
  [159, 'time'],
  [160, 'time'],
  [307, 'rows'],
]);

async function run(store: AnalyticsStore, sql: string, queryId?: string): Promise<Row[]> {
  const { timeoutMs, maxRowsToRead, twoLevelGroups = TWO_LEVEL_GROUPS, priority = 0 } = store.limits;
  const seconds = Math.max(1, Math.ceil(timeoutMs / 1000));
  // ClickHouse stops the query at the limit; the client gives up 2 s later, in case
  // the server cannot answer at all (it still answers 504, never drops the request).
  const abort = AbortSignal.timeout(seconds * 1000 + 2000);
  try {
    const result = await store.clickhouse.query({
      query: sql,
      format: 'JSONEachRow',
      abort_signal: abort,
      ...(queryId ? { query_id: queryId } : {}),
      clickhouse_settings: {
        output_format_json_quote_64bit_integers: 0,
        // Every analytics query in system.query_log, under the request's id: what it read and how long it took.
        log_queries: 1,
        max_execution_time: seconds,
        timeout_overflow_mode: 'throw',
        group_by_two_level_threshold: String(twoLevelGroups),
        ...(maxRowsToRead > 0 ? { max_rows_to_read: String(maxRowsToRead), read_overflow_mode: 'throw' } : {}),
        ...(priority > 0 ? { priority: String(priority) } : {}),
      },
    });
    return await result.json<Row>();
  } catch (error) {
    const kind = abort.aborted ? 'time' : LIMIT_CODES.get(clickhouseErrorCode(error) ?? -1);
    if (kind === 'time') throw new QueryLimitExceeded(`The query ran past its limit of ${seconds} s; ${NARROW}.`);
    if (kind === 'rows') throw new QueryLimitExceeded(`The query would read more than ${maxRowsToRead} rows; ${NARROW}.`);
    throw error;
  }
}

function shape(rows: Row[]): Row[] {
  return rows.map((row) => {
    const out: Row = {};
    for (const [key, value] of Object.entries(row)) {
      if (key === 'bucket') out.bucket = new Date(Number(value) * 1000).toISOString() as never;
      else out[key] = value;
    }
    return out;
  });
}

export const USAGE_SQL = `
    countMerge(requests) AS requests,
    countIfMerge(successes) AS successes,
    countIfMerge(errors) AS errors,
    sumMerge(input_tokens) AS inputTokens,
    sumMerge(output_tokens) AS outputTokens,
    sumMerge(total_tokens) AS totalTokens,
    sumMerge(cached_input_tokens) AS cachedInputTokens,
    sumMerge(cache_write_tokens) AS cacheWriteTokens,
    sumMerge(reasoning_tokens) AS reasoningTokens,
    sumMerge(cache_reported_input_tokens) AS cacheReportedInputTokens,
    sumMerge(cost_usd) AS costUsd,
    countIfMerge(unpriced) AS unpricedRequests`;

/** What a route measures, on each kind of table. */
interface RouteSql {
  route: 'usage' | 'latency' | 'errors';
  columns: Record<string, string>;
  /** Over usage_rollup_minute / usage_errors_minute (before the backfill, and the fallback). */
  legacy: { table: 'usage_rollup_minute' | 'usage_errors_minute'; measures: string };
  /** Over the rollups of migration 0008, and the aggregate states they merge. */
  rollups: { measures: string; states: readonly string[] };
  /** Over the latency histograms of migration 0010 (latency only). */
  histograms?: string;
  /** Over one user's records. */
  byUser?: string;
  order: (group: readonly string[]) => string;
}

/**
 * Plans the query (rollup-plan.ts) and runs it. When the plan counts a wider range
 * than asked (whole days of per-user rollups), the query's from and to are set to the
 * range counted, which the answer reports.
 */
async function runPlanned(store: AnalyticsStore, query: AnalyticsQuery, sql: RouteSql): Promise<Row[]> {
  const { fromS, toS } = minuteRange(query);
  const names = [...new Set([...query.groupBy, ...Object.keys(query.filters).filter((name) => query.filters[name] !== undefined)])];
  const backfilled = await store.backfilled();
  // Which days the day rollups hold (a job builds them: day-levels.ts), asked for a range
  // of a day or more, or of daily buckets (latency widens to whole days), a day wider each side.
  const days =
    (toS - fromS >= DAY_S || BUCKETS[query.bucket] === DAY_S) && backfilled.has('0008')
      ? await readDayState(store.clickhouse, Math.floor(fromS / DAY_S) * DAY_S - DAY_S, Math.ceil(toS / DAY_S) * DAY_S + DAY_S)
      : undefined;
  const planned = planQuery({
    route: sql.route,
    bucketSeconds: BUCKETS[query.bucket],
    dimensions: names,
    oneUser: query.filters.userId !== undefined,
    fromS,
    toS,
    backfilled,
    ...(days?.jobBuilt ? { dayBuilt: days.built, weekBuilt: days.weekBuilt } : {}),
  });
  if (planned.fromS !== fromS || planned.toS !== toS) {
    query.from = new Date(planned.fromS * 1000);
    query.to = new Date(planned.toS * 1000);
  }
  const { plan } = planned;
  if (plan.kind === 'legacy') {
    return shape(
      await run(
        store,
        rollupSql({ table: sql.legacy.table, columns: sql.columns, measures: sql.legacy.measures, query, order: sql.order }),
        query.queryId,
      ),
    );
  }
  if (plan.kind === 'byUser') {
    return shape(await run(store, byUserSql({ measures: sql.byUser!, query, fromS, toS, order: sql.order }), query.queryId));
  }
  if (plan.pieces.length === 0) return [];
  if (plan.kind === 'histograms') {
    return shape(
      await run(store, histogramSql({ pieces: plan.pieces, measures: sql.histograms!, query, order: sql.order }), query.queryId),
    );
  }
  const userDays = plan.pieces.every((piece) => USER_ROLLUPS.has(piece.table));
  if (userDays && query.bucket === 'none') return shape(await topUsers(store, query, plan.pieces, sql));
  // The per-user days hold plain sums (SummingMergeTree), not states.
  const measures = userDays ? USER_DAY_SQL : sql.rollups.measures;
  return shape(
    await run(
      store,
      piecesSql({
        pieces: plan.pieces,
        columns: sql.columns,
        states: sql.rollups.states,
        measures,
        query,
        order: sql.order,
      }),
      query.queryId,
    ),
  );
}

/**
 * The per-user days' column of each metric an answer may be ordered by, and whether it is
 * a count (never negative: a group's is at most its user's). Cost is not: an operator's
 * price may be negative.
 */
const USER_DAY_ORDER_COLUMNS: Record<string, { column: string; count: boolean }> = {
  requests: { column: 'requests', count: true },
  totalTokens: { column: 'total_tokens', count: true },
  costUsd: { column: 'cost_usd', count: false },
  errors: { column: 'errors', count: true },
};

/**
 * Users over a range (grouped by user, no time buckets), in two steps over the per-user
 * days: the first reads only the groups and the metric they are ordered by and keeps
 * the candidates; the second sums every measure for those users only. Both steps run
 * under the request's limits; the second carries the request's id (system.query_log),
 * the first the id with `-groups`.
 *
 * Ordered by a metric, the first step groups by a 64-bit hash of the group's columns
 * (cityHash64: hashing 100,000 strings is cheaper than keeping them as hash-table keys)
 * and keeps `candidateCount(limit)` hashes, more than asked; the second step re-orders the
 * exact sums of the groups of those hashes and keeps `limit`. Exact: a group left out is
 * ordered after every group kept, and when the last candidate ties with the limit-th
 * (the tie may go on past the candidates) the first step is asked again by the groups
 * themselves. Two groups sharing a hash only make their hash rank higher; the second
 * step still separates them (the odds of any shared hash among 100,000 users are about
 * 3 in 10 billion).
 *
 * Grouped by the user and more (the user's type, the environment) and ordered by a count
 * (requests, tokens, errors: never negative), the first step hashes the user alone, which
 * reads one string column instead of several: a group's count is at most its user's, so
 * every group left out is at most the last candidate user's count. The answer is kept when
 * its limit-th group is above that bound (`groupsBeyondCandidates`); otherwise the first
 * step is asked again by the groups themselves.
 */
async function topUsers(store: AnalyticsStore, query: AnalyticsQuery, pieces: readonly Piece[], sql: RouteSql): Promise<Row[]> {
  const order = query.orderBy ? USER_DAY_ORDER_COLUMNS[query.orderBy] : undefined;
  const orderColumn = order?.column;
  const groupColumns = query.groupBy.map((name) => sql.columns[name]!);
  const groupsId = query.queryId ? `${query.queryId}-groups` : undefined;
  const second = (where: string) =>
    run(
      store,
      piecesSql({
        pieces,
        columns: sql.columns,
        states: sql.rollups.states,
        measures: USER_DAY_SQL,
        query,
        order: sql.order,
        where: [where],
      }),
      query.queryId,
    );
  if (orderColumn && query.limit <= MAX_HASHED_LIMIT) {
    const byUser = query.groupBy.length > 1 && query.groupBy.includes('userId') && order?.count === true;
    const hashColumns = byUser ? [sql.columns.userId!] : groupColumns;
    const hash = `cityHash64(${hashColumns.join(', ')})`;
    const candidates = candidateCount(query.limit);
    const hashed = await run(
      store,
      `SELECT toString(h) AS h, m FROM (SELECT ${hash} AS h, sum(${orderColumn}) AS m FROM (${unionSql(pieces, [...hashColumns, orderColumn], query, sql.columns)}) GROUP BY h ORDER BY m DESC LIMIT ${candidates})`,
      groupsId,
    );
    if (hashed.length === 0) return [];
    const metrics = hashed.map((row) => Number(row.m));
    const candidatesSql = `${hash} IN (${hashed.map((row) => String(row.h)).join(', ')})`;
    if (byUser) {
      const rows = await second(candidatesSql);
      const answered = rows.map((row) => Number(row[query.orderBy!]));
      if (!groupsBeyondCandidates(answered, metrics, query.limit, candidates)) return rows;
    } else if (!tieSpillsOver(metrics, query.limit, candidates)) {
      return second(candidatesSql);
    }
  }
  const groups = await run(
    store,
    piecesSql({
      pieces,
      columns: sql.columns,
      states: orderColumn ? [orderColumn] : [],
      measures: orderColumn ? `sum(${orderColumn}) AS ${query.orderBy}` : 'count() AS n',
      query,
      order: sql.order,
    }),
    groupsId,
  );
  if (groups.length === 0) return [];
  const tuples = groups.map((row) => `(${query.groupBy.map((name) => sqlString(String(row[name]))).join(', ')})`);
  return second(`(${groupColumns.join(', ')}) IN (${tuples.join(', ')})`);
}

/**
 * Whether a group outside the candidate users may belong in the answer, when the first
 * step ranked users and the answer ranks finer groups: `answered` is the answer's
 * metric per row (largest first, at most `limit`), `userMetrics` the first step's per
 * candidate user (largest first). Not when every user came back; otherwise a group left
 * out counts at most the last candidate user's count, so the answer holds when it is
 * full and its last row counts more than that.
 */
export function groupsBeyondCandidates(
  answered: readonly number[],
  userMetrics: readonly number[],
  limit: number,
  candidates: number,
): boolean {
  if (userMetrics.length < candidates) return false;
  if (answered.length < limit) return true;
  return !(answered[limit - 1]! > userMetrics[userMetrics.length - 1]!);
}

/** Above this limit the first step of top users keeps the groups themselves. */
const MAX_HASHED_LIMIT = 1_000;

/** Hashes the first step of top users keeps for `limit` groups: room for ties and shared hashes. */
export function candidateCount(limit: number): number {
  return limit * 2 + 10;
}

/**
 * Whether groups tying with the limit-th may lie past the candidates (`metrics` in the
 * first step's order, largest first): only when every candidate came back and the last
 * one ties with the limit-th.
 */
export function tieSpillsOver(metrics: readonly number[], limit: number, candidates: number): boolean {
  if (metrics.length < candidates || metrics.length <= limit) return false;
  return metrics[metrics.length - 1] === metrics[limit - 1];
}

/** The per-user days and the weeks summed from them (migration 0015): plain sums, the same columns. */
const USER_ROLLUPS: ReadonlySet<string> = new Set(['usage_rollup_user_by_day', 'usage_rollup_user_by_week']);

/** The usage measures over usage_rollup_user_by_day (and its weeks): plain sums. */
export const USER_DAY_SQL = `
    sum(requests) AS requests,
    sum(successes) AS successes,
    sum(errors) AS errors,
    sum(input_tokens) AS inputTokens,
    sum(output_tokens) AS outputTokens,
    sum(total_tokens) AS totalTokens,
    sum(cached_input_tokens) AS cachedInputTokens,
    sum(cache_write_tokens) AS cacheWriteTokens,
    sum(reasoning_tokens) AS reasoningTokens,
    sum(cache_reported_input_tokens) AS cacheReportedInputTokens,
    sum(cost_usd) AS costUsd,
    sum(unpriced) AS unpricedRequests`;

/** The usage measures over raw records (one user's). */
export const USAGE_RAW_SQL = `
    count() AS requests,
    countIf(status = 'success') AS successes,
    countIf(status = 'error') AS errors,
    sum(ifNull(input_tokens, toUInt64(0))) AS inputTokens,
    sum(ifNull(output_tokens, toUInt64(0))) AS outputTokens,
    sum(total_tokens) AS totalTokens,
    sum(ifNull(cached_input_tokens, toUInt64(0))) AS cachedInputTokens,
    sum(ifNull(cache_write_tokens, toUInt64(0))) AS cacheWriteTokens,
    sum(ifNull(reasoning_tokens, toUInt64(0))) AS reasoningTokens,
    sum(cache_reported_input_tokens) AS cacheReportedInputTokens,
    sum(ifNull(cost_usd, toFloat64(0))) AS costUsd,
    countIf(price_known = 0) AS unpricedRequests`;

export async function usageAnalytics(store: AnalyticsStore, query: AnalyticsQuery): Promise<Row[]> {
  const rows = await runPlanned(store, query, {
    route: 'usage',
    columns: DIMENSIONS,
    legacy: { table: 'usage_rollup_minute', measures: USAGE_SQL },
    rollups: { measures: USAGE_SQL, states: USAGE_MEASURES },
    byUser: USAGE_RAW_SQL,
    // Ordered by a metric: ties in the groups' order, so the same query gives the same rows.
    order: (group) => (query.orderBy ? [`${query.orderBy} DESC`, ...group].join(', ') : byGroupsElse('requests')(group)),
  });
  return rows.map(({ cacheReportedInputTokens, ...row }) => ({
    ...row,
    // Cache reads over the input of the records that report cache reads (docs/tokens.md); null when none do.
    cacheHitRatio: Number(cacheReportedInputTokens) > 0 ? Number(row.cachedInputTokens) / Number(cacheReportedInputTokens) : null,
    errorRate: Number(row.requests) > 0 ? Number(row.errors) / Number(row.requests) : 0,
    unknownPriceShare: Number(row.requests) > 0 ? Number(row.unpricedRequests) / Number(row.requests) : 0,
  }));
}

/**
 * The (provider, model) pairs that went unpriced in the range, the most unpriced
 * requests first, with their requests: what an operator adds to the price overrides
 * (docs/pricing.md). Usage grouped by provider and model over the whole range.
 */
export async function unpricedAnalytics(store: AnalyticsStore, query: AnalyticsQuery): Promise<Row[]> {
  query.bucket = 'none';
  query.groupBy = ['provider', 'model'];
  query.orderBy = 'unpricedRequests';
  const rows = await usageAnalytics(store, query);
  return rows
    .filter((row) => Number(row.unpricedRequests) > 0)
    .map(({ provider, model, unpricedRequests, requests }) => ({ provider, model, unpricedRequests, requests }) as Row);
}

/** Latency over usage_rollup_minute: its quantile states (reservoir samples of up to 8,192 values each). */
export const LATENCY_SQL = `
    countMerge(requests) AS requests,
    quantilesIfMerge(0.5, 0.9, 0.99)(latency_ms) AS latency,
    quantilesIfMerge(0.5, 0.9, 0.99)(ttft_ms) AS ttft,
    avgIfMerge(tokens_per_sec) AS outputTokensPerSec`;

/** Latency over the rollups of migration 0008: t-digest states. */
export const LATENCY_TDIGEST_SQL = `
    countMerge(requests) AS requests,
    quantilesTDigestIfMerge(0.5, 0.9, 0.99)(latency_ms) AS latency,
    quantilesTDigestIfMerge(0.5, 0.9, 0.99)(ttft_ms) AS ttft,
    avgIfMerge(tokens_per_sec) AS outputTokensPerSec`;

/**
 * Latency over the histograms of migration 0010: the percentiles as buckets (the first
 * bucket whose running sum reaches the rank; bucketValue turns them into milliseconds),
 * with the count of values each was read from (none: no percentile).
 */
export const LATENCY_HISTOGRAM_SQL = `
    sumIf(n, metric = 0) AS requests,
    quantilesExactWeightedIf(0.5, 0.9, 0.99)(b, n, metric = 0 AND b > 0) AS latencyBuckets,
    quantilesExactWeightedIf(0.5, 0.9, 0.99)(b, n, metric = 1 AND b > 0) AS ttftBuckets,
    sumIf(n, metric = 0 AND b > 0) AS latencyValues,
    sumIf(n, metric = 1 AND b > 0) AS ttftValues,
    avgIfMerge(tokens_per_sec) AS outputTokensPerSec`;

/** Latency over one user's records: t-digest as the rollups, computed as they are read. */
export const LATENCY_RAW_SQL = `
    count() AS requests,
    quantilesTDigestIf(0.5, 0.9, 0.99)(ifNull(latency_ms, toUInt64(0)), isNotNull(latency_ms)) AS latency,
    quantilesTDigestIf(0.5, 0.9, 0.99)(ifNull(ttft_ms, toUInt64(0)), isNotNull(ttft_ms)) AS ttft,
    avgIf(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS outputTokensPerSec`;

export async function latencyAnalytics(store: AnalyticsStore, query: AnalyticsQuery): Promise<Row[]> {
  const rows = await runPlanned(store, query, {
    route: 'latency',
    columns: DIMENSIONS,
    legacy: { table: 'usage_rollup_minute', measures: LATENCY_SQL },
    rollups: { measures: LATENCY_TDIGEST_SQL, states: ['requests', 'latency_ms', 'ttft_ms', 'tokens_per_sec'] },
    histograms: LATENCY_HISTOGRAM_SQL,
    byUser: LATENCY_RAW_SQL,
    order: byGroupsElse('requests'),
  });
  return rows.map(({ latency, ttft, outputTokensPerSec, latencyBuckets, ttftBuckets, latencyValues, ttftValues, ...rest }) => {
    if (latencyBuckets !== undefined) {
      // From the histograms: buckets to milliseconds, none when no record had a value.
      const values = (buckets: unknown, count: unknown) =>
        Number(count) > 0 ? (buckets as number[]).map((bucket) => bucketValue(bucket) ?? Number.NaN) : [];
      latency = values(latencyBuckets, latencyValues);
      ttft = values(ttftBuckets, ttftValues);
    }
    const [l50, l90, l99] = (latency as number[]) ?? [];
    const [t50, t90, t99] = (ttft as number[]) ?? [];
    const finite = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : null);
    return {
      ...rest,
      latencyP50Ms: finite(l50),
      latencyP90Ms: finite(l90),
      latencyP99Ms: finite(l99),
      ttftP50Ms: finite(t50),
      ttftP90Ms: finite(t90),
      ttftP99Ms: finite(t99),
      outputTokensPerSec: finite(outputTokensPerSec),
    };
  });
}

export async function errorAnalytics(store: AnalyticsStore, query: AnalyticsQuery): Promise<Row[]> {
  return runPlanned(store, query, {
    route: 'errors',
    columns: ERROR_COLUMNS,
    legacy: { table: 'usage_errors_minute', measures: 'countMerge(errors) AS errors' },
    rollups: { measures: 'countMerge(errors) AS errors', states: ['errors'] },
    // One table of errors per code when not over time: the most frequent first.
    order: (group) => (query.bucket === 'none' ? 'errors DESC' : byGroupsElse('errors')(group)),
  });
}

export const USAGE_DIMENSIONS = Object.keys(DIMENSIONS);
