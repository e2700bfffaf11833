// The rollup recount (rollups/repair.ts in the shared package) on the real ClickHouse. ClickHouse killed
// between writing usage_events and its materialized views is reproduced exactly: some
// views of this test's own database are detached while a batch is inserted, so
// usage_events holds rows those rollups (and usage_events_by_user) never counted; one
// rollup also counts two records twice. The recount, given the batch's event keys,
// must leave every rollup equal, group by group, to what usage_events holds, and a
// second run must change nothing.
import { afterAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '@otm/shared/clickhouse';
import { RollupFence } from '@otm/shared/rollups/fence';
import { migrate } from '@otm/shared/migrate';
import { createRedis } from '@otm/shared/redis';
import { recountRollups } from '@otm/shared/rollups/repair';
import { JOB_BUILT_DAY_ROLLUPS, aggregateViews, rebuildRollupSql, type AggregateView } from '@otm/shared/rollups/views';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { queryRows, testNames, testStack } from '../../../test/helpers/stack.js';
import { enrich } from './enrich-step.js';
import { encodeRow } from './encode-step.js';
import { loadIsolatingBadRows } from './load-step.js';
import { PriceTable } from './prices.js';

const n = testNames('recount');
const stack = testStack();
const settings = { url: stack.CLICKHOUSE_URL, username: 'default', password: '' };
const server = createClickHouse({ ...settings, database: '' }, { database: null });
const clickhouse = createClickHouse({ ...settings, database: n.database });
const redis = createRedis(stack.REDIS_URL, { name: 'recount-test' });
afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${n.database}` }).catch(() => undefined);
  await Promise.all([server.close(), clickhouse.close(), redis.quit()]);
});

/** Groups of a view whose record count differs between usage_events and the rollup (every group of the table). */
async function differingGroups(view: AggregateView): Promise<string[]> {
  const names = view.groups.map((group) => group.name).join(', ');
  const raw = view.groups.map((group, index) => `toString(${group.expression}) AS g${index}`).join(', ');
  const rolled = view.groups.map((group, index) => `toString(${group.name}) AS g${index}`).join(', ');
  const aliases = view.groups.map((_, index) => `g${index}`).join(', ');
  const where = view.where ? `WHERE ${view.where}` : '';
  const rows = await queryRows<{ id: string; stored: string; counted: string }>(
    clickhouse,
    `SELECT concat(${aliases.split(', ').join(", '|', ")}) AS id, sum(s) AS stored, sum(c) AS counted FROM (
       SELECT ${raw}, count() AS s, toUInt64(0) AS c FROM usage_events ${where} GROUP BY ${aliases}
       UNION ALL
       SELECT ${rolled}, toUInt64(0) AS s, toUInt64(${view.count.merge}(${view.count.column})) AS c FROM ${view.table} GROUP BY ${names}
     ) GROUP BY id HAVING stored != counted ORDER BY id`,
  );
  return rows.map((row) => `${row.id}: ${row.stored} stored, ${row.counted} counted`);
}

/** The views that fill their rollups (the day rollups a job builds are left to it: day-levels.integration.test.ts). */
const filledViews = () => {
  const jobBuilt = new Set<string>(JOB_BUILT_DAY_ROLLUPS.map(({ view }) => view));
  return aggregateViews().filter(({ view }) => !jobBuilt.has(view));
};

async function allDifferences(): Promise<Record<string, string[]>> {
  const found: Record<string, string[]> = {};
  for (const view of filledViews()) {
    const groups = await differingGroups(view);
    if (groups.length > 0) found[view.table] = groups;
  }
  const [copy] = await queryRows<{ missing: string }>(
    clickhouse,
    'SELECT count() AS missing FROM usage_events WHERE event_key NOT IN (SELECT event_key FROM usage_events_by_user)',
  );
  if (Number(copy!.missing) > 0) found.usage_events_by_user = [`${copy!.missing} rows missing`];
  return found;
}

describe('recounting the rollups of an insert that ended without an answer', () => {
  it('adds what the views missed, rebuilds a group counted twice, and a second run changes nothing', async () => {
    await migrate(server, clickhouse, n.database);
    await redis.connect();
    const prices = PriceTable.load();
    const rows = queuedRecords(sampleUsageRecords(400, { seed: 41, users: 30 }), { eventKey: (index) => `rc-${index}` }).map((record) =>
      encodeRow(enrich(record, prices)),
    );
    const before = rows.slice(0, 250);
    const unanswered = rows.slice(250);
    expect((await loadIsolatingBadRows(clickhouse, before, (row) => row)).loaded).toHaveLength(250);
    expect(await allDifferences()).toEqual({});

    // The insert that "ended without an answer": usage_events written, and the views
    // from this one on never ran (as ClickHouse killed between them would leave it).
    const views = filledViews();
    const missed = [...views.filter((_, index) => index % 2 === 1).map((view) => view.view), 'usage_events_by_user_mv'];
    for (const view of missed) await clickhouse.command({ query: `DETACH TABLE ${view}` });
    try {
      expect((await loadIsolatingBadRows(clickhouse, unanswered, (row) => row)).loaded).toHaveLength(150);
    } finally {
      for (const view of missed) await clickhouse.command({ query: `ATTACH TABLE ${view}` });
    }
    // And two of those records counted twice by the per-user days: a difference that is
    // not "short by exactly the records", so their groups are rebuilt.
    const twice = unanswered.slice(0, 2).map((row) => `'${row.eventKey}'`);
    await clickhouse.command({ query: rebuildRollupSql('usage_rollup_user_by_day_mv', `event_key IN (${twice.join(',')})`) });
    await clickhouse.command({ query: rebuildRollupSql('usage_rollup_user_by_day_mv', `event_key IN (${twice.join(',')})`) });

    const broken = await allDifferences();
    // Each table once (the per-user days may be among the views left out too).
    expect(Object.keys(broken).sort()).toEqual(
      [
        ...new Set([
          ...views.filter((_, index) => index % 2 === 1).map((view) => view.table),
          'usage_events_by_user',
          'usage_rollup_user_by_day',
        ]),
      ].sort(),
    );

    const fence = new RollupFence(redis, `${n.keyPrefix}`, null);
    // Every key of the unit, as the ingester passes them: those already counted are compared and left.
    const outcome = await recountRollups(
      clickhouse,
      fence,
      unanswered.map((row) => row.eventKey),
      { unansweredQueryIds: ['no-such-query'] },
    );
    expect(await allDifferences()).toEqual({});
    expect(outcome.stored).toBe(150);
    expect(outcome.copied).toBe(150);
    const mended = Object.fromEntries(outcome.tables.map((table) => [table.table, [table.appended > 0, table.rebuilt > 0]]));
    for (const [index, view] of views.entries()) {
      const expected = view.table === 'usage_rollup_user_by_day' ? [index % 2 === 1, true] : [index % 2 === 1, false];
      expect(mended[view.table], view.table).toEqual(expected);
    }
    expect(await redis.smembers(`${n.keyPrefix}erasure-fence`)).toEqual([]);

    const again = await recountRollups(
      clickhouse,
      fence,
      unanswered.map((row) => row.eventKey),
    );
    expect(again.copied).toBe(0);
    expect(again.tables.every((table) => table.appended === 0 && table.rebuilt === 0)).toBe(true);
    expect(await allDifferences()).toEqual({});
  }, 120_000);
});
