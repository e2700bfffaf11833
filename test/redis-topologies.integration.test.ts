// The project on the Redis topologies beside a single node. A Redis Cluster of three
// masters (scripts/stack/redis-cluster.ts): dedupe marks spread over every node, the
// erasure fence's transactions, and the gateway and the ingester with REDIS_CLUSTER=true
// (records accepted, a retry answered as a replay, each stored once, a deleted key
// refused at once: the revocation crosses the cluster). Redis Sentinel with a master and
// a replica (scripts/stack/redis-sentinel.ts): the gateway and the ingester with
// REDIS_SENTINEL_MASTER, the master killed under them, both going on on the promoted
// replica (a key made there is accepted, and refused at once when deleted).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Cluster } from 'ioredis';
import { createRedis, redisKeyPrefix, type Redis, type RedisConnectOptions } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { RollupFence, subjectKey } from '@otm/shared/rollups/fence';
import { DedupeStep } from '../services/ingester/src/dedupe-step.js';
import { loadStackConfig } from '../scripts/stack/config.js';
import { redisReply } from '../scripts/stack/redis.js';
import { redisCluster } from '../scripts/stack/redis-cluster.js';
import { SENTINEL_MASTER, redisSentinel } from '../scripts/stack/redis-sentinel.js';
import * as stack from './helpers/stack.js';

const config = loadStackConfig({ ...process.env, OTM_STACK_DIR: '.stack/test-redis-topologies' });

/** A gateway and an ingester on the Redis `env` names, their records tagged, and what ClickHouse stored of them. */
function pipelineOn(label: string, env: () => Record<string, string>) {
  const names = stack.testNames(label);
  const clickhouse = stack.testClickHouse(names.database);
  const tag = stack.uniqueName(label.slice(0, 2)).replace(/[^a-z0-9]/gi, '');
  const services: stack.ServiceProcess[] = [];
  return {
    names,
    async start() {
      services.push(
        ...(await Promise.all([
          stack.startGateway({ topic: names.topic, keyPrefix: names.keyPrefix, extraEnv: env() }),
          stack.startIngester({ ...names, extraEnv: env() }),
        ])),
      );
    },
    async stop() {
      await Promise.all(services.map((service) => service.stop()));
      await clickhouse.close();
    },
    get gateway() {
      return services[0]!;
    },
    record(index: number) {
      const value = stack.fixture('valid/success.json');
      value.user.id = `${tag}-${index}`;
      return value;
    },
    post(body: unknown, headers: Record<string, string>) {
      return stack.postUsage(services[0]!.url, body, headers);
    },
    async stored(): Promise<{ n: string; keys: string }> {
      const query = `SELECT count() AS n, uniqExact(event_key) AS keys FROM usage_events WHERE user_id LIKE '${tag}-%'`;
      return (await stack.queryRows<{ n: string; keys: string }>(clickhouse, query))[0]!;
    },
  };
}

/**
 * Inside a describe: starts the Redis set (`start`), a connection to it and the pipeline
 * on it before its tests, and stops them after.
 */
function onRedis<Handle extends { url: string; down(): Promise<void> }>(
  label: string,
  start: () => Promise<Handle>,
  options: RedisConnectOptions,
  env: (handle: Handle) => Record<string, string>,
) {
  const state: { handle?: Handle; redis?: Redis } = {};
  const pipeline = pipelineOn(label, () => env(state.handle!));
  beforeAll(async () => {
    state.handle = await start();
    state.redis = createRedis(state.handle.url, { name: `${label}-test`, ...options });
    await state.redis.connect();
    await pipeline.start();
  }, 180_000);
  afterAll(async () => {
    await pipeline.stop();
    state.redis?.disconnect();
    await state.handle?.down();
  });
  return { pipeline, handle: () => state.handle!, redis: () => state.redis! };
}

