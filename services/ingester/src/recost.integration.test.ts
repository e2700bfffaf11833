// Re-costing on the real ClickHouse, with an ingester loading the records and
// honouring the fence: a changed price moves the analytics totals of the range by
// the hand-computed amount, nothing outside the range moves, rows carry the table's
// version, and a second run changes nothing.
import { USAGE_ROLLUP_TABLES } from '@otm/shared/rollups/views';
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
import { PriceTable } from './prices.js';
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

function call(model: string, startMs: number): UsageRecord {
  const record = fixture('valid/success.json') as UsageRecord;
  record.request.provider = 'openai';
  record.request.modelId = model;
  record.tokens = { input: 1000, output: 500, total: 1500 };
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
    // The shipped table: gpt-4o at 2.5 / 10 USD per million; mystery-model unpriced.
    const before = await rollup(range.fromMs, range.toMs);
    expect(before.requests).toBe(4);
    expect(before.unpriced).toBe(1);
    expect(before.cost).toBeCloseTo(3 * ((1000 * 2.5 + 500 * 10) / 1e6), 12);
    const dayBefore = await rollup(day.fromMs, day.toMs);

    const corrected = new PriceTable('test-2026-12', {
      openai: { 'gpt-4o': { input: 5, output: 20 }, 'mystery-model': { input: 1, output: 1 } },
    });
    const run = () => withRedis((redis) => recost(clickhouse, new RollupFence(redis, names.keyPrefix), corrected, range));
    const first = await run();
    expect(first.rows).toBe(4);
    expect(first.pairs.map((pair) => [pair.model, pair.rows, pair.price])).toEqual([
      ['gpt-4o', 2, { input: 5, output: 20 }],
      ['gpt-4o-2024-08-06', 1, { input: 5, output: 20 }],
      ['mystery-model', 1, { input: 1, output: 1 }],
    ]);
    const afterFirst = await rollup(range.fromMs, range.toMs);
    await run();
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
});
