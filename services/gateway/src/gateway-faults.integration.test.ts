// The gateway when things go wrong: generated and mutated bodies, a broker that
// stops mid-load and comes back, and SIGTERM with requests in flight. Nothing
// answered 202 may be missing from the topic.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import {
  createTestKey,
  fixture,
  holdsRequestIds,
  httpRequest,
  postUsage,
  readTopic,
  startGateway,
  uniqueName,
  type HttpAnswer,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { startPrivateKafka, startPrivateRedis } from '../../../test/helpers/private-services.js';
import { ROUTES, increments, postBy, recordCounts } from '../../../test/helpers/record-counts.js';
import { createRedis } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';

const keyPrefix = `${uniqueName('gwf')}:`;
let apiKey: string;
beforeAll(async () => {
  apiKey = (await createTestKey(keyPrefix, 'prod', 'faults')).key;
});

/** JSON values, including the awkward ones (deep nesting, big numbers, odd strings). */
const jsonValue = fc.jsonValue({ maxDepth: 4 });

/** A mutation of a valid record: set, delete or retype a member at some path. */
function mutated(base: Record<string, any>) {
  const paths: string[][] = [];
  const walk = (node: unknown, path: string[]) => {
    if (node && typeof node === 'object' && !Array.isArray(node)) {
      for (const [key, child] of Object.entries(node)) {
        paths.push([...path, key]);
        walk(child, [...path, key]);
      }
    }
  };
  walk(base, []);
  return fc
    .array(fc.tuple(fc.constantFrom(...paths), fc.oneof(fc.constant(undefined), jsonValue, fc.string(), fc.integer())), { maxLength: 3 })
    .map((edits) => {
      const body = structuredClone(base);
      for (const [path, value] of edits) {
        let node: any = body;
        for (const key of path.slice(0, -1)) {
          if (!node || typeof node !== 'object') break;
          node = node[key];
        }
        if (node && typeof node === 'object') {
          if (value === undefined) delete node[path[path.length - 1]!];
          else node[path[path.length - 1]!] = value;
        }
      }
      return body;
    });
}

describe('generated bodies', () => {
  const topic = uniqueName('gw-property');
  let gateway: ServiceProcess;
  beforeAll(async () => {
    gateway = await startGateway({ topic, keyPrefix });
  });
  afterAll(async () => {
    await gateway?.stop();
  });

  it('every answer is 202, 400, 401, 413 or 415, never 5xx, and every 202 is on the topic', async () => {
    const accepted: string[] = [];
    const statuses = new Map<number, number>();
    const bodies = fc.oneof(
      { weight: 3, arbitrary: mutated(fixture('valid/success.json')) },
      { weight: 2, arbitrary: mutated(fixture('valid/error-stack.json')) },
      { weight: 1, arbitrary: mutated(fixture('valid/error-partial-stream.json')) },
      { weight: 1, arbitrary: jsonValue },
    );
    const headers = fc.oneof(
      { weight: 8, arbitrary: fc.constant({ 'x-api-key': apiKey }) },
      { weight: 1, arbitrary: fc.constant({ authorization: `Bearer ${apiKey}` }) },
      { weight: 1, arbitrary: fc.string({ maxLength: 60 }).map((key) => ({ 'x-api-key': key.replace(/[^\x21-\x7e]/g, 'x') || 'x' })) },
    );
    await fc.assert(
      fc.asyncProperty(bodies, headers, async (body, header) => {
        const answer: HttpAnswer = await postUsage(gateway.url, JSON.stringify(body) ?? 'null', header);
        statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
        expect([202, 400, 401, 413, 415]).toContain(answer.status);
        expect(answer.body?.statusCode ?? 202).toBe(answer.status);
        if (answer.status === 202) accepted.push(answer.body.requestId);
      }),
      { numRuns: 3000 },
    );
    console.log(`generated bodies: ${JSON.stringify(Object.fromEntries(statuses))}`);
    expect(accepted.length).toBeGreaterThan(100);
    expect(statuses.get(400) ?? 0).toBeGreaterThan(100);
    const onTopic = await readTopic(topic, (records) => records.length >= accepted.length, 60_000);
    const ids = new Set(onTopic.map((record) => record.value.meta.requestId));
    expect(accepted.filter((id) => !ids.has(id))).toEqual([]);
  });
});