describe('on a Redis Cluster', () => {
  const { pipeline, redis } = onRedis(
    'redis-cluster',
    () => redisCluster(config, 21301),
    { cluster: true },
    (cluster) => ({
      REDIS_URL: cluster.url,
      REDIS_CLUSTER: 'true',
    }),
  );

  it('dedupe marks spread over every master, are read back, and tell duplicates from collisions', async () => {
    const prefix = `${stack.uniqueName('cluster-dedupe')}:`;
    const dedupe = new DedupeStep(redis(), prefix, 600);
    const keys = Array.from({ length: 3000 }, (_, index) => `${prefix}event-${index}`);
    await dedupe.markSeen(keys.map((eventKey) => ({ eventKey, digest: `d-${eventKey}` })));
    const seen = await dedupe.filterSeen(
      [...keys, `${prefix}never-seen`],
      (eventKey) => eventKey,
      (eventKey) => (eventKey === keys[7] ? 'another record' : `d-${eventKey}`),
    );
    expect(seen.fresh).toEqual([`${prefix}never-seen`]);
    expect(seen.duplicates).toBe(2999);
    expect(seen.collisions).toEqual([keys[7]]);
    const masters = (redis() as Cluster).nodes('master');
    expect(masters).toHaveLength(3);
    const perNode = await Promise.all(masters.map((node) => node.keys(`${prefix}seen:*`)));
    for (const held of perNode) expect(held.length).toBeGreaterThan(500);
    expect(perNode.flat()).toHaveLength(3000);
  });

  it("the erasure fence's transactions: leases, tombstones and fenced intervals under one hash tag", async () => {
    const fence = new RollupFence(redis(), redisKeyPrefix(`${stack.uniqueName('cluster-fence')}:`, true), null);
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

  it('the pipeline: accepts, answers a retry as a replay, stores each record once, refuses a deleted key at once', async () => {
    const keys = new KeyStore(redis(), redisKeyPrefix(pipeline.names.keyPrefix, true));
    const { key, id } = await keys.create({ environment: 'qa', name: 'cluster' });
    for (let index = 0; index < 5; index++) {
      const answer = await pipeline.post(pipeline.record(index), { 'x-api-key': key, 'idempotency-key': `cluster-${index}` });
      expect(answer.status, answer.text).toBe(202);
    }
    const retry = await pipeline.post(pipeline.record(0), { 'x-api-key': key, 'idempotency-key': 'cluster-0' });
    expect(retry.status, retry.text).toBe(202);
    const batch = await stack.httpRequest(`${pipeline.gateway.url}/v1/telemetry/usage/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: JSON.stringify([5, 6, 7].map((index) => pipeline.record(index))),
    });
    expect(batch.status, batch.text).toBe(202);
    await stack.eventually(async () => Number((await pipeline.stored()).n) >= 8, 60_000);
    // Nothing more comes: the retry was answered as the first answer, not queued again.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect(await pipeline.stored()).toEqual({ n: '8', keys: '8' });
    expect(await keys.delete(id)).toBe(true);
    await stack.eventually(async () => (await pipeline.post(pipeline.record(9), { 'x-api-key': key })).status === 401, 5000, 50);
  });
});

describe('through Redis Sentinel', () => {
  const { pipeline, redis, handle } = onRedis(
    'redis-sentinel',
    () => redisSentinel(config, 27321),
    { sentinelMaster: SENTINEL_MASTER },
    (sentinel) => ({ REDIS_URL: sentinel.url, REDIS_SENTINEL_MASTER: SENTINEL_MASTER }),
  );

  it('accepts and stores records, and goes on on the promoted replica after the master is killed', async () => {
    const keys = new KeyStore(redis(), pipeline.names.keyPrefix);
    const stored = async () => Number((await pipeline.stored()).keys);
    const before = await keys.create({ environment: 'qa', name: 'before failover' });
    for (let index = 0; index < 3; index++) {
      const answer = await pipeline.post(pipeline.record(index), { 'x-api-key': before.key });
      expect(answer.status, answer.text).toBe(202);
    }
    await stack.eventually(async () => (await stored()) === 3, 60_000);

    // The master dies; the Sentinel promotes the replica.
    expect(handle().master.kill()).toBe(true);
    await stack.eventually(async () => (await redisReply(config.host, handle().replica.port, 'ROLE'))[0] === 'master', 30_000, 200);
    // A key made on the new master: the gateway looks it up there.
    const after = await stack.eventually(
      async () => keys.create({ environment: 'qa', name: 'after failover' }).catch(() => undefined),
      30_000,
    );
    await stack.eventually(async () => (await pipeline.post(pipeline.record(3), { 'x-api-key': after.key })).status === 202, 30_000, 250);
    const answer = await pipeline.post(pipeline.record(4), { 'x-api-key': before.key });
    expect(answer.status, answer.text).toBe(202);
    // The ingester marks and loads on the new master too.
    await stack.eventually(async () => (await stored()) === 5, 60_000);
    // Deleted on the new master: the gateway's subscriber, back through the Sentinel, hears it.
    expect(await keys.delete(after.id)).toBe(true);
    await stack.eventually(async () => (await pipeline.post(pipeline.record(5), { 'x-api-key': after.key })).status === 401, 10_000, 100);
  }, 180_000);
});
