// The ingester's faults on real Kafka, Redis and ClickHouse (npm run test:faults): kill -9
// twice during a load, the broker stopped and started, a member joining and killed
// mid-load, ClickHouse down for 12 s, Redis full. Every record once, none missing. The
// chaos suite runs each at length under sustained load; npm test keeps its smoke (kill -9).
import { afterAll, describe, expect, it } from 'vitest';
import { produceQueued } from '../../../test/helpers/produce.js';
import { startPrivateClickHouse, startPrivateKafka } from '../../../test/helpers/private-services.js';
import { eventually, groupLag, queryRows, startIngester, testClickHouse, testNames } from '../../../test/helpers/stack.js';
import { distinctCount, duplicatedLoad, expectExactContent, ingesterOnPrivateRedis } from '../../../test/helpers/loads.js';
import { seededRandom } from '../../../test/fixtures/sample-records.js';
import { createClickHouse } from '@otm/shared/clickhouse';
import { createRedis } from '@otm/shared/redis';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

const names = (label: string) => testNames(`ing-${label}`);

/** The ingester's lag gauges as Prometheus exposes them: partitions reported, lag summed, oldest unloaded age; the interval between units; what waits unloaded. */
async function lagSignals(url: string) {
  const text = await (await fetch(url)).text();
  const lags = [...text.matchAll(/^otm_ingester_consumer_lag_messages\{partition="\d+"\} (\d+)/gm)].map((match) => Number(match[1]));
  const gauge = (name: string) => Number(new RegExp(`^${name} ([\\d.e+-]+)`, 'm').exec(text)?.[1] ?? NaN);
  return {
    partitions: lags.length,
    lag: lags.reduce((sum, lag) => sum + lag, 0),
    oldestAgeSeconds: gauge('otm_ingester_oldest_unloaded_age_seconds'),
    unitIntervalSeconds: gauge('otm_ingester_unit_interval_seconds'),
    pendingRecords: gauge('otm_ingester_pending_records'),
    pendingBytes: gauge('otm_ingester_pending_bytes'),
  };
}

describe('crash safety', () => {
  it('kill -9 twice at random points during an 8,000-record load: every record once, none missing', async () => {
    const n = names('crash');
    const load = duplicatedLoad(8000, 7);
    await produceQueued(n.topic, load.messages);
    const random = seededRandom(99);
    const extraEnv = { INGEST_BATCH_MAX_ROWS: 500 };
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    let kills = 0;
    // Kill at random points inside the load: when the loaded count passes a random
    // threshold in each of its first two thirds (plus a random delay, so kills land
    // mid-batch). Twice: the second restart resumes from what the first one committed.
    for (let round = 0; round < 2; round++) {
      const ingester = await startIngester({ ...n, extraEnv });
      const threshold = Math.floor(load.distinct * ((round + random()) / 3));
      await eventually(async () => (await distinctCount(clickhouse)) >= threshold, 60_000, 20);
      await new Promise((resolve) => setTimeout(resolve, random() * 50));
      await ingester.kill();
      kills++;
    }
    const loadedBeforeLast = await distinctCount(clickhouse);
    console.log(`crash safety: ${kills} kill -9s; ${loadedBeforeLast} of ${load.distinct} distinct records loaded before the last restart`);
    const last = await startIngester({ ...n, extraEnv });
    cleanups.push(() => last.stop());
    await expectExactContent(clickhouse, load, 120_000);
  }, 300_000);
});

describe('Kafka broker restart', () => {
  it('the broker stopped and started while chunks are loading and fetched ahead: same content, nothing skipped', async () => {
    const n = names('brokerdown');
    const broker = await startPrivateKafka(29492);
    cleanups.push(() => broker.stop());
    const load = duplicatedLoad(8000, 17);
    await produceQueued(n.topic, load.messages, { brokers: broker.address });
    // Small units and a small window, so many chunks are in flight (loading, fetched
    // ahead, committed behind) when the broker goes away.
    const ingester = await startIngester({
      ...n,
      extraEnv: { KAFKA_BROKERS: broker.address, INGEST_BATCH_MAX_ROWS: 300, INGEST_MAX_PENDING_ROWS: 600, INGEST_RETRY_MAX_MS: 2000 },
    });
    cleanups.push(() => ingester.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) > 1000, 60_000, 20);
    await broker.stop();
    const loadedWhileDown = await distinctCount(clickhouse);
    await new Promise((resolve) => setTimeout(resolve, 5000));
    await broker.start();
    console.log(`broker restart: ${loadedWhileDown} of ${load.distinct} distinct records loaded when the broker stopped`);
    await expectExactContent(clickhouse, load, 120_000).catch(async (error: unknown) => {
      console.log(
        `broker restart: ${await distinctCount(clickhouse)} loaded; the ingester's last lines:\n${ingester.logs.slice(-80).join('\n')}`,
      );
      throw error;
    });
    // Every offset committed: nothing would come again after a restart.
    await eventually(async () => (await groupLag(n.groupId, n.topic, broker.address)) === 0, 30_000, 500);
    expect(loadedWhileDown).toBeLessThan(load.distinct); // the outage really fell inside the load
  }, 240_000);
});