describe('broker stopped mid-load', () => {
  it('answers 503 with Retry-After within the bound while the broker is down, recovers by itself, and loses no 202', async () => {
    const broker = await startPrivateKafka(29192);
    const topic = uniqueName('gw-broker-down');
    const gateway = await startGateway({
      topic,
      keyPrefix,
      extraEnv: { KAFKA_BROKERS: broker.address, PRODUCE_TIMEOUT_MS: 2000, RETRY_AFTER_SECONDS: 3 },
    });
    try {
      const answers: { status: number; ms: number; requestId?: string; retryAfter?: string; phase: string }[] = [];
      let phase = 'before';
      let running = true;
      let paused = false;
      let inFlight = 0;
      // Four clients posting back to back; bounded by the phases below (about 50 s at most).
      const client = async () => {
        while (running) {
          if (paused) {
            await new Promise((resolve) => setTimeout(resolve, 100));
            continue;
          }
          inFlight++;
          const started = Date.now();
          const answer = await postUsage(gateway.url, fixture('valid/success.json'), { 'x-api-key': apiKey });
          answers.push({
            status: answer.status,
            ms: Date.now() - started,
            requestId: answer.body?.requestId,
            retryAfter: answer.headers['retry-after'] as string | undefined,
            phase,
          });
          inFlight--;
          if (answer.status !== 202) await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };
      const clients = Array.from({ length: 4 }, client);
      await new Promise((resolve) => setTimeout(resolve, 2000));
      phase = 'down';
      await broker.stop();
      await new Promise((resolve) => setTimeout(resolve, 4000));
      // Readiness says so while the broker is away (and nothing else).
      const notReady = await httpRequest(`${gateway.url}/readyz`);
      expect(notReady.status).toBe(503);
      expect(notReady.body).toEqual({ status: 'unavailable' });
      // One record by each route while the queue is away: each answered 503 and counted
      // the same way (the clients paused, so only these move the counts).
      paused = true;
      while (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 50));
      const countsBefore = await recordCounts(gateway.metricsPort!);
      for (const route of ROUTES) {
        const probe = await postBy(route, gateway.url, apiKey, fixture('valid/success.json'), uniqueName(`down-${route}`));
        expect(probe.status, `${route}: ${probe.text}`).toBe(503);
      }
      expect(increments(countsBefore, await recordCounts(gateway.metricsPort!))).toEqual({
        single: { unavailable: 1 },
        batch: { unavailable: 1 },
        otlp: { unavailable: 1 },
      });
      paused = false;
      await new Promise((resolve) => setTimeout(resolve, 4000));
      phase = 'restarting';
      await broker.start();
      phase = 'after';
      const recoveredBy = Date.now() + 30_000;
      while (Date.now() < recoveredBy && answers.filter((a) => a.phase === 'after' && a.status === 202).length < 50) {
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      running = false;
      await Promise.all(clients);
      // Ready again by itself once the broker is back.
      const readyAt = Date.now() + 15_000;
      let readyStatus = 0;
      while (readyStatus !== 200 && Date.now() < readyAt) {
        readyStatus = (await httpRequest(`${gateway.url}/readyz`)).status;
        if (readyStatus !== 200) await new Promise((resolve) => setTimeout(resolve, 250));
      }
      expect(readyStatus).toBe(200);

      const byPhase = (name: string, status: number) => answers.filter((a) => a.phase === name && a.status === status).length;
      console.log(
        `broker down: before 202=${byPhase('before', 202)}; down 202=${byPhase('down', 202)} 503=${byPhase('down', 503)}; after 202=${byPhase('after', 202)}`,
      );
      expect(answers.every((a) => a.status === 202 || a.status === 503)).toBe(true);
      expect(byPhase('before', 202)).toBeGreaterThan(10);
      expect(byPhase('down', 503)).toBeGreaterThan(0);
      expect(byPhase('after', 202)).toBeGreaterThanOrEqual(50);
      for (const unavailable of answers.filter((a) => a.status === 503)) {
        expect(unavailable.retryAfter).toBe('3');
        expect(unavailable.ms).toBeLessThan(2000 + 1500);
      }
      const acceptedIds = answers.filter((a) => a.status === 202).map((a) => a.requestId!);
      const records = await readTopic(topic, holdsRequestIds(acceptedIds), 30_000, broker.address);
      const onTopic = new Set(records.map((record) => record.value.meta.requestId));
      const missing = answers.filter((a) => a.status === 202 && !onTopic.has(a.requestId!));
      expect(missing).toEqual([]);
    } finally {
      await gateway.stop();
      await broker.stop();
    }
  });
});

describe('SIGTERM', () => {
  it('stops accepting, answers in-flight requests, flushes the producer and exits 0', async () => {
    const topic = uniqueName('gw-sigterm');
    // A long linger holds the records in the batcher: they are in flight when SIGTERM lands.
    const gateway = await startGateway({ topic, keyPrefix, extraEnv: { PRODUCE_LINGER_MS: 1500 } });
    const inFlight = Array.from({ length: 50 }, () =>
      postUsage(gateway.url, fixture('valid/success.json'), { 'x-api-key': apiKey }).catch(() => undefined),
    );
    await new Promise((resolve) => setTimeout(resolve, 800));
    const exitCode = await gateway.stop();
    const answers = await Promise.all(inFlight);
    expect(exitCode).toBe(0);
    expect(answers.map((answer) => answer?.status)).toEqual(Array(50).fill(202));
    const acceptedIds = answers.filter((a) => a?.status === 202).map((a) => a!.body.requestId as string);
    expect(acceptedIds.length).toBeGreaterThan(0);
    const records = await readTopic(topic, (all) => all.length >= acceptedIds.length, 20_000);
    const ids = new Set(records.map((record) => record.value.meta.requestId));
    expect(acceptedIds.filter((id) => !ids.has(id))).toEqual([]);
  });
});

describe('Redis stopped', () => {
  it('a cached key keeps getting 202 (Kafka is the only dependency a 202 needs), an unknown key 503; both as before once Redis is back', async () => {
    const privateRedis = await startPrivateRedis(26479);
    let gateway: ServiceProcess | undefined;
    try {
      const prefix = `${uniqueName('gwredis')}:`;
      const redis = createRedis(privateRedis.address);
      await redis.connect();
      const created = await new KeyStore(redis, prefix).create({ environment: 'prod', name: 'redis-down' });
      const unknown = await new KeyStore(redis, prefix).create({ environment: 'prod', name: 'never-used' });
      redis.disconnect();
      gateway = await startGateway({ topic: uniqueName('gwredis'), keyPrefix: prefix, extraEnv: { REDIS_URL: privateRedis.address } });
      const post = (key: string) => postUsage(gateway!.url, fixture('valid/success.json'), { 'x-api-key': key });
      expect((await post(created.key)).status).toBe(202);

      await privateRedis.stop();
      // Well past the cache entry's lifetime (1 s) and the subscriber's loss.
      const statuses: number[] = [];
      const until = Date.now() + 5000;
      while (Date.now() < until) {
        statuses.push((await post(created.key)).status);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      expect(new Set(statuses)).toEqual(new Set([202]));
      // A key the gateway never saw cannot be checked: 503 with Retry-After, not 401.
      const refused = await post(unknown.key);
      expect([refused.status, refused.body.errorType]).toEqual([503, 'Unavailable']);
      expect(refused.headers['retry-after']).toBeDefined();
      // Readiness is Kafka's: the gateway stays in its Service.
      expect((await httpRequest(`${gateway.url}/readyz`)).status).toBe(200);

      await privateRedis.start();
      const back = Date.now() + 15_000;
      let status = 0;
      while (status !== 202 && Date.now() < back) {
        status = (await post(unknown.key)).status;
        if (status !== 202) await new Promise((resolve) => setTimeout(resolve, 200));
      }
      expect(status).toBe(202);
      expect((await post(created.key)).status).toBe(202);
    } finally {
      await gateway?.stop();
      await privateRedis.stop();
    }
  }, 120_000);
});
