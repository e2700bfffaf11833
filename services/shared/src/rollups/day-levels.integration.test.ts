// The day rollups built by the job (day-levels.ts) on the real ClickHouse and Redis: an
// installation whose views filled its days is migrated, and the job builds the same
// rows from the hours; a record that arrives for a built day, or a job's fence lifted
// over one, marks the day until the job builds it again; a day changed without a mark is
// found by the next run; the ingesters read the
// watermark with their lease, from Redis or ClickHouse's copy.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testStack, uniqueName } from '../../../../test/helpers/stack.js';
import { generateEventsSql } from '../../../../test/fixtures/generate-events.js';
import { createClickHouse, type ClickHouseClient } from '../clickhouse.js';
import { migrate } from '../migrate.js';
import { createRedis } from '../redis.js';
import { buildDays, dayLevelsLedger, readDayState } from './day-levels.js';
import { RollupFence } from './fence.js';
import { rollupTotals } from './repair.js';
import { JOB_BUILT_DAY_ROLLUPS, aggregateViews } from './views.js';

const DAY_MS = 86_400_000;
const redis = createRedis(testStack().REDIS_URL, { name: 'day-levels-test' });
const database = uniqueName('day_levels').replace(/[^a-z0-9_]/gi, '_');
const settings = { url: testStack().CLICKHOUSE_URL, username: 'default', password: '' };
const server = createClickHouse({ ...settings, database: '' }, { database: null });
const clickhouse: ClickHouseClient = createClickHouse({ ...settings, database });
const todayMs = Math.floor(Date.now() / DAY_MS) * DAY_MS;
const spec = { count: 30_000, days: 3, endMs: todayMs, users: 500, models: 12, keys: 9 };

/** Each job-built day rollup's records per group, as its rows count them. */
async function dayCounts(): Promise<Record<string, unknown[]>> {
  const counts: Record<string, unknown[]> = {};
  for (const { view, table } of JOB_BUILT_DAY_ROLLUPS) {
    const { groups, count } = aggregateViews().find((candidate) => candidate.view === view)!;
    const names = groups.map(({ name }) => name).join(', ');
    const result = await clickhouse.query({
      query: `SELECT ${names}, toString(${count.merge}(${count.column})) AS n FROM ${table} GROUP BY ${names} ORDER BY ${names}`,
      format: 'JSONEachRow',
    });
    counts[table] = await result.json();
  }
  return counts;
}

beforeAll(async () => {
  await redis.connect();
  // An installation from before 0014: its views fill the day rollups.
  await migrate(server, clickhouse, database, () => {}, '', '0013_rollup_guards.sql');
  await clickhouse.command({ query: generateEventsSql(spec, 0, spec.count) });
}, 120_000);

afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await Promise.all([clickhouse.close(), server.close(), redis.quit()]);
});

