// Re-costing (docs/privacy.md, "Re-costing"): prices change and price tables get
// corrected. recost() recomputes cost_usd, price_known and price_table_version of the
// stored rows of a time range with a price table, and rebuilds the rollup rows of
// that range from them. Idempotent: a second run with the same table changes nothing.
//
// The range is widened to whole minutes (the minute rollups' bucket); the rollups of
// migration 0008 are rebuilt over the whole UTC days around it (their hours and days
// hold rows of the range and beside it, all rebuilt from usage_events). While the job
// runs those days are fenced (fence.ts): an ingester holding a record of them waits,
// so a row is never counted both by a materialized view and by the rebuild. Re-cost
// past ranges: a range reaching today holds today's records until it is done.
import type { ClickHouseClient } from '../clickhouse.js';
import { formatDateTime, sqlString } from '../clickhouse-values.js';
import type { RollupFence, FenceInterval } from './fence.js';
import { mutate } from '../mutations.js';
import { LEGACY_ROLLUP_VIEW, SCALED_ROLLUPS, aggregateViews, rebuildRollupSql } from './views.js';
import { isBackfilled } from './backfill.js';
import { costSql, knownSql, type PriceLookup, type PriceSchedule } from '../price.js';

export interface RecostScope {
  fromMs: number;
  toMs: number;
  provider?: string;
  model?: string;
}

export interface RecostPair {
  provider: string;
  model: string;
  rows: number;
  /** The prices applied (null when the book has none: cost becomes empty, the rows unpriced). */
  schedule: PriceSchedule | null;
  /** Rows whose cost or pricedness the new prices change. */
  rowsChanged: number;
  /** Sum of cost_usd over the pair's rows before and after (null costs count as 0), to a billionth of a dollar. */
  costBefore: number;
  costAfter: number;
}

export interface RecostOutcome {
  fromMs: number;
  toMs: number;
  priceTableVersion: string;
  pairs: RecostPair[];
  rows: number;
  rowsChanged: number;
  costBefore: number;
  costAfter: number;
}

const MINUTE_MS = 60_000;
const DAY_MS = 86_400_000;
/** A sum of float costs depends on the order it was added in (which differs between
 * ClickHouse releases and runs): reported to a billionth of a dollar, it does not. */
const nanoUsd = (value: number) => Math.round(value * 1e9) / 1e9;

