// The per-user weeks (migration 0015) on the real ClickHouse: the day rollups' job sums
// the per-user days into weeks cut from each month; top users over a month read the
// weeks built and the days around them, and answer what the days alone answer; a day
// marked after its week was built sends the week back to its days until the job sums it
// again; a week that no longer equals its days (summed twice at once) is summed again.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@clickhouse/client';
import { migrate } from '@otm/shared/migrate';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { markDays, readDayState } from '@otm/shared/rollups/day-levels';
import { weekEndS, weeksWithin } from '@otm/shared/rollups/weeks';
import { testStack, uniqueName } from '../../../test/helpers/stack.js';
import { buildEveryDay } from '../../../test/helpers/day-levels.js';
import { generateEventsSql } from '../../../test/fixtures/generate-events.js';
import { backfillState, usageAnalytics, type AnalyticsStore } from './analytics.js';

const database = uniqueName('userweeks');
const server = createClient({ url: testStack().CLICKHOUSE_URL });
const clickhouse = createClient({ url: testStack().CLICKHOUSE_URL, database });
const DAY_S = 86_400;
const todayS = Math.floor(Date.now() / 1000 / DAY_S) * DAY_S;
const spec = { count: 40_000, days: 45, endMs: todayS * 1000, users: 300, models: 5, keys: 6 };
const range = { from: new Date((todayS - 30 * DAY_S) * 1000), to: new Date(todayS * 1000) };
let store: AnalyticsStore;

async function rows<T>(query: string): Promise<T[]> {
  return (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
}

/** Each group's sums over [fromS, toS) in `table`, ordered. */
function groups(table: string, time: string, fromS: number, toS: number) {
  return rows<Record<string, string>>(
    `SELECT environment, user_id, user_type, toString(sum(requests)) AS requests, toString(sum(errors)) AS errors,
            toString(sum(total_tokens)) AS total_tokens, toString(sum(unpriced)) AS unpriced, round(sum(cost_usd), 6) AS cost
     FROM ${table} WHERE ${time} >= toDateTime(${fromS}) AND ${time} < toDateTime(${toS})
     GROUP BY environment, user_id, user_type ORDER BY environment, user_id, user_type`,
  );
}

/** Top users by tokens over the range, through the API, beside the same answer from the per-user days in one step. */
async function topUsers(limit: number) {
  const answer = await usageAnalytics(store, { ...range, bucket: 'none', groupBy: ['userId'], filters: {}, limit, orderBy: 'totalTokens' });
  const fromS = range.from.getTime() / 1000;
  const toS = range.to.getTime() / 1000;
  const direct = await rows<{ user_id: string; tokens: string; requests: string }>(
    `SELECT user_id, toString(sum(total_tokens)) AS tokens, toString(sum(requests)) AS requests FROM usage_rollup_user_by_day
     WHERE day >= toDateTime(${fromS}) AND day < toDateTime(${toS}) GROUP BY user_id ORDER BY sum(total_tokens) DESC, user_id LIMIT ${limit}`,
  );
  return {
    api: answer.map((row) => [row.userId, Number(row.totalTokens), Number(row.requests)]).sort(),
    days: direct.map((row) => [row.user_id, Number(row.tokens), Number(row.requests)]).sort(),
  };
}

beforeAll(async () => {
  await migrate(server as never, clickhouse as never, database);
  expect(await markBackfilledIfEmpty(clickhouse as never)).toBe(true);
  await clickhouse.command({ query: generateEventsSql(spec, 0, spec.count) });
  store = {
    clickhouse: clickhouse as never,
    limits: { timeoutMs: 20_000, maxRowsToRead: 0 },
    backfilled: backfillState(clickhouse as never),
  };
}, 120_000);

afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await clickhouse.close();
  await server.close();
});

