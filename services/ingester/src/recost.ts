// Re-costing (docs/privacy.md, "Re-costing"): prices change and price tables get
// corrected. recost() recomputes cost_usd, price_known and price_table_version of the
// stored rows of a time range with a price table, and rebuilds the rollup rows of
// that range from them. Idempotent: a second run with the same table changes nothing.
//
// The range is widened to whole minutes (the rollups' bucket). While the job runs the
// range is fenced (erasures.ts): an ingester holding a record of it waits, so a row
// is never counted both by the materialized view and by the rebuild. Re-cost past
// ranges: a range reaching the present holds the current records until it is done.
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { formatDateTime, sqlString } from '@otm/shared/clickhouse-values';
import type { ErasureStore, FenceInterval } from '@otm/shared/erasures';
import { mutate } from '@otm/shared/mutations';
import { rebuildRollupSql } from '@otm/shared/rollup-views';
import type { Price, PriceTable } from './prices.js';

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
  /** USD per million tokens under the table used, or null when the table has no price. */
  price: Price | null;
}

export interface RecostOutcome {
  fromMs: number;
  toMs: number;
  priceTableVersion: string;
  pairs: RecostPair[];
  rows: number;
}

const MINUTE_MS = 60_000;

export async function recost(
  clickhouse: ClickHouseClient,
  fence: Pick<ErasureStore, 'fence' | 'liftFence' | 'waitForInsertsInFlight'>,
  prices: PriceTable,
  scope: RecostScope,
  options: { dryRun?: boolean; mutationTimeoutMs?: number; cluster?: string } = {},
): Promise<RecostOutcome> {
  const fromMs = Math.floor(scope.fromMs / MINUTE_MS) * MINUTE_MS;
  const toMs = Math.ceil(scope.toMs / MINUTE_MS) * MINUTE_MS;
  if (!(fromMs < toMs)) throw new Error('the range is empty: --from must be before --to');
  const where = [
    `event_time >= toDateTime(${sqlString(formatDateTime(fromMs))})`,
    `event_time < toDateTime(${sqlString(formatDateTime(toMs))})`,
    ...(scope.provider !== undefined ? [`provider = ${sqlString(scope.provider)}`] : []),
    ...(scope.model !== undefined ? [`model_id = ${sqlString(scope.model)}`] : []),
  ].join(' AND ');
  const rows = async <T>(query: string) => (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();

  const found = await rows<{ provider: string; model_id: string; n: string }>(
    `SELECT provider, model_id, count() AS n FROM usage_events WHERE ${where} GROUP BY provider, model_id ORDER BY provider, model_id`,
  );
  const pairs: RecostPair[] = found.map((row) => ({
    provider: row.provider,
    model: row.model_id,
    rows: Number(row.n),
    price: prices.find(row.provider, row.model_id) ?? null,
  }));
  const outcome = { fromMs, toMs, priceTableVersion: prices.version, pairs, rows: pairs.reduce((sum, pair) => sum + pair.rows, 0) };
  if (options.dryRun || pairs.length === 0) return outcome;

  // The cost as costUsd() in prices.ts computes it, pair by pair, in the same order of operations.
  const priced = pairs.filter((pair) => pair.price !== null);
  const isPair = (pair: RecostPair) => `(provider = ${sqlString(pair.provider)} AND model_id = ${sqlString(pair.model)})`;
  const input = 'toFloat64(assumeNotNull(input_tokens))';
  const output = 'toFloat64(assumeNotNull(output_tokens))';
  const cached = `least(toFloat64(ifNull(cached_input_tokens, 0)), ${input})`;
  const written = `least(toFloat64(ifNull(cache_write_tokens, 0)), ${input} - ${cached})`;
  const reasoning = `least(toFloat64(ifNull(reasoning_tokens, 0)), ${output})`;
  const costOf = ({ price }: RecostPair) => {
    const p = price!;
    const micro = [
      `(${input} - ${cached} - ${written}) * ${p.input}`,
      `${cached} * ${p.cachedInput ?? p.input}`,
      `${written} * ${p.cacheWrite ?? p.input}`,
      `(${output} - ${reasoning}) * ${p.output}`,
      `${reasoning} * ${p.reasoning ?? p.output}`,
    ].join(' + ');
    return `if(isNull(input_tokens) OR isNull(output_tokens), NULL, (${micro}) / 1000000)`;
  };
  const cost =
    priced.length === 0
      ? 'CAST(NULL AS Nullable(Float64))'
      : `multiIf(${priced.map((pair) => `${isPair(pair)}, ${costOf(pair)}`).join(', ')}, NULL)`;
  const known = priced.length === 0 ? '0' : `multiIf(${priced.map((pair) => `${isPair(pair)}, 1`).join(', ')}, 0)`;

  const interval: FenceInterval = { kind: 'all', fromMs, toMs };
  await fence.fence([interval]);
  try {
    await fence.waitForInsertsInFlight();
    await mutate(
      clickhouse,
      'usage_events',
      `UPDATE cost_usd = ${cost}, price_known = ${known}, price_table_version = ${sqlString(prices.version)} WHERE ${where}`,
      options.mutationTimeoutMs,
      options.cluster,
    );
    const rollupWhere = where.replaceAll('event_time', 'minute');
    await mutate(clickhouse, 'usage_rollup_minute', `DELETE WHERE ${rollupWhere}`, options.mutationTimeoutMs, options.cluster);
    // The view's own SELECT (migration 0002) over the range: it counts as the view does.
    await clickhouse.command({ query: rebuildRollupSql('usage_rollup_minute_mv', where) });
  } finally {
    await fence.liftFence([interval]);
  }
  return outcome;
}
