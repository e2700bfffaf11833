// The project on a Redis Cluster (three masters on loopback, scripts/stack/redis-cluster.ts):
// dedupe marks spread over every node and read back, the erasure fence's transactions,
// and the pipeline itself, gateway and ingester with REDIS_CLUSTER=true: records accepted,
// a retry answered as a replay, each record stored once (the ingester's dedupe marks on
// the cluster), and a deleted key refused at once (the revocation message crosses the cluster).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import { createRedis, redisKeyPrefix, type Redis } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { RollupFence, subjectKey } from '@otm/shared/rollups/fence';
import { DedupeStep } from '../services/ingester/src/dedupe-step.js';
import { loadStackConfig } from '../scripts/stack/config.js';
import { redisCluster, type RedisClusterHandle } from '../scripts/stack/redis-cluster.js';
import {
  eventually,
  fixture,
  httpRequest,
  postUsage,
  queryRows,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  uniqueName,
  type ServiceProcess,
} from './helpers/stack.js';

const config = loadStackConfig({ ...process.env, OTM_STACK_DIR: '.stack/test-redis-cluster' });
let cluster: RedisClusterHandle;
let redis: Redis;

beforeAll(async () => {
  cluster = await redisCluster(config, 27301);
  redis = createRedis(cluster.url, { name: 'cluster-test', cluster: true });
  await redis.connect();
}, 120_000);
afterAll(async () => {
  redis?.disconnect();
  await cluster?.down();
});

describe('on a Redis Cluster', () => {
  it('dedupe marks spread over every master, are read back, and tell duplicates from collisions', async () => {
    const prefix = `${uniqueName('cluster-dedupe')}:`;
    const dedupe = new DedupeStep(redis, prefix, 600);
    const keys = Array.from({ length: 3000 }, (_, index) => `${prefix}event-${index}`);
    await dedupe.markSeen(keys.map((eventKey) => ({ eventKey, digest: `d-${eventKey}` })));
    const items = [...keys, `${prefix}never-seen`];
    const seen = await dedupe.filterSeen(
      items,
      (eventKey) => eventKey,
      (eventKey) => (eventKey === keys[7] ? 'another record' : `d-${eventKey}`),
    );
    expect(seen.fresh).toEqual([`${prefix}never-seen`]);
    expect(seen.duplicates).toBe(2999);
    expect(seen.collisions).toEqual([keys[7]]);
    const masters = (redis as Cluster).nodes('master');
    expect(masters).toHaveLength(3);
    const perNode = await Promise.all(masters.map((node) => node.keys(`${prefix}seen:*`)));
    for (const held of perNode) expect(held.length).toBeGreaterThan(500);
    expect(perNode.flat()).toHaveLength(3000);
  });

  it("the erasure fence's transactions: leases, tombstones and fenced intervals under one hash tag", async () => {
    const fence = new RollupFence(redis, redisKeyPrefix(`${uniqueName('cluster-fence')}:`, true));
    const subject = { environment: 'prod' as const, userId: 'erased' };
    await fence.erase(subject, 1234, 600);
    const held = await fence.fence([{ kind: 'errors', fromMs: 0, toMs: 60_000 }]);
    const check = await fence.beginInsert([subject, { environment: 'prod', userId: 'kept' }]);
    expect([...check.erasedAt]).toEqual([[subjectKey(subject), 1234]]);
    expect(check.fenced).toHaveLength(1);
    await fence.endInsert(check.lease);
    await fence.waitForInsertsInFlight();
    await fence.liftFence(held);
    expect((await fence.beginInsert([])).fenced).toEqual([]);
  });

  describe('the pipeline', () => {
    const names = testNames('redis-cluster');
    const clusterEnv = { REDIS_URL: '', REDIS_CLUSTER: 'true' };
    const clickhouse = testClickHouse(names.database);
    let gateway: ServiceProcess;
    let ingester: ServiceProcess;

    beforeAll(async () => {
      clusterEnv.REDIS_URL = cluster.url;
      [gateway, ingester] = await Promise.all([
        startGateway({ topic: names.topic, keyPrefix: names.keyPrefix, extraEnv: clusterEnv }),
        startIngester({ ...names, extraEnv: clusterEnv }),
      ]);
    }, 180_000);
    afterAll(async () => {
      await Promise.all([gateway, ingester].map((service) => service?.stop()));
      await clickhouse.close();
    });

    it('accepts, answers a retry as a replay, stores each record once, and refuses a deleted key at once', async () => {
      const keys = new KeyStore(redis, redisKeyPrefix(names.keyPrefix, true));
      const { key, id } = await keys.create({ environment: 'qa', name: 'cluster' });
      const tag = uniqueName('rc').replace(/[^a-z0-9]/gi, '');
      const record = (index: number) => {
        const value = fixture('valid/success.json');
        value.user.id = `${tag}-${index}`;
        return value;
      };
      for (let index = 0; index < 5; index++) {
        const answer = await postUsage(gateway.url, record(index), { 'x-api-key': key, 'idempotency-key': `${tag}-${index}` });
        expect(answer.status, answer.text).toBe(202);
      }
      const retry = await postUsage(gateway.url, record(0), { 'x-api-key': key, 'idempotency-key': `${tag}-0` });
      expect(retry.status, retry.text).toBe(202);
      const batch = await httpRequest(`${gateway.url}/v1/telemetry/usage/batch`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-api-key': key },
        body: JSON.stringify([5, 6, 7].map(record)),
      });
      expect(batch.status, batch.text).toBe(202);
      const stored = () =>
        queryRows<{ n: string; keys: string }>(
          clickhouse,
          `SELECT count() AS n, uniqExact(event_key) AS keys FROM usage_events WHERE user_id LIKE '${tag}-%'`,
        );
      await eventually(async () => Number((await stored())[0]?.n) >= 8, 60_000);
      // Nothing more comes: the retry was answered as the first answer, not queued again.
      await new Promise((resolve) => setTimeout(resolve, 2000));
      expect(await stored()).toEqual([{ n: '8', keys: '8' }]);

      expect(await keys.delete(id)).toBe(true);
      await eventually(async () => (await postUsage(gateway.url, record(9), { 'x-api-key': key })).status === 401, 5000, 50);
    });
  });
});
