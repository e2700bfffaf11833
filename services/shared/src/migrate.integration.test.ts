// Migrations against the real ClickHouse: several runners at once on a new database
// (ingester replicas starting together) all succeed and leave one schema.
import { afterAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '@otm/shared/clickhouse';
import { queryRows, testNames, testStack } from '../../../test/helpers/stack.js';
import { migrate, migrationsDir } from './migrate.js';
import fs from 'node:fs';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

describe('migrate', () => {
  it('four runners at once on a new database all succeed, and the schema is whole', async () => {
    const database = testNames('migrate').database;
    const settings = { url: testStack().CLICKHOUSE_URL, username: 'default', password: '' };
    const server = createClickHouse({ ...settings, database: '' }, { database: null });
    const runners = Array.from({ length: 4 }, () => createClickHouse({ ...settings, database }));
    cleanups.push(
      () => server.command({ query: `DROP DATABASE IF EXISTS ${database}` }).then(() => server.close()),
      ...runners.map((runner) => () => runner.close()),
    );
    const outcomes = await Promise.allSettled(runners.map((runner) => migrate(server, runner, database)));
    expect(
      outcomes.filter((outcome) => outcome.status === 'rejected').map((outcome) => (outcome as PromiseRejectedResult).reason.message),
    ).toEqual([]);
    const columns = await queryRows<{ name: string }>(runners[0]!, 'DESCRIBE TABLE usage_events');
    expect(columns.map((column) => column.name)).toContain('anomalies');
    const applied = await queryRows<{ name: string }>(server, `SELECT DISTINCT name FROM ${database}.schema_migrations ORDER BY name`);
    expect(applied.map((row) => row.name)).toEqual(
      fs
        .readdirSync(migrationsDir)
        .filter((file) => file.endsWith('.sql'))
        .sort(),
    );
    // A later start finds everything applied.
    expect(await migrate(server, runners[0]!, database)).toEqual([]);
  });
});