describe('the day rollups built from the hours', () => {
  const prefix = `${uniqueName('day-levels')}:`;
  const fence = () => new RollupFence(redis, prefix, null, dayLevelsLedger(clickhouse));

  it('build the same rows the views did, and every built day counts each stored record once', async () => {
    const byViews = await dayCounts();
    expect(Object.values(byViews).every((rows) => rows.length > 0)).toBe(true);
    await migrate(server, clickhouse, database);
    // Not built yet: nothing is read from the day rollups.
    const before = await readDayState(clickhouse, todayMs / 1000 - 3 * 86_400, todayMs / 1000);
    expect([3, 2, 1].map((back) => before.built(todayMs / 1000 - back * 86_400))).toEqual([false, false, false]);

    const outcome = await buildDays(clickhouse, fence(), { nowMs: Date.now(), delayMs: 0 });
    expect(outcome.built).toEqual([3, 2, 1].map((back) => todayMs / 1000 - back * 86_400));
    expect(outcome.watermarkS).toBe(todayMs / 1000);
    expect(await dayCounts()).toEqual(byViews);
    const after = await readDayState(clickhouse, todayMs / 1000 - 3 * 86_400, todayMs / 1000 + 86_400);
    expect([3, 2, 1, 0].map((back) => after.built(todayMs / 1000 - back * 86_400))).toEqual([true, true, true, false]);
    for (const total of await rollupTotals(clickhouse)) expect(total.counted, total.table).toBe(total.stored);
    // Nothing more owed: a second run builds nothing.
    expect((await buildDays(clickhouse, fence(), { nowMs: Date.now(), delayMs: 0 })).built).toEqual([]);
  }, 180_000);

  it('the ingesters read the watermark with their lease, from Redis or else from ClickHouse', async () => {
    const store = fence();
    const check = await store.beginInsert([]);
    await store.endInsert(check.lease);
    expect(check.dayWatermarkMs).toBe(todayMs);
    await redis.del(`${prefix}rollup-day-watermark`);
    const again = await store.beginInsert([]);
    await store.endInsert(again.lease);
    expect(again.dayWatermarkMs).toBe(todayMs);
    // Left behind (a run that failed after raising ClickHouse's): the next run writes it
    // before it builds a day (here one marked), so no unit it waits for read the old one.
    const key = `${prefix}rollup-day-watermark`;
    await redis.set(key, String(todayMs - 2 * DAY_MS));
    await store.markDays([todayMs - DAY_MS]);
    const readWhileWaiting: (string | null)[] = [];
    const watching = {
      setDayWatermark: (ms: number) => store.setDayWatermark(ms),
      waitForInsertsInFlight: async () => void readWhileWaiting.push(await redis.get(key)),
    };
    expect((await buildDays(clickhouse, watching, { nowMs: Date.now(), delayMs: 0 })).built).toEqual([todayMs / 1000 - 86_400]);
    expect(readWhileWaiting).toEqual([String(todayMs)]);
    // A fence without the day rollups' ledger marks nothing, so it reads no watermark.
    const bare = new RollupFence(redis, prefix, null);
    const none = await bare.beginInsert([]);
    await bare.endInsert(none.lease);
    expect(none.dayWatermarkMs).toBe(0);
  });

  it('a late record marks its day, which reads as not built until the job builds it again with the record', async () => {
    const lateDayMs = todayMs - 2 * DAY_MS;
    const late = { ...spec, count: 1, offset: 1_000_000, days: 1, endMs: lateDayMs + DAY_MS };
    // As the ingester does: the mark before the insert.
    await fence().markDays([lateDayMs + 1000]);
    await clickhouse.command({ query: generateEventsSql(late, 0, 1) });
    const state = await readDayState(clickhouse, lateDayMs / 1000 - 86_400, todayMs / 1000);
    expect([state.built(lateDayMs / 1000 - 86_400), state.built(lateDayMs / 1000), state.built(lateDayMs / 1000 + 86_400)]).toEqual([
      true,
      false,
      true,
    ]);
    // The comparison skips the changed day; the job builds it alone, with the late record.
    for (const total of await rollupTotals(clickhouse)) expect(total.counted, total.table).toBe(total.stored);
    expect((await buildDays(clickhouse, fence(), { nowMs: Date.now(), delayMs: 0 })).built).toEqual([lateDayMs / 1000]);
    expect((await readDayState(clickhouse, lateDayMs / 1000, todayMs / 1000)).built(lateDayMs / 1000)).toBe(true);
    const totals = await rollupTotals(clickhouse);
    for (const total of totals) expect(total.counted, total.table).toBe(total.stored);
    const days = totals.find((total) => total.table === 'usage_rollup_by_day')!;
    expect(days.stored).toBe(spec.count + 1);
  }, 120_000);

  it('a built day changed without a mark (an ingester from before 0014) is found by the next run and built again', async () => {
    const dayMs = todayMs - DAY_MS;
    const unmarked = { ...spec, count: 1, offset: 2_000_000, days: 1, endMs: dayMs + DAY_MS };
    await clickhouse.command({ query: generateEventsSql(unmarked, 0, 1) });
    expect((await readDayState(clickhouse, dayMs / 1000, todayMs / 1000)).built(dayMs / 1000)).toBe(true);
    const logged: string[] = [];
    const outcome = await buildDays(clickhouse, fence(), { nowMs: Date.now(), delayMs: 0, log: (line) => logged.push(line) });
    expect(outcome.built).toEqual([dayMs / 1000]);
    expect(logged[0]).toContain('differed from their hours');
    const totals = await rollupTotals(clickhouse);
    for (const total of totals) expect(total.counted, total.table).toBe(total.stored);
    expect(totals.find((total) => total.table === 'usage_rollup_by_day')!.stored).toBe(spec.count + 2);
    // Built again, it adds up: the next run finds nothing.
    expect((await buildDays(clickhouse, fence(), { nowMs: Date.now(), delayMs: 0 })).built).toEqual([]);
  }, 120_000);

  it("a job's fence lifted over a built day marks it; a day not over is not built", async () => {
    const store = fence();
    const dayMs = todayMs - 3 * DAY_MS;
    const held = await store.fence([{ kind: 'errors', fromMs: dayMs + 3_600_000, toMs: dayMs + 7_200_000 }]);
    await store.liftFence(held);
    expect((await readDayState(clickhouse, dayMs / 1000, todayMs / 1000)).built(dayMs / 1000)).toBe(false);
    // Today is not over: with the delay past its end not reached either, only the marked day is owed.
    const outcome = await buildDays(clickhouse, store, { nowMs: todayMs + 60_000, delayMs: 120_000 });
    expect(outcome.built).toEqual([dayMs / 1000]);
    expect(outcome.watermarkS).toBe(todayMs / 1000);
  }, 120_000);
});
