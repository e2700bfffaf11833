// The SQL of every analytics route comes from rollupSql: table-driven checks of what
// it writes (the results on real ClickHouse are checked in analytics.integration.test.ts).
import { describe, expect, it } from 'vitest';
import { candidateCount, DIMENSIONS, groupsBeyondCandidates, rollupSql, tieSpillsOver, type AnalyticsQuery } from './analytics.js';

const from = new Date('2026-11-23T10:00:00.000Z');
const to = new Date('2026-11-23T12:00:00.000Z');
const base: AnalyticsQuery = { from, to, bucket: 'none', groupBy: [], filters: {}, limit: 100 };
const range = 'minute >= toDateTime(1795428000) AND minute < toDateTime(1795435200)';
const byGroups = (group: readonly string[]) => (group.length ? group.join(', ') : 'requests DESC');

describe('rollupSql', () => {
  it.each([
    ['totals, no bucket, no dimensions', base, `SELECT m FROM usage_rollup_minute WHERE ${range} ORDER BY requests DESC LIMIT 100`],
    [
      'hourly buckets',
      { ...base, bucket: 'hour' },
      `SELECT intDiv(toUInt32(minute), 3600) * 3600 AS bucket, m FROM usage_rollup_minute WHERE ${range} GROUP BY bucket ORDER BY bucket LIMIT 100`,
    ],
    [
      'daily buckets by provider and model, filtered',
      { ...base, bucket: 'day', groupBy: ['provider', 'model'], filters: { environment: 'prod' }, limit: 10 },
      `SELECT intDiv(toUInt32(minute), 86400) * 86400 AS bucket, provider AS provider, model_id AS model, m FROM usage_rollup_minute WHERE ${range} AND environment = 'prod' GROUP BY bucket, provider, model ORDER BY bucket, provider, model LIMIT 10`,
    ],
    [
      'a filter value with quotes and backslashes is one literal',
      { ...base, filters: { userId: "o'brien\\x" } },
      `SELECT m FROM usage_rollup_minute WHERE ${range} AND user_id = 'o\\'brien\\\\x' ORDER BY requests DESC LIMIT 100`,
    ],
    [
      'a range that is not on whole seconds covers it (floor, ceiling)',
      { ...base, from: new Date(from.getTime() + 500), to: new Date(to.getTime() - 500) },
      `SELECT m FROM usage_rollup_minute WHERE ${range} ORDER BY requests DESC LIMIT 100`,
    ],
  ] as const)('%s', (_what, query, sql) => {
    expect(
      rollupSql({ table: 'usage_rollup_minute', columns: DIMENSIONS, measures: 'm', query: query as AnalyticsQuery, order: byGroups }),
    ).toBe(sql);
  });

  it('a route decides its order from what is grouped', () => {
    const sql = rollupSql({
      table: 'usage_errors_minute',
      columns: { model: 'model_id' },
      measures: 'countMerge(errors) AS errors',
      query: { ...base, groupBy: ['model'] },
      order: () => 'errors DESC',
    });
    expect(sql).toBe(
      `SELECT model_id AS model, countMerge(errors) AS errors FROM usage_errors_minute WHERE ${range} GROUP BY model ORDER BY errors DESC LIMIT 100`,
    );
  });
});

describe("top users' first step", () => {
  it('keeps more candidates than asked', () => {
    expect(candidateCount(11)).toBeGreaterThan(11);
  });

  it.each([
    ['fewer groups than candidates: every group came back', [9, 8, 8, 8], 2, 10, false],
    ['no more groups than asked', [9, 8], 2, 2, false],
    ['the last candidate below the limit-th: every tie is among the candidates', [9, 8, 8, 7], 2, 4, false],
    ['the last candidate ties with the limit-th: the tie may go on', [9, 8, 8, 8], 2, 4, true],
    ['a tie above the limit-th only', [9, 9, 8, 7], 1, 4, false],
  ] as const)('%s', (_what, metrics, limit, candidates, spills) => {
    expect(tieSpillsOver(metrics, limit, candidates)).toBe(spills);
  });
});

describe('top users ranked by user, answered by finer groups', () => {
  it.each([
    ['every user came back: nothing lies beyond', [5, 4], [9, 8, 3], 2, 4, false],
    ['the limit-th group above the last candidate user', [9, 8], [9, 8, 7, 6], 2, 4, false],
    ['the limit-th group ties with the last candidate user', [9, 6], [9, 8, 7, 6], 2, 4, true],
    ['the limit-th group below it: a user left out may have a larger group', [9, 5], [9, 8, 7, 6], 2, 4, true],
    ['fewer groups than asked while users were left out', [9], [9, 8, 7, 6], 2, 4, true],
  ] as const)('%s', (_what, answered, users, limit, candidates, beyond) => {
    expect(groupsBeyondCandidates(answered, users, limit, candidates)).toBe(beyond);
  });
});