describe('the per-user weeks', () => {
  const firstS = todayS - spec.days * DAY_S;

  it('are summed from the per-user days by the day rollups job, group by group', async () => {
    await buildEveryDay(clickhouse as never);
    const state = await readDayState(clickhouse as never, firstS - 31 * DAY_S, todayS + 31 * DAY_S);
    const whole = weeksWithin(firstS, todayS);
    expect(whole.length).toBeGreaterThanOrEqual(3);
    for (const week of whole) {
      expect(state.weekBuilt(week)).toBe(true);
      expect(await groups('usage_rollup_user_by_week', 'week', week, weekEndS(week))).toEqual(
        await groups('usage_rollup_user_by_day', 'day', week, weekEndS(week)),
      );
    }
    const [weekRows] = await rows<{ n: string }>('SELECT toString(count()) AS n FROM usage_rollup_user_by_week');
    expect(Number(weekRows!.n)).toBeGreaterThan(0);
  }, 180_000);

  it('answer top users over a month as the per-user days do', async () => {
    for (const limit of [10, 1000]) {
      const { api, days } = await topUsers(limit);
      expect(api.length).toBe(Math.min(limit, spec.users));
      if (limit >= spec.users) expect(api).toEqual(days);
      else expect(api.map((row) => row[1]).sort()).toEqual(days.map((row) => row[1]).sort());
    }
  }, 60_000);

  it('a day marked after its week was built sends the week to its days until the job sums it again', async () => {
    const [week] = weeksWithin(todayS - 30 * DAY_S, todayS);
    // A record of that week arriving late: marked (as the ingester marks it), then inserted.
    await markDays(clickhouse as never, [(week! + DAY_S) * 1000]);
    const late = { ...spec, count: 1, offset: 5_000_000, days: 1, endMs: (week! + 2 * DAY_S) * 1000 };
    await clickhouse.command({ query: generateEventsSql(late, 0, 1) });
    const state = await readDayState(clickhouse as never, week! - DAY_S, weekEndS(week!) + DAY_S);
    expect(state.weekBuilt(week!)).toBe(false);
    const { api, days } = await topUsers(1000);
    expect(api).toEqual(days);
    await buildEveryDay(clickhouse as never);
    const again = await readDayState(clickhouse as never, week! - DAY_S, weekEndS(week!) + DAY_S);
    expect(again.weekBuilt(week!)).toBe(true);
    expect(await groups('usage_rollup_user_by_week', 'week', week!, weekEndS(week!))).toEqual(
      await groups('usage_rollup_user_by_day', 'day', week!, weekEndS(week!)),
    );
    // What the answer reads of that week is the week's row: one only the week holds comes first.
    await clickhouse.insert({
      table: 'usage_rollup_user_by_week',
      values: [
        {
          week: new Date(week! * 1000).toISOString().slice(0, 19).replace('T', ' '),
          environment: 'prod',
          user_id: 'only-in-the-week',
          user_type: 'external',
          requests: 1,
          total_tokens: 1e12,
        },
      ],
      format: 'JSONEachRow',
    });
    const [first] = await usageAnalytics(store, {
      ...range,
      bucket: 'none',
      groupBy: ['userId'],
      filters: {},
      limit: 1,
      orderBy: 'totalTokens',
    });
    expect(first!.userId).toBe('only-in-the-week');
  }, 180_000);

  it('a built week that no longer equals its days is summed again at the next run', async () => {
    const [, week] = weeksWithin(todayS - 30 * DAY_S, todayS);
    // A second builder summing the same week at the same time (ingesters of another Redis
    // prefix on this database): the week's rows twice, with no mark.
    await clickhouse.command({
      query: `INSERT INTO usage_rollup_user_by_week SELECT * FROM usage_rollup_user_by_week WHERE week = toDateTime(${week!})`,
    });
    expect(await groups('usage_rollup_user_by_week', 'week', week!, weekEndS(week!))).not.toEqual(
      await groups('usage_rollup_user_by_day', 'day', week!, weekEndS(week!)),
    );
    const built = await buildEveryDay(clickhouse as never);
    expect(built).toContain(week!);
    const state = await readDayState(clickhouse as never, week! - DAY_S, weekEndS(week!) + DAY_S);
    expect(state.weekBuilt(week!)).toBe(true);
    expect(await groups('usage_rollup_user_by_week', 'week', week!, weekEndS(week!))).toEqual(
      await groups('usage_rollup_user_by_day', 'day', week!, weekEndS(week!)),
    );
    // The week the test before gave a row its days lack is found so too.
    const [earlier] = weeksWithin(todayS - 30 * DAY_S, todayS);
    expect(await groups('usage_rollup_user_by_week', 'week', earlier!, weekEndS(earlier!))).toEqual(
      await groups('usage_rollup_user_by_day', 'day', earlier!, weekEndS(earlier!)),
    );
  }, 180_000);
});