export async function recost(
  clickhouse: ClickHouseClient,
  fence: Pick<RollupFence, 'fence' | 'liftFence' | 'waitForInsertsInFlight'>,
  prices: PriceLookup,
  scope: RecostScope,
  options: { dryRun?: boolean; mutationTimeoutMs?: number; cluster?: string } = {},
): Promise<RecostOutcome> {
  const fromMs = Math.floor(scope.fromMs / MINUTE_MS) * MINUTE_MS;
  const toMs = Math.ceil(scope.toMs / MINUTE_MS) * MINUTE_MS;
  if (!(fromMs < toMs)) throw new Error('the range is empty: --from must be before --to');
  // The pair the scope names, by the column each condition reads.
  const pairOnly = [
    ...(scope.provider !== undefined ? [{ column: 'provider', condition: `provider = ${sqlString(scope.provider)}` }] : []),
    ...(scope.model !== undefined ? [{ column: 'model_id', condition: `model_id = ${sqlString(scope.model)}` }] : []),
  ];
  const where = [
    `event_time >= toDateTime(${sqlString(formatDateTime(fromMs))})`,
    `event_time < toDateTime(${sqlString(formatDateTime(toMs))})`,
    ...pairOnly.map(({ condition }) => condition),
  ].join(' AND ');
  const rows = async <T>(query: string) => (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();

  const found = await rows<{ provider: string; model_id: string; n: string }>(
    `SELECT provider, model_id, count() AS n FROM usage_events WHERE ${where} GROUP BY provider, model_id ORDER BY provider, model_id`,
  );
  const schedules = found.map((row) => prices.find(row.provider, row.model_id) ?? null);
  // The cost and pricedness under the new prices, pair by pair: costSql() computes what
  // the ingester's costUsd() does, at each row's event time.
  const priced = found.flatMap((row, index) => (schedules[index] ? [{ row, schedule: schedules[index] }] : []));
  const isPair = (row: { provider: string; model_id: string }) =>
    `(provider = ${sqlString(row.provider)} AND model_id = ${sqlString(row.model_id)})`;
  const cost =
    priced.length === 0
      ? 'CAST(NULL AS Nullable(Float64))'
      : `multiIf(${priced.map(({ row, schedule }) => `${isPair(row)}, ${costSql(schedule)}`).join(', ')}, CAST(NULL AS Nullable(Float64)))`;
  const known =
    priced.length === 0
      ? 'toUInt8(0)'
      : `toUInt8(multiIf(${priced.map(({ row, schedule }) => `${isPair(row)}, ${knownSql(schedule)}`).join(', ')}, 0))`;

  // What the new prices change, per pair (also what a dry run shows).
  const changes =
    found.length === 0
      ? []
      : await rows<{ provider: string; model_id: string; changed: string; before: number; after: number }>(
          `SELECT provider, model_id,
             countIf(isNull(new_cost) != isNull(cost_usd) OR abs(ifNull(new_cost, 0) - ifNull(cost_usd, 0)) > 1e-12 OR new_known != price_known) AS changed,
             sum(ifNull(cost_usd, 0)) AS before, sum(ifNull(new_cost, 0)) AS after
           FROM (SELECT provider, model_id, cost_usd, price_known, ${cost} AS new_cost, ${known} AS new_known FROM usage_events WHERE ${where})
           GROUP BY provider, model_id`,
        );
  const changeOf = new Map(changes.map((row) => [`${row.provider}\u0000${row.model_id}`, row]));
  const pairs: RecostPair[] = found.map((row, index) => {
    const change = changeOf.get(`${row.provider}\u0000${row.model_id}`);
    return {
      provider: row.provider,
      model: row.model_id,
      rows: Number(row.n),
      schedule: schedules[index] ?? null,
      rowsChanged: Number(change?.changed ?? 0),
      costBefore: nanoUsd(Number(change?.before ?? 0)),
      costAfter: nanoUsd(Number(change?.after ?? 0)),
    };
  });
  const total = (pick: (pair: RecostPair) => number) => pairs.reduce((sum, pair) => sum + pick(pair), 0);
  const outcome: RecostOutcome = {
    fromMs,
    toMs,
    priceTableVersion: prices.version,
    pairs,
    rows: total((pair) => pair.rows),
    rowsChanged: total((pair) => pair.rowsChanged),
    costBefore: nanoUsd(total((pair) => pair.costBefore)),
    costAfter: nanoUsd(total((pair) => pair.costAfter)),
  };
  if (options.dryRun || pairs.length === 0) return outcome;

  const dayFromS = Math.floor(fromMs / DAY_MS) * 86_400;
  const dayToS = Math.ceil(toMs / DAY_MS) * 86_400;
  const wanted: FenceInterval = { kind: 'all', fromMs: dayFromS * 1000, toMs: dayToS * 1000 };
  const held = await fence.fence([wanted]);
  try {
    await fence.waitForInsertsInFlight();
    const update = `UPDATE cost_usd = ${cost}, price_known = ${known}, price_table_version = ${sqlString(prices.version)} WHERE ${where}`;
    await mutate(clickhouse, 'usage_events', update, options.mutationTimeoutMs, options.cluster);
    // The copy ordered by user (migration 0008) has no price_table_version: the rest is the same.
    await mutate(
      clickhouse,
      'usage_events_by_user',
      `UPDATE cost_usd = ${cost}, price_known = ${known} WHERE ${where}`,
      options.mutationTimeoutMs,
      options.cluster,
    );
    // The legacy minute rollup, while the API still reads it (before 0008's backfill has
    // finished): the view's own SELECT (migration 0002) over the range, so it counts as the view does.
    if (!(await isBackfilled(clickhouse))) {
      const rollupWhere = where.replaceAll('event_time', 'minute');
      await mutate(clickhouse, 'usage_rollup_minute', `DELETE WHERE ${rollupWhere}`, options.mutationTimeoutMs, options.cluster);
      await clickhouse.command({ query: rebuildRollupSql(LEGACY_ROLLUP_VIEW, where) });
    }
    // The rollups of migrations 0008 and 0011 that carry cost, over the whole days: those
    // grouped by what the scope names (provider, model) for that pair only, the others
    // (the key totals, the per-user days) entirely.
    const views = aggregateViews();
    for (const { view, table, time, kind } of SCALED_ROLLUPS) {
      // Only the usage rollups carry cost.
      if (kind !== 'usage') continue;
      const groups = views.find((candidate) => candidate.view === view)?.groups ?? [];
      const byPair = pairOnly.every(({ column }) => groups.some((group) => group.name === column && group.expression === column))
        ? pairOnly.map(({ condition }) => condition)
        : [];
      const days = (column: string) =>
        [`${column} >= toDateTime(${dayFromS})`, `${column} < toDateTime(${dayToS})`, ...byPair].join(' AND ');
      await mutate(clickhouse, table, `DELETE WHERE ${days(time)}`, options.mutationTimeoutMs, options.cluster);
      await clickhouse.command({ query: rebuildRollupSql(view, days('event_time')) });
    }
  } finally {
    await fence.liftFence(held);
  }
  return outcome;
}
