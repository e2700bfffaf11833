// The rollups of migrations 0008 to 0011 against the raw rows, for an installation that had
// records before the migration: records (duplicates delivered, a replay unknown to
// Redis) loaded by ingesters that know only the migrations up to 0007, spread over 40
// days; then an ingester of today migrates and loads more records through the new
// views while the backfill is held (its lock taken), `npm run backfill` copies the old
// days (deleting what the views added for them first), a replay follows, and every new
// table must equal the same figures computed from
// usage_events, each event key once: per minute, per hour, per hour and key, per day,
// per user and day, the errors per hour and per day, the latency histograms of migration
// 0010 (per bucket), the key totals of 0011, and usage_events_by_user. Then an installation
// that had finished 0008's backfill before migrations 0009 to 0011: the backfill copies their
// tables alone,
// and every table, old and new, still equals the raw rows.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { queuedRecords, sampleUsageRecords, seededRandom } from '../../../test/fixtures/sample-records.js';
import { produceQueued } from '../../../test/helpers/produce.js';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { createRedis } from '@otm/shared/redis';
import {
  eventually,
  projectRoot,
  queryRows,
  stackEnv,
  startIngester,
  testClickHouse,
  testStack,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import type { QueuedUsageRecord } from '@otm/schemas';
import { bucketSql } from '@otm/shared/rollups/histogram';
import { buildEveryDay } from '../../../test/helpers/day-levels.js';

const n = {
  topic: uniqueName('backfill'),
  keyPrefix: `${uniqueName('backfill')}:`,
  database: uniqueName('backfill'),
  groupId: uniqueName('backfill'),
};
const clickhouse = testClickHouse(n.database);
const services: ServiceProcess[] = [];
const DAY_MS = 86_400_000;
const BEFORE = 1500;
const AFTER = 500;

/** Records spread evenly over the 40 days before now, with duplicates (other request ids) of about 15 %. */
function records(count: number, seed: number, prefix: string): QueuedUsageRecord[] {
  const random = seededRandom(seed);
  const now = Date.now();
  const sample = sampleUsageRecords(count, { seed, startMs: now - 40 * DAY_MS, users: 40 });
  sample.forEach((record, index) => {
    const at = now - 40 * DAY_MS + Math.floor((index / count) * 40 * DAY_MS) + Math.floor(random() * 3_600_000);
    if (record.timing) {
      const shift = at - Date.parse(record.timing.startTime);
      for (const field of ['startTime', 'firstTokenTime', 'lastTokenTime'] as const) {
        const value = record.timing[field];
        if (value) record.timing[field] = new Date(Date.parse(value) + shift).toISOString();
      }
    }
  });
  const queued = queuedRecords(sample, { eventKey: (index) => `${prefix}-${index}`, receivedAtMs: now - DAY_MS });
  const duplicates = queued
    .filter(() => random() < 0.15)
    .map((record) => ({ ...record, meta: { ...record.meta, requestId: `${record.meta.requestId}-again` } }));
  return [...queued, ...duplicates];
}

const distinct = async (client = clickhouse) =>
  Number((await queryRows<{ n: string }>(client, 'SELECT uniqExact(event_key) AS n FROM usage_events'))[0]!.n);

/** usage_events with each event key once. */
const RAW = `(SELECT event_key, any(event_time) AS event_time, any(environment) AS environment, any(api_key_id) AS api_key_id,
  any(provider) AS provider, any(model_id) AS model_id, any(user_type) AS user_type, any(user_id) AS user_id, any(status) AS status,
  any(total_tokens) AS total_tokens, any(cost_usd) AS cost_usd, any(error_code) AS error_code, any(error_message) AS error_message,
  any(latency_ms) AS latency_ms, any(ttft_ms) AS ttft_ms
  FROM usage_events GROUP BY event_key)`;

interface Figures {
  key: string;
  requests: number;
  tokens: number;
  errors: number;
  cost: number;
}

async function figures(query: string, client = clickhouse): Promise<Figures[]> {
  const rows = await queryRows<Record<string, string>>(client, query);
  return rows.map((row) => ({
    key: row.key!,
    requests: Number(row.requests),
    tokens: Number(row.tokens),
    errors: Number(row.errors),
    cost: Number(row.cost),
  }));
}

function expectEqual(table: string, got: Figures[], raw: Figures[]) {
  expect(got.length, `${table}: rows`).toBe(raw.length);
  expect(
    got.map(({ key, requests, tokens, errors }) => ({ key, requests, tokens, errors })),
    table,
  ).toEqual(raw.map(({ key, requests, tokens, errors }) => ({ key, requests, tokens, errors })));
  got.forEach((row, index) => expect(Math.abs(row.cost - raw[index]!.cost), `${table} ${row.key} cost`).toBeLessThan(1e-9));
}

const HOUR = 'toDateTime(intDiv(toUInt32(event_time), 3600) * 3600)';
const DAY = 'toDateTime(intDiv(toUInt32(event_time), 86400) * 86400)';
interface Rollup {
  table: string;
  time: string;
  /** The raw rows' expression of the rollup's time column. */
  bucket: string;
  dims: string[];
  latencyOnly?: boolean;
  /** A histogram of migration 0010: the column its `bucket` (the last of dims) counts. */
  histogram?: 'latency_ms' | 'ttft_ms';
}

/** The histograms of migration 0010, per bucket. */
const HISTOGRAMS: Rollup[] = [
  {
    table: 'usage_latency_hist_total_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['environment', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_latency_hist_total_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['environment', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_latency_hist_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_latency_hist_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_latency_hist_env_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['environment', 'provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_latency_hist_env_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['environment', 'provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'latency_ms',
  },
  {
    table: 'usage_ttft_hist_total_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['environment', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
  {
    table: 'usage_ttft_hist_total_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['environment', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
  {
    table: 'usage_ttft_hist_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
  {
    table: 'usage_ttft_hist_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
  {
    table: 'usage_ttft_hist_env_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['environment', 'provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
  {
    table: 'usage_ttft_hist_env_by_day',
    time: 'day',
    bucket: DAY,
    dims: ['environment', 'provider', 'model_id', 'bucket'],
    latencyOnly: true,
    histogram: 'ttft_ms',
  },
];

const ROLLUPS: Rollup[] = [
  {
    table: 'usage_rollup_by_minute',
    time: 'minute',
    bucket: 'toStartOfMinute(event_time)',
    dims: ['environment', 'provider', 'model_id', 'user_type'],
  },
  {
    table: 'usage_rollup_key_by_minute',
    time: 'minute',
    bucket: 'toStartOfMinute(event_time)',
    dims: ['environment', 'api_key_id', 'provider', 'model_id', 'user_type'],
  },
  { table: 'usage_rollup_by_hour', time: 'hour', bucket: HOUR, dims: ['environment', 'provider', 'model_id', 'user_type'] },
  {
    table: 'usage_rollup_key_by_hour',
    time: 'hour',
    bucket: HOUR,
    dims: ['environment', 'api_key_id', 'provider', 'model_id', 'user_type'],
  },
  { table: 'usage_rollup_by_day', time: 'day', bucket: DAY, dims: ['environment', 'provider', 'model_id', 'user_type'] },
  { table: 'usage_rollup_key_by_day', time: 'day', bucket: DAY, dims: ['environment', 'api_key_id', 'provider', 'model_id', 'user_type'] },
  { table: 'usage_rollup_user_by_day', time: 'day', bucket: DAY, dims: ['environment', 'user_id', 'user_type'] },
  ...(
    [
      ['minute', 'toStartOfMinute(event_time)'],
      ['hour', HOUR],
      ['day', DAY],
    ] as const
  ).map(([time, bucket]) => ({
    table: `usage_rollup_key_totals_by_${time}`,
    time,
    bucket,
    dims: ['environment', 'api_key_id', 'user_type'],
  })),
  ...HISTOGRAMS,
];

/** The Redis prefixes of ingesters loading into the database besides n's (each builds days under its own lock). */
const otherBuilders: string[] = [];

/** The errors rollups per hour and per day (migrations 0008, 0009) equal the raw rows' errors. */
async function expectErrorRollupsEqualRaw(client = clickhouse, keyPrefix = n.keyPrefix): Promise<void> {
  // The day rollups as their job builds them (after migration 0014), under the lock of the ingesters' builders.
  await buildEveryDay(client, keyPrefix, otherBuilders);
  for (const [table, bucket] of [
    ['usage_errors_by_hour', HOUR],
    ['usage_errors_by_day', DAY],
  ] as const) {
    const time = table === 'usage_errors_by_hour' ? 'hour' : 'day';
    const errorsKey = "concat(toString(toUInt32(t)), '|', environment, '|', provider, '|', model_id, '|', code, '|', message)";
    const got = await figures(
      `SELECT ${errorsKey} AS key, errors AS requests, 0 AS tokens, errors, 0 AS cost FROM (SELECT ${time} AS t, environment, provider, model_id, error_code AS code, error_message AS message, countMerge(errors) AS errors FROM ${table} GROUP BY t, environment, provider, model_id, code, message) ORDER BY key`,
      client,
    );
    const raw = await figures(
      `SELECT ${errorsKey} AS key, errors AS requests, 0 AS tokens, errors, 0 AS cost FROM (SELECT ${bucket} AS t, environment, provider, model_id, ifNull(error_code, '') AS code, substring(ifNull(error_message, ''), 1, 200) AS message, count() AS errors FROM ${RAW} WHERE status = 'error' GROUP BY t, environment, provider, model_id, code, message) ORDER BY key`,
      client,
    );
    expect(raw.length).toBeGreaterThan(0);
    expectEqual(table, got, raw);
  }
}

/** Each rollup's figures per row key equal those of the raw rows, each event key once. */
async function expectRollupsEqualRaw(
  rollups: readonly Rollup[],
  total: number,
  client = clickhouse,
  keyPrefix = n.keyPrefix,
): Promise<void> {
  await buildEveryDay(client, keyPrefix, otherBuilders);
  for (const { table, time, bucket, dims, latencyOnly, histogram } of rollups) {
    const key = `concat(toString(toUInt32(t)), '|', ${dims.map((dim) => (dim === 'bucket' ? 'toString(bucket)' : dim)).join(", '|', ")})`;
    // The raw rows' bucket of a histogram, as its view computes it.
    const rawDims = dims.map((dim) => (dim === 'bucket' && histogram ? `${bucketSql(histogram)} AS bucket` : dim));
    // The per-user days hold plain sums (SummingMergeTree), the others aggregate states;
    // the latency histograms count requests per bucket (their percentiles: analytics.integration.test.ts).
    const measures = latencyOnly
      ? 'countMerge(requests) AS requests, 0 AS tokens, 0 AS errors, 0 AS cost'
      : table === 'usage_rollup_user_by_day'
        ? 'sum(requests) AS requests, sum(total_tokens) AS tokens, sum(errors) AS errors, sum(cost_usd) AS cost'
        : 'countMerge(requests) AS requests, sumMerge(total_tokens) AS tokens, countIfMerge(errors) AS errors, sumMerge(cost_usd) AS cost';
    const rawMeasures = latencyOnly
      ? 'count() AS requests, 0 AS tokens, 0 AS errors, 0 AS cost'
      : "count() AS requests, sum(total_tokens) AS tokens, countIf(status = 'error') AS errors, sum(ifNull(cost_usd, 0)) AS cost";
    const got = await figures(
      `SELECT ${key} AS key, requests, tokens, errors, cost FROM (SELECT ${time} AS t, ${dims.join(', ')}, ${measures} FROM ${table} GROUP BY t, ${dims.join(', ')}) ORDER BY key`,
      client,
    );
    const raw = await figures(
      `SELECT ${key} AS key, requests, tokens, errors, cost FROM (SELECT ${bucket} AS t, ${rawDims.join(', ')}, ${rawMeasures} FROM ${RAW} GROUP BY t, ${dims.join(', ')}) ORDER BY key`,
      client,
    );
    expect(raw.reduce((sum, row) => sum + row.requests, 0)).toBe(total);
    expectEqual(table, got, raw);
  }
}

beforeAll(async () => {
  // An installation of before migration 0008: two ingesters (the second a replay with
  // its own consumer group and Redis prefix) load the records.
  const old = { extraEnv: { INGEST_MIGRATIONS_UP_TO: '0007_token_detail.sql' } };
  await produceQueued(n.topic, records(BEFORE, 33, 'before'));
  const first = await startIngester({ ...n, ...old });
  await eventually(async () => (await distinct()) === BEFORE, 60_000);
  const replay = await startIngester({ ...n, ...old, groupId: uniqueName('replay'), keyPrefix: `${uniqueName('replay')}:` });
  await new Promise((resolve) => setTimeout(resolve, 3000));
  await Promise.all([first.stop(), replay.stop()]);
}, 180_000);

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await clickhouse.close();
});

/** Whether the legacy minute rollup's view exists: 1 or 0. */
const legacyViews = async (client = clickhouse) =>
  Number(
    (
      await queryRows<{ n: string }>(
        client,
        "SELECT count() AS n FROM system.tables WHERE database = currentDatabase() AND name = 'usage_rollup_minute_mv'",
      )
    )[0]!.n,
  );

describe('an installation from before migration 0008', () => {
  it('has no new rollups yet, and its minute rollup equals the raw rows', async () => {
    const tables = await queryRows<{ name: string }>(
      clickhouse,
      "SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'usage_rollup_by_day'",
    );
    expect(tables).toEqual([]);
    const got = await figures(
      `SELECT model_id AS key, countMerge(requests) AS requests, sumMerge(total_tokens) AS tokens, countIfMerge(errors) AS errors, sumMerge(cost_usd) AS cost FROM usage_rollup_minute GROUP BY key ORDER BY key`,
    );
    const raw = await figures(
      `SELECT model_id AS key, count() AS requests, sum(total_tokens) AS tokens, countIf(status = 'error') AS errors, sum(ifNull(cost_usd, 0)) AS cost FROM ${RAW} GROUP BY key ORDER BY key`,
    );
    expectEqual('usage_rollup_minute', got, raw);
  });

  it('migrates, loads through the new views, backfills with npm run backfill, and every new table equals the raw rows', async () => {
    // The backfill's lock held, so that the new views count records of days not backfilled yet.
    const redis = createRedis(testStack().REDIS_URL, { name: 'backfill-test' });
    await redis.connect();
    const lock = `${n.keyPrefix}rollup-backfill-lock`;
    await redis.set(lock, 'held-by-the-test', 'PX', 600_000);
    const ingester = await startIngester(n);
    services.push(ingester);
    await produceQueued(n.topic, records(AFTER, 34, 'after'));
    await eventually(async () => (await distinct()) === BEFORE + AFTER, 60_000);
    // ClickHouse writes usage_events before the views of the same insert: wait for the view.
    const viewed = async () => Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events_by_user'))[0]!.n);
    await eventually(async () => (await viewed()) >= AFTER, 30_000);
    expect(await viewed()).toBe(AFTER);
    // The legacy minute rollup is still what the API reads: its view stays until the backfill is done.
    expect(await legacyViews()).toBe(1);
    await redis.del(lock);
    redis.disconnect();
    const run = promisify(execFile);
    const backfill = await run(path.join(projectRoot, 'node_modules', '.bin', 'tsx'), ['--conditions=otm-source', 'scripts/backfill.ts'], {
      cwd: projectRoot,
      env: stackEnv({ REDIS_KEY_PREFIX: n.keyPrefix, CLICKHOUSE_DATABASE: n.database }),
      timeout: 120_000,
    });
    expect(backfill.stdout).toMatch(/rollup backfill: done/);
    // A replay of the whole topic, unknown to Redis, after the backfill.
    const replayPrefix = `${uniqueName('replay2')}:`;
    services.push(await startIngester({ ...n, groupId: uniqueName('replay2'), keyPrefix: replayPrefix }));
    // It builds days too, under its own prefix's lock: held with the test's while the test builds.
    otherBuilders.push(replayPrefix);
    await new Promise((resolve) => setTimeout(resolve, 4000));
    expect(Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM rollup_backfill_done'))[0]!.n)).toBe(1);
    const progress = await queryRows<{ days: string; rows: string }>(
      clickhouse,
      'SELECT count() AS days, sum(rows) AS rows FROM rollup_backfill_days FINAL',
    );
    expect(Number(progress[0]!.days)).toBeGreaterThanOrEqual(40);

    expect(Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM rollup_backfill_0009_done'))[0]!.n)).toBe(1);
    expect(Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM rollup_backfill_0010_done'))[0]!.n)).toBe(1);
    expect(Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM rollup_backfill_0011_done'))[0]!.n)).toBe(1);
    // The backfill done, the legacy minute rollup's view is retired (its table stays).
    expect(await legacyViews()).toBe(0);
    await expectRollupsEqualRaw(ROLLUPS, BEFORE + AFTER);

    await expectErrorRollupsEqualRaw();

    const userKey = "concat(environment, '|', user_id)";
    const gotUsers = await figures(
      `SELECT ${userKey} AS key, count() AS requests, sum(total_tokens) AS tokens, countIf(status = 'error') AS errors, sum(ifNull(cost_usd, 0)) AS cost FROM usage_events_by_user FINAL GROUP BY key ORDER BY key`,
    );
    const rawUsers = await figures(
      `SELECT ${userKey} AS key, count() AS requests, sum(total_tokens) AS tokens, countIf(status = 'error') AS errors, sum(ifNull(cost_usd, 0)) AS cost FROM ${RAW} GROUP BY key ORDER BY key`,
    );
    expectEqual('usage_events_by_user', gotUsers, rawUsers);
    // Without FINAL too: each record was copied or viewed once.
    expect(Number((await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events_by_user'))[0]!.n)).toBe(
      BEFORE + AFTER,
    );
  });
});

describe('an installation that finished the backfill of migration 0008 before migrations 0009 to 0011', () => {
  const m = {
    topic: uniqueName('backfill9'),
    keyPrefix: `${uniqueName('backfill9')}:`,
    database: uniqueName('backfill9'),
    groupId: uniqueName('backfill9'),
  };
  const client = testClickHouse(m.database);
  afterAll(() => client.close());

  it('copies the records into the tables of 0009 to 0011 alone, and every rollup equals the raw rows', async () => {
    // Up to 0008, from an empty database: nothing to backfill, so 0008 is done at once
    // and the records load through 0008's views.
    const old = await startIngester({ ...m, extraEnv: { INGEST_MIGRATIONS_UP_TO: '0008_rollups_at_scale.sql' } });
    const backfilled8 = async () => Number((await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM rollup_backfill_done'))[0]!.n);
    await eventually(async () => (await backfilled8()) === 1, 30_000);
    // A new installation: nothing to backfill, so the legacy minute rollup's view is retired at once.
    expect(await legacyViews(client)).toBe(0);
    await produceQueued(m.topic, records(600, 35, 'eight'));
    await eventually(async () => (await distinct(client)) === 600, 60_000);
    const viewed = async () => Number((await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM usage_events_by_user'))[0]!.n);
    await eventually(async () => (await viewed()) >= 600, 30_000);
    await old.stop();
    const tables = await queryRows<{ name: string }>(
      client,
      "SELECT name FROM system.tables WHERE database = currentDatabase() AND name = 'usage_latency_total_by_day'",
    );
    expect(tables).toEqual([]);

    // Today's ingester: migrations 0009 to 0011, then their backfill (0008's is not run again).
    const ingester = await startIngester(m);
    services.push(ingester);
    const backfilled9 = async () =>
      Number((await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM rollup_backfill_0009_done'))[0]!.n);
    const backfilled10 = async () =>
      Number((await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM rollup_backfill_0010_done'))[0]!.n);
    const backfilled11 = async () =>
      Number((await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM rollup_backfill_0011_done'))[0]!.n);
    await eventually(async () => (await backfilled9()) === 1 && (await backfilled10()) === 1 && (await backfilled11()) === 1, 60_000);
    const days11 = await queryRows<{ days: string }>(client, 'SELECT count() AS days FROM rollup_backfill_0011_days FINAL');
    expect(Number(days11[0]!.days)).toBeGreaterThanOrEqual(40);
    const days10 = await queryRows<{ days: string }>(client, 'SELECT count() AS days FROM rollup_backfill_0010_days FINAL');
    expect(Number(days10[0]!.days)).toBeGreaterThanOrEqual(40);
    const days9 = await queryRows<{ days: string }>(client, 'SELECT count() AS days FROM rollup_backfill_0009_days FINAL');
    expect(Number(days9[0]!.days)).toBeGreaterThanOrEqual(40);
    expect(await queryRows(client, 'SELECT day FROM rollup_backfill_days')).toEqual([]);
    expect(await backfilled8()).toBe(1);
    await expectRollupsEqualRaw(ROLLUPS, 600, client, m.keyPrefix);
    await expectErrorRollupsEqualRaw(client, m.keyPrefix);
  });
});
