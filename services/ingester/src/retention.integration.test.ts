// Retention on the real ClickHouse with a fake clock: exactly the expired monthly
// partitions are dropped from each table (the event keys' daily ones), the rollups follow their own retention,
// and the canary's old probes are deleted.
import { LATENCY_ROLLUP_TABLES, USAGE_ROLLUP_TABLES } from '@otm/shared/rollups/views';
import { afterAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '@otm/shared/clickhouse';
import { eventually, queryRows, testNames, testStack } from '../../../test/helpers/stack.js';
import { migrate } from '@otm/shared/migrate';
import { applyRetention } from '@otm/shared/rollups/retention';
import { buildEveryDay } from '../../../test/helpers/day-levels.js';

const database = testNames('retention').database;
const settings = { url: testStack().CLICKHOUSE_URL, username: 'default', password: '' };
const server = createClickHouse({ ...settings, database: '' }, { database: null });
const clickhouse = createClickHouse({ ...settings, database });
afterAll(async () => {
  await server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await Promise.all([server.close(), clickhouse.close()]);
});

const partitionsOf = async (table: string) =>
  (
    await queryRows<{ partition: string }>(
      clickhouse,
      `SELECT DISTINCT partition_id AS partition FROM system.parts WHERE database = currentDatabase() AND table = '${table}' AND active ORDER BY partition`,
    )
  ).map((row) => row.partition);

describe('applyRetention', () => {
  it('drops exactly the expired partitions of each table at a fake now', async () => {
    await migrate(server, clickhouse, database);
    // One record on the 15th of each month from 2025-01 to 2026-11 (rollups fill through their views).
    const months = Array.from({ length: 23 }, (_, i) => new Date(Date.UTC(2025, i, 15, 12)));
    const rows = months.map((at, i) => {
      const day = at.toISOString().slice(0, 10);
      const time = `${day} 12:00:00`;
      return {
        event_key: `k${i}`,
        request_id: `r${i}`,
        event_time: time,
        event_date: day,
        received_at: time,
        status: 'success',
        total_tokens: 10,
        ingested_at: time,
      };
    });
    await clickhouse.insert({ table: 'usage_events', values: rows, format: 'JSONEachRow' });
    await clickhouse.insert({
      table: 'usage_io',
      values: rows.map((row) => ({
        event_key: row.event_key,
        event_date: row.event_date,
        prompt: 'p',
        response: 'r',
        ingested_at: row.ingested_at,
      })),
      format: 'JSONEachRow',
    });
    await clickhouse.insert({
      table: 'canary_probes',
      values: [
        { probe_id: 'old', received_at_ms: 0, loaded_at: '2026-11-01 00:00:00' },
        { probe_id: 'new', received_at_ms: 0, loaded_at: '2026-11-20 00:00:00' },
      ],
      format: 'JSONEachRow',
    });
    // The day rollups as their job builds them (from the hours the views filled).
    await buildEveryDay(clickhouse);
    const all = months.map((at) => at.toISOString().slice(0, 7).replace('-', ''));
    expect(await partitionsOf('usage_events')).toEqual(all);
    expect(await partitionsOf('usage_rollup_minute')).toEqual(all);

    const now = Date.UTC(2026, 10, 23, 12);
    const policy = { eventsDays: 400, ioDays: 30, rollupsDays: 0, canaryDays: 7, eventKeysDays: 10 };
    const dryRun = await applyRetention(clickhouse, policy, now, true);
    expect(await partitionsOf('usage_io')).toEqual(all);
    const outcome = await applyRetention(clickhouse, policy, now);
    expect(outcome.dropped).toEqual(dryRun.dropped);

    // usage_events: 400 days back is 2025-10-19, so January to September 2025 go; the
    // copy of its numbers ordered by user (usage_events_by_user) goes with it.
    expect(await partitionsOf('usage_events')).toEqual(all.filter((p) => p >= '202510'));
    expect(await partitionsOf('usage_events_by_user')).toEqual(all.filter((p) => p >= '202510'));
    // usage_io: 30 days back is 2026-10-24, so everything before October 2026 goes.
    expect(await partitionsOf('usage_io')).toEqual(['202610', '202611']);
    // Rollups are kept for ever: analytics over old months still answer.
    for (const rollup of ['usage_rollup_minute', ...USAGE_ROLLUP_TABLES, ...LATENCY_ROLLUP_TABLES]) {
      expect(await partitionsOf(rollup), rollup).toEqual(all);
    }
    // The event keys the ingester looks up (stored on the 15th of each month), by the day:
    // 10 days back is 2026-11-13 12:00, so only 2026-11-15 stays.
    expect(await partitionsOf('usage_event_keys')).toEqual(['20261115']);
    expect(outcome.dropped).toHaveLength(9 + 9 + 21 + 22);
    // The canary's probes older than 7 days are deleted (a mutation: it lands shortly).
    await eventually(
      async () =>
        (await queryRows<{ probe_id: string }>(clickhouse, 'SELECT probe_id FROM canary_probes')).map((r) => r.probe_id).join() === 'new',
      10_000,
    );
    // Again: nothing more to drop, nothing fails.
    expect((await applyRetention(clickhouse, policy, now)).dropped).toEqual([]);
    // Rollups kept 400 days: every rollup loses the same months.
    await applyRetention(clickhouse, { ...policy, rollupsDays: 400 }, now);
    for (const rollup of ['usage_rollup_minute', ...USAGE_ROLLUP_TABLES, ...LATENCY_ROLLUP_TABLES]) {
      expect(await partitionsOf(rollup), rollup).toEqual(all.filter((p) => p >= '202510'));
    }
  });
});