describe('rebalance', () => {
  it('a second ingester joins the group mid-load and is killed later: same content, nothing skipped or stalled', async () => {
    const n = names('rebalance');
    const load = duplicatedLoad(10_000, 19);
    await produceQueued(n.topic, load.messages, { partitions: 3 });
    const extraEnv = { INGEST_BATCH_MAX_ROWS: 300, INGEST_MAX_PENDING_ROWS: 600, INGEST_SESSION_TIMEOUT_MS: 6000 };
    const first = await startIngester({ ...n, extraEnv });
    cleanups.push(() => first.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) > 1000, 60_000, 20);
    // Joining moves partitions while the first member has chunks loading and fetched ahead.
    const second = await startIngester({ ...n, extraEnv });
    await eventually(async () => (await distinctCount(clickhouse)) > 4000, 60_000, 20);
    await second.kill(); // its partitions come back to the first after the session timeout
    const loaded = await distinctCount(clickhouse);
    console.log(`rebalance: ${loaded} of ${load.distinct} distinct records loaded when the second member was killed`);
    await expectExactContent(clickhouse, load, 120_000);
    // Every offset committed: a chunk given up in the rebalance does not hold its partition's commits back.
    await eventually(async () => (await groupLag(n.groupId, n.topic)) === 0, 30_000, 500);
    expect(loaded).toBeLessThan(load.distinct);
  }, 240_000);
});

describe('ClickHouse outage', () => {
  it('ClickHouse stopped for 12 s under load, then started: same content, nothing skipped', async () => {
    const n = names('chdown');
    const privateClickHouse = await startPrivateClickHouse(28123);
    cleanups.push(() => privateClickHouse.stop());
    const ingester = await startIngester({
      ...n,
      extraEnv: {
        CLICKHOUSE_URL: privateClickHouse.address,
        INGEST_BATCH_MAX_ROWS: 500,
        INGEST_MAX_PENDING_BYTES: 1_000_000,
        INGEST_RETRY_MAX_MS: 2000,
        METRICS_PORT: 29465,
      },
    });
    cleanups.push(() => ingester.stop());
    const clickhouse = createClickHouse({ url: privateClickHouse.address, database: n.database, username: 'default', password: '' });
    cleanups.push(() => clickhouse.close());

    const load = duplicatedLoad(6000, 11);
    const half = Math.floor(load.messages.length / 2);
    await produceQueued(n.topic, load.messages.slice(0, half));
    await eventually(async () => (await distinctCount(clickhouse)) > 0, 30_000);
    await privateClickHouse.stop();
    // Under load while it is down.
    await produceQueued(n.topic, load.messages.slice(half));
    await new Promise((resolve) => setTimeout(resolve, 12_000));
    expect(ingester.child.exitCode).toBeNull(); // still running, retrying
    // The operator's signals: the lag per partition and the age of what waits.
    const during = await lagSignals('http://127.0.0.1:29465/metrics');
    expect(during.partitions).toBe(3);
    expect(during.lag).toBeGreaterThan(0);
    expect(during.oldestAgeSeconds).toBeGreaterThan(8);
    // What waits unloaded is held to its bound in bytes (about 3 KB a record here), far below the bound in rows.
    expect(during.pendingBytes).toBeGreaterThan(500_000);
    expect(during.pendingBytes).toBeLessThanOrEqual(1_000_000);
    expect(during.pendingRecords).toBeGreaterThan(0);
    expect(during.pendingRecords).toBeLessThan(1_000);
    await privateClickHouse.start();
    await expectExactContent(clickhouse, load, 90_000);
    await eventually(async () => (await lagSignals('http://127.0.0.1:29465/metrics')).lag === 0, 30_000, 1000);
    const after = await lagSignals('http://127.0.0.1:29465/metrics');
    expect(after.oldestAgeSeconds).toBe(0);
    expect([after.pendingRecords, after.pendingBytes]).toEqual([0, 0]);
    // The interval between units follows their load time and rate, between its shortest and longest (0.25 and 1 s by default).
    expect(after.unitIntervalSeconds).toBeGreaterThanOrEqual(0.25);
    expect(after.unitIntervalSeconds).toBeLessThanOrEqual(1);
    expect(ingester.logs.some((line) => line.includes('dependency failed; retrying'))).toBe(true);
  });
});

describe('Redis full', () => {
  it('Redis at maxmemory (noeviction) under load: the ingester says so, and once memory is back every record is counted once', async () => {
    const { n, privateRedis, ingester, clickhouse } = await ingesterOnPrivateRedis(names('redisfull'), 26381, cleanups);
    const redis = createRedis(privateRedis.address, { name: 'test' });
    await redis.connect();
    cleanups.push(() => redis.quit());

    const load = duplicatedLoad(4000, 17);
    const half = Math.floor(load.messages.length / 2);
    await produceQueued(n.topic, load.messages.slice(0, half));
    await eventually(async () => (await distinctCount(clickhouse)) > 0, 30_000);
    // Below what it holds already: every write is refused with OOM, reads still work.
    const [, limit] = (await redis.config('GET', 'maxmemory')) as [string, string];
    await redis.config('SET', 'maxmemory', '1');
    await produceQueued(n.topic, load.messages.slice(half));
    // 60 s: under a loaded machine (the whole suite, two cores) the first refused mark came late once.
    await eventually(
      async () => ingester.logs.some((line) => line.includes('dependency failed; retrying') && line.includes('"reason":"full"')),
      60_000,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; ingester log tail:\n${ingester.logs.slice(-30).join('\n')}`);
    });
    expect(ingester.child.exitCode).toBeNull();
    await redis.config('SET', 'maxmemory', limit);
    await expectExactContent(clickhouse, load, 90_000);
    // Rows inserted while their keys could not be marked were not inserted again, and the
    // rollups saw each record once.
    const [raw] = await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events');
    expect(Number(raw!.n)).toBe(load.distinct);
    const [rollup] = await queryRows<{ n: string }>(clickhouse, 'SELECT countMerge(requests) AS n FROM usage_rollup_by_minute');
    expect(Number(rollup!.n)).toBe(load.distinct);
    const hinted = ingester.logs.find((line) => line.includes('"reason":"full"'));
    expect(hinted).toContain('DEDUPE_TTL_SECONDS');
  });
});
