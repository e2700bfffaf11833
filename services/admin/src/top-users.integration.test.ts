// Top users grouped by the user and its type, ordered by a count, against real
// ClickHouse: the first step ranks users, the answer ranks (user, type) groups, and a
// user left out of the candidates can still own the largest group. Per-user days written
// as the view writes them, shaped so that the ranking by user misleads: the answer must
// still equal the same query over the table in one step. And the priority every
// analytics query runs at in ClickHouse (ANALYTICS_CLICKHOUSE_PRIORITY), read back from
// its query log.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '@clickhouse/client';
import { migrate } from '@otm/shared/migrate';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { randomUUID } from 'node:crypto';
import { eventually, testStack, uniqueName } from '../../../test/helpers/stack.js';
import { backfillState, candidateCount, usageAnalytics, type AnalyticsStore } from './analytics.js';

const database = uniqueName('topusers');
const server = createClient({ url: testStack().CLICKHOUSE_URL });
const clickhouse = createClient({ url: testStack().CLICKHOUSE_URL, database });
const DAY_MS = 86_400_000;
const dayMs = Math.floor(Date.now() / DAY_MS) * DAY_MS - 2 * DAY_MS;
let store: AnalyticsStore;

/** A per-user day: `tokens` tokens over `requests` requests. */
function userDay(user: string, type: string, tokens: number, requests = 1) {
  return {
    day: new Date(dayMs).toISOString().slice(0, 19).replace('T', ' '),
    environment: 'prod',
    user_id: user,
    user_type: type,
    requests,
    successes: requests,
    errors: 0,
    input_tokens: tokens,
    output_tokens: 0,
    total_tokens: tokens,
    cached_input_tokens: 0,
    cache_write_tokens: 0,
    reasoning_tokens: 0,
    cache_reported_input_tokens: 0,
    cost_usd: 0,
    unpriced: 0,
  };
}

beforeAll(async () => {
  await migrate(server as never, clickhouse as never, database);
  expect(await markBackfilledIfEmpty(clickhouse as never)).toBe(true);
  // As many users as one row's candidates, each spread over as many types (120 tokens a
  // user, 10 a group), and one user of a single type with 100 tokens: ranked by user it
  // is left out, yet its one group is the largest.
  const spread = candidateCount(1);
  const rows = [];
  for (let user = 0; user < spread; user++) {
    for (let type = 0; type < 12; type++) rows.push(userDay(`spread-${user}`, `type-${type}`, 10, 2));
  }
  rows.push(userDay('single', 'solo', 100, 5));
  await clickhouse.insert({ table: 'usage_rollup_user_by_day', values: rows, format: 'JSONEachRow' });
  store = {
    clickhouse: clickhouse as never,
    limits: { timeoutMs: 10_000, maxRowsToRead: 0 },
    backfilled: backfillState(clickhouse as never),
  };
}, 120_000);

afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await clickhouse.close();
  await server.close();
});

/** The same answer in one step over the whole table. */
async function inOneStep(column: string, limit: number): Promise<unknown[][]> {
  const result = await clickhouse.query({
    query: `SELECT user_id, user_type, sum(${column}) AS m FROM usage_rollup_user_by_day GROUP BY user_id, user_type ORDER BY m DESC, user_id, user_type LIMIT ${limit}`,
    format: 'JSONEachRow',
  });
  return (await result.json<{ user_id: string; user_type: string; m: string }>()).map((row) => [row.user_id, row.user_type, Number(row.m)]);
}

describe('top users by user and type', () => {
  it.each([
    ['totalTokens', 'total_tokens', 1],
    ['totalTokens', 'total_tokens', 3],
    ['requests', 'requests', 1],
    ['requests', 'requests', 20],
  ] as const)('ordered by %s (%s), limit %i', async (orderBy, column, limit) => {
    const rows = await usageAnalytics(store, {
      from: new Date(dayMs),
      to: new Date(dayMs + DAY_MS),
      bucket: 'none',
      groupBy: ['userId', 'userType'],
      filters: {},
      limit,
      orderBy,
    });
    expect(rows.map((row) => [row.userId, row.userType, Number(row[orderBy])])).toEqual(await inOneStep(column, limit));
  });
});

describe("analytics queries' priority in ClickHouse", () => {
  /** The priority ClickHouse ran the query of `queryId` with ('' when the query did not set one). */
  async function loggedPriority(queryId: string): Promise<string> {
    const found = await eventually(async () => {
      await server.command({ query: 'SYSTEM FLUSH LOGS' });
      const result = await server.query({
        query: `SELECT Settings.Values[indexOf(Settings.Names, 'priority')] AS priority FROM system.query_log
                WHERE type = 2 AND query_id = '${queryId}' AND event_date >= yesterday()`,
        format: 'JSONEachRow',
      });
      const [row] = await result.json<{ priority: string }>();
      return row;
    }, 15_000);
    return found.priority;
  }

  const query = (queryId: string) => ({
    from: new Date(dayMs),
    to: new Date(dayMs + DAY_MS),
    bucket: 'none' as const,
    groupBy: ['userType'],
    filters: {},
    limit: 10,
    queryId,
  });

  it('run at the priority the limits give (ANALYTICS_CLICKHOUSE_PRIORITY)', async () => {
    const queryId = randomUUID();
    await usageAnalytics({ ...store, limits: { ...store.limits, priority: 1 } }, query(queryId));
    expect(await loggedPriority(queryId)).toBe('1');
  });

  it('set none at 0', async () => {
    const queryId = randomUUID();
    await usageAnalytics({ ...store, limits: { ...store.limits, priority: 0 } }, query(queryId));
    expect(await loggedPriority(queryId)).toBe('');
  });
});
