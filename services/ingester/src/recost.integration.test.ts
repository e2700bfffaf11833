// Re-costing on the real ClickHouse, with an ingester loading the records and
// honouring the fence: a changed price moves the analytics totals of the range by
// the hand-computed amount, nothing outside the range moves, rows carry the table's
// version, and a second run changes nothing.
import { SCALED_ROLLUPS, USAGE_ROLLUP_TABLES } from '@otm/shared/rollups/views';
import { buildEveryDay } from '../../../test/helpers/day-levels.js';
import { afterAll, describe, expect, it } from 'vitest';
import { RollupFence } from '@otm/shared/rollups/fence';
import type { UsageRecord } from '@otm/schemas';
import { queuedRecords } from '../../../test/fixtures/sample-records.js';
import { produceQueued } from '../../../test/helpers/produce.js';
import {
  eventually,
  fixture,
  queryRows,
  startIngester,
  testClickHouse,
  testNames,
  withRedis,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { PriceTable, costUsd } from './prices.js';
import { recost } from '@otm/shared/rollups/recost';

const names = testNames('recost');
const clickhouse = testClickHouse(names.database);
let ingester: ServiceProcess | undefined;
afterAll(async () => {
  await ingester?.stop();
  await clickhouse.close();
});

const inRange = Date.UTC(2026, 9, 14, 9, 30); // a past month, whole minutes around it
const outOfRange = inRange - 86_400_000;

function call(
  model: string,
  startMs: number,
  provider = 'openai',
  tokens: UsageRecord['tokens'] = { input: 1000, output: 500, total: 1500 },
): UsageRecord {
  const record = fixture('valid/success.json') as UsageRecord;
  record.request.provider = provider;
  record.request.modelId = model;
  record.tokens = tokens;
  const at = (ms: number) => new Date(startMs + ms).toISOString();
  record.timing = { startTime: at(0), firstTokenTime: at(300), lastTokenTime: at(1200), latencyMs: 1200 };
  return record;
}

/** Cost, requests and unpriced requests in the rollup for a range of minutes. */
async function rollup(fromMs: number, toMs: number) {
  const [row] = await queryRows<{ cost: number; requests: string; unpriced: string }>(
    clickhouse,
    `SELECT sumMerge(cost_usd) AS cost, countMerge(requests) AS requests, countIfMerge(unpriced) AS unpriced FROM usage_rollup_by_minute
     WHERE minute >= toDateTime(${fromMs / 1000}) AND minute < toDateTime(${toMs / 1000})`,
  );
  return { cost: Number(row!.cost), requests: Number(row!.requests), unpriced: Number(row!.unpriced) };
}

describe('recost', () => {
  it('moves the totals of the range by the new prices, leaves the rest, and is idempotent', async () => {
    const records = [
      call('gpt-4o', inRange),
      call('gpt-4o', inRange + 20_000),
      call('gpt-4o-2024-08-06', inRange + 65_000),
      call('mystery-model', inRange + 30_000),
      call('gpt-4o', outOfRange),
      call('gpt-4o', outOfRange + 1000),
    ];
    await produceQueued(names.topic, queuedRecords(records, { eventKey: (index) => `${names.topic}-${index}` }));
    ingester = await startIngester({ ...names, extraEnv: {} });
    await eventually(async () => (await rollup(outOfRange - 3_600_000, inRange + 3_600_000)).requests === 6, 60_000);

    const range = { fromMs: inRange - 600_000, toMs: inRange + 600_000 };
    const day = { fromMs: outOfRange - 600_000, toMs: outOfRange + 600_000 };
    // The price database: gpt-4o at 2.5 / 10 USD per million; mystery-model unpriced.
    const before = await rollup(range.fromMs, range.toMs);
    expect(before.requests).toBe(4);
    expect(before.unpriced).toBe(1);
    expect(before.cost).toBeCloseTo(3 * ((1000 * 2.5 + 500 * 10) / 1e6), 12);
    const dayBefore = await rollup(day.fromMs, day.toMs);

    const corrected = new PriceTable('test-2026-12', {
      openai: { 'gpt-4o': { input: 5, output: 20 }, 'mystery-model': { input: 1, output: 1 } },
    });
    const run = () => withRedis((redis) => recost(clickhouse, new RollupFence(redis, names.keyPrefix, null), corrected, range));
    const first = await run();
    expect(first.rows).toBe(4);
    // The report: per model, the rows, how many changed, and the cost before and after.
    const old = (1000 * 2.5 + 500 * 10) / 1e6;
    const now = (1000 * 5 + 500 * 20) / 1e6;
    expect(first.pairs.map((pair) => [pair.model, pair.rows, pair.rowsChanged, pair.schedule?.model])).toEqual([
      ['gpt-4o', 2, 2, 'gpt-4o'],
      ['gpt-4o-2024-08-06', 1, 1, 'gpt-4o'],
      ['mystery-model', 1, 1, 'mystery-model'],
    ]);
    expect(first.pairs[0]!.costBefore).toBeCloseTo(2 * old, 12);
    expect(first.pairs[0]!.costAfter).toBeCloseTo(2 * now, 12);
    expect(first.pairs[2]!.costBefore).toBe(0);
    expect(first).toMatchObject({ rowsChanged: 4 });
    expect(first.costAfter - first.costBefore).toBeCloseTo(0.024, 12);
    const afterFirst = await rollup(range.fromMs, range.toMs);
    expect((await run()).rowsChanged).toBe(0);
    expect(await rollup(range.fromMs, range.toMs)).toEqual(afterFirst);

    const after = await rollup(range.fromMs, range.toMs);
    const expected = 3 * ((1000 * 5 + 500 * 20) / 1e6) + (1000 * 1 + 500 * 1) / 1e6;
    expect(after.cost).toBeCloseTo(expected, 12);
    expect(after.cost - before.cost).toBeCloseTo(0.024, 12);
    expect(after).toMatchObject({ requests: 4, unpriced: 0 });
    // Outside the range nothing moved.
    expect(await rollup(day.fromMs, day.toMs)).toEqual(dayBefore);
    const versions = await queryRows<{ v: string; n: string }>(
      clickhouse,
      `SELECT price_table_version AS v, count() AS n FROM usage_events GROUP BY v ORDER BY v`,
    );
    expect(versions.map((row) => [row.v, Number(row.n)])).toEqual([
      [PriceTable.load().version, 2],
      ['test-2026-12', 4],
    ]);
    // The raw rows agree with the rollup, and the second run changed nothing.
    const [raw] = await queryRows<{ cost: number }>(
      clickhouse,
      `SELECT sum(cost_usd) AS cost FROM usage_events WHERE price_table_version = 'test-2026-12'`,
    );
    expect(Number(raw!.cost)).toBeCloseTo(expected, 12);
    // The rollups of migration 0008 (rebuilt over the whole days) and the copy ordered by
    // user agree with the raw rows too.
    const [all] = await queryRows<{ cost: number; n: string }>(
      clickhouse,
      'SELECT sum(ifNull(cost_usd, 0)) AS cost, count() AS n FROM usage_events',
    );
    // The day rollups as their job builds them.
    await buildEveryDay(clickhouse, names.keyPrefix);
    for (const table of USAGE_ROLLUP_TABLES) {
      const [row] = await queryRows<{ cost: number; n: string }>(
        clickhouse,
        table === 'usage_rollup_user_by_day'
          ? `SELECT sum(cost_usd) AS cost, sum(requests) AS n FROM ${table}`
          : `SELECT sumMerge(cost_usd) AS cost, countMerge(requests) AS n FROM ${table}`,
      );
      expect(Number(row!.n), table).toBe(6);
      expect(Number(row!.cost), table).toBeCloseTo(Number(all!.cost), 12);
    }
    const [byUser] = await queryRows<{ cost: number; unpriced: string }>(
      clickhouse,
      'SELECT sum(ifNull(cost_usd, 0)) AS cost, countIf(price_known = 0) AS unpriced FROM usage_events_by_user',
    );
    expect(Number(byUser!.cost)).toBeCloseTo(Number(all!.cost), 12);
    expect(Number(byUser!.unpriced)).toBe(0);
  });

  it('re-prices under a new price database: tiers, start dates and hours of the day in ClickHouse as in the ingester', async () => {
    const day = Date.UTC(2026, 9, 3); // another past day
    const change = day + 10 * 3_600_000; // the new price's start: 10:00 UTC
    const small = { input: 150_000, output: 2_000, cachedInput: 50_000 };
    const large = { input: 250_000, output: 2_000, cachedInput: 50_000, reasoning: 500 };
    const records = [
      call('gemini-2.5-pro', day + 3_600_000, 'gemini', small),
      call('gemini-2.5-pro', day + 3_600_000 + 5_000, 'gemini', large),
      call('gemini-2.5-pro', change + 60_000, 'vertex_ai', small),
      call('gemini-2.5-pro', change + 65_000, 'vertex_ai', large),
      // Unchanged by the new database: re-costing must compute in SQL what the ingester computed.
      call('deepseek-chat', day + 2 * 3_600_000, 'deepseek', { input: 3_000, output: 900, cachedInput: 1_000 }),
      call('deepseek-chat', day + 12 * 3_600_000, 'deepseek', { input: 3_000, output: 900, cachedInput: 1_000 }),
      call('claude-sonnet-4-20250514', day + 4 * 3_600_000, 'anthropic', {
        input: 71_000,
        output: 800,
        cachedInput: 50_000,
        cacheWrite: 20_000,
      }),
      call('gpt-4o-2024-08-06', day + 5 * 3_600_000, 'openai', { input: 10_000, output: 2_000, cachedInput: 6_000, reasoning: 500 }),
      call('us.anthropic.claude-3-7-sonnet-20250219-v1:0', day + 6 * 3_600_000, 'bedrock'),
    ];
    await produceQueued(names.topic, queuedRecords(records, { eventKey: (index) => `${names.topic}-next-${index}` }));
    const range = { fromMs: day, toMs: day + 86_400_000 };
    const stored = async () =>
      queryRows<{
        provider: string;
        model_id: string;
        input_tokens: string;
        output_tokens: string;
        cached_input_tokens: string | null;
        cache_write_tokens: string | null;
        reasoning_tokens: string | null;
        at: string;
        cost_usd: number | null;
        price_table_version: string;
      }>(
        clickhouse,
        `SELECT provider, model_id, input_tokens, output_tokens, cached_input_tokens, cache_write_tokens, reasoning_tokens,
                toUnixTimestamp(event_time) AS at, cost_usd, price_table_version
         FROM usage_events FINAL WHERE event_time >= toDateTime(${range.fromMs / 1000}) AND event_time < toDateTime(${range.toMs / 1000})
         ORDER BY event_time`,
      );
    await eventually(async () => (await stored()).length === records.length, 60_000);

    const next = new PriceTable('genai-prices@next-test', {
      google: {
        'gemini-2.5-pro': [
          {
            input: { base: 1.5, tiers: [{ start: 200_000, price: 3 }] },
            output: { base: 12, tiers: [{ start: 200_000, price: 18 }] },
            cachedInput: 0.15,
          },
          { from: new Date(change).toISOString(), input: { base: 1, tiers: [{ start: 200_000, price: 2 }] }, output: 8 },
        ],
      },
    });
    const outcome = await withRedis((redis) => recost(clickhouse, new RollupFence(redis, names.keyPrefix, null), next, range));
    const changed = Object.fromEntries(outcome.pairs.map((pair) => [`${pair.provider} ${pair.model}`, pair.rowsChanged]));
    expect(changed).toEqual({
      'anthropic claude-sonnet-4-20250514': 0,
      'bedrock us.anthropic.claude-3-7-sonnet-20250219-v1:0': 0,
      'deepseek deepseek-chat': 0,
      'gemini gemini-2.5-pro': 2,
      'openai gpt-4o-2024-08-06': 0,
      'vertex_ai gemini-2.5-pro': 2,
    });
    expect(outcome.rowsChanged).toBe(4);

    // Every row costs what the ingester's costUsd() gives under the new prices at its event time.
    const rows = await stored();
    const costs = rows.map((row) => {
      const schedule = next.find(row.provider, row.model_id)!;
      const tokens = {
        input: Number(row.input_tokens),
        output: Number(row.output_tokens),
        cachedInput: row.cached_input_tokens === null ? null : Number(row.cached_input_tokens),
        cacheWrite: row.cache_write_tokens === null ? null : Number(row.cache_write_tokens),
        reasoning: row.reasoning_tokens === null ? null : Number(row.reasoning_tokens),
      };
      expect(row.price_table_version).toBe('genai-prices@next-test');
      expect(Number(row.cost_usd), `${row.provider} ${row.model_id} at ${row.at}`).toBeCloseTo(
        costUsd(schedule, tokens, Number(row.at))!,
        12,
      );
      return Number(row.cost_usd);
    });
    // The four Gemini calls: base and upper tier before the start date, both tiers of the new price after it.
    expect(costs.slice(0, 2)).toEqual([
      expect.closeTo((100_000 * 1.5 + 50_000 * 0.15 + 2_000 * 12) / 1e6, 12),
      expect.closeTo((200_000 * 3 + 50_000 * 0.15 + 2_000 * 18) / 1e6, 12),
    ]);
    const afterChange = rows.flatMap((row, index) => (row.provider === 'vertex_ai' ? [costs[index]] : []));
    expect(afterChange).toEqual([expect.closeTo((150_000 * 1 + 2_000 * 8) / 1e6, 12), expect.closeTo((250_000 * 2 + 2_000 * 8) / 1e6, 12)]);
    // The rollups of the day agree with the raw rows.
    const [raw] = await queryRows<{ cost: number }>(
      clickhouse,
      `SELECT sum(ifNull(cost_usd, 0)) AS cost FROM usage_events WHERE event_time >= toDateTime(${range.fromMs / 1000}) AND event_time < toDateTime(${range.toMs / 1000})`,
    );
    expect((await rollup(range.fromMs, range.toMs)).cost).toBeCloseTo(Number(raw!.cost), 12);
  });

  it("re-prices one provider's records alone, and every usage rollup of the day agrees with the raw rows", async () => {
    const day = Date.UTC(2026, 9, 20); // another past day
    const records = [
      call('gpt-4o', day + 3_600_000),
      call('gpt-4o', day + 5 * 3_600_000),
      call('claude-sonnet-4-20250514', day + 3_600_000 + 10_000, 'anthropic'),
      call('claude-sonnet-4-20250514', day + 7 * 3_600_000, 'anthropic'),
    ];
    await produceQueued(names.topic, queuedRecords(records, { eventKey: (index) => `${names.topic}-pair-${index}` }));
    const range = { fromMs: day, toMs: day + 86_400_000 };
    const inDay = (column: string) => `${column} >= toDateTime(${range.fromMs / 1000}) AND ${column} < toDateTime(${range.toMs / 1000})`;
    await eventually(async () => (await rollup(range.fromMs, range.toMs)).requests === records.length, 60_000);

    // The key totals and the per-user days hold no provider: they are rebuilt over the whole days.
    const openaiOnly = new PriceTable('test-openai-only', { openai: { 'gpt-4o': { input: 7, output: 30 } } });
    const outcome = await withRedis((redis) =>
      recost(clickhouse, new RollupFence(redis, names.keyPrefix, null), openaiOnly, { ...range, provider: 'openai' }),
    );
    expect(outcome.pairs.map((pair) => [pair.provider, pair.model, pair.rowsChanged])).toEqual([['openai', 'gpt-4o', 2]]);
    const [raw] = await queryRows<{ cost: number; n: string }>(
      clickhouse,
      `SELECT sum(ifNull(cost_usd, 0)) AS cost, count() AS n FROM usage_events FINAL WHERE ${inDay('event_time')}`,
    );
    expect(Number(raw!.n)).toBe(records.length);
    await buildEveryDay(clickhouse, names.keyPrefix);
    for (const { table, time } of SCALED_ROLLUPS.filter(({ kind }) => kind === 'usage')) {
      const [row] = await queryRows<{ cost: number; n: string }>(
        clickhouse,
        table === 'usage_rollup_user_by_day'
          ? `SELECT sum(cost_usd) AS cost, sum(requests) AS n FROM ${table} WHERE ${inDay(time)}`
          : `SELECT sumMerge(cost_usd) AS cost, countMerge(requests) AS n FROM ${table} WHERE ${inDay(time)}`,
      );
      expect(Number(row!.n), table).toBe(records.length);
      expect(Number(row!.cost), table).toBeCloseTo(Number(raw!.cost), 12);
    }
  });
});
