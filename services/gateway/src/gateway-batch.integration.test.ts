// The batch endpoint on the real stack (decisions.md, "Batch ingest"): per-item
// answers, exactly the valid records on the topic, idempotent replays stored once in
// ClickHouse, gzip NDJSON, bounded inflation, limits on the whole request, and a
// broker that stops mid-batch.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import zlib from 'node:zlib';
import { validate } from '@readme/openapi-parser';
import {
  createTestKey,
  eventually,
  fixture,
  holdsRequestIds,
  httpRequest,
  queryRows,
  readTopic,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  uniqueName,
  type HttpAnswer,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { startPrivateKafka } from '../../../test/helpers/private-services.js';

const names = testNames('gw-batch');
let gateway: ServiceProcess;
let apiKey: string;
let keyId: string;

beforeAll(async () => {
  gateway = await startGateway({ topic: names.topic, keyPrefix: names.keyPrefix });
  const created = await createTestKey(names.keyPrefix, 'qa', 'batch');
  apiKey = created.key;
  keyId = created.id;
});
afterAll(async () => {
  await gateway?.stop();
});

const success = () => fixture('valid/success.json');

function postBatch(
  url: string,
  body: string | Buffer,
  headers: Record<string, string> = {},
  contentType = 'application/json',
): Promise<HttpAnswer> {
  return httpRequest(`${url}/v1/telemetry/usage/batch`, {
    method: 'POST',
    headers: { 'x-api-key': apiKey, 'content-type': contentType, ...headers },
    body,
  });
}

/** A valid record whose user id tells it apart. */
function recordFor(tag: string) {
  const record = success();
  record.user.id = tag;
  return record;
}

describe('answers per item', () => {
  it('a mixed batch is 207 with per-item results, and exactly the valid records are on the topic', async () => {
    const tag = uniqueName('mixed');
    const invalid = recordFor(`${tag}-1`);
    invalid.tokens.input = '12';
    const leapSecond = recordFor(`${tag}-3`);
    leapSecond.timing.startTime = '2026-06-30T23:59:60Z';
    const items = [recordFor(`${tag}-0`), invalid, recordFor(`${tag}-2`), leapSecond, 'not a record', recordFor(`${tag}-5`)];
    const answer = await postBatch(gateway.url, JSON.stringify(items));
    expect(answer.status, answer.text).toBe(207);
    expect(answer.body).toMatchObject({ status: 'partial', accepted: 3, refused: 3 });
    expect(answer.body.results.map((result: { status: number }) => result.status)).toEqual([202, 400, 202, 400, 400, 202]);
    expect(answer.body.results[1]).toEqual({
      index: 1,
      status: 400,
      errorType: 'ValidationError',
      message: 'The usage record does not match the schema.',
      errors: [{ path: '/tokens/input', message: 'must be integer' }],
    });
    expect(answer.body.results[3].errors).toContainEqual({ path: '/timing/startTime', message: expect.stringMatching(/date-time/) });
    expect(answer.body.usage.totalTokens).toBe(3 * (success().tokens.total ?? success().tokens.input + success().tokens.output));

    const accepted = answer.body.results.filter((result: { status: number }) => result.status === 202);
    const onTopic = await readTopic(names.topic, (records) => records.filter((r) => r.value.record.user.id.startsWith(tag)).length >= 3);
    await new Promise((resolve) => setTimeout(resolve, 1000)); // nothing else may follow
    const ours = (await readTopic(names.topic, () => false, 3000)).filter((r) => r.value.record.user.id.startsWith(tag));
    expect(onTopic.length).toBeGreaterThanOrEqual(3);
    expect(ours.map((r) => r.value.record.user.id).sort()).toEqual([`${tag}-0`, `${tag}-2`, `${tag}-5`]);
    expect(ours.map((r) => r.value.meta.requestId).sort()).toEqual(
      accepted.map((result: { requestId: string }) => result.requestId).sort(),
    );
    // Without idempotency keys each item is keyed by its own requestId.
    for (const record of ours) expect(record.key).toBe(record.value.meta.requestId);
  });

  it('an array whose later item is not JSON is refused whole (400), and nothing of it reaches the topic', async () => {
    const tag = uniqueName('unparsable');
    // The valid items before and after the broken one are read first: none may be queued.
    const body = `[${JSON.stringify(recordFor(`${tag}-0`))}, {"model": }, ${JSON.stringify(recordFor(`${tag}-2`))}]`;
    const answer = await postBatch(gateway.url, body);
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body).toMatchObject({ errorType: 'ValidationError', message: 'The request body is not valid JSON.' });
    expect(answer.headers['x-otm-capture']).toBeUndefined();
    const marker = recordFor(`${tag}-after`);
    expect((await postBatch(gateway.url, JSON.stringify([marker]))).status).toBe(202);
    const onTopic = await readTopic(names.topic, (records) => records.some((r) => r.value.record.user.id === `${tag}-after`));
    expect(onTopic.filter((r) => r.value.record.user.id.startsWith(tag)).map((r) => r.value.record.user.id)).toEqual([`${tag}-after`]);
  });

  it('every item valid is 202; item keys are <Idempotency-Key>:<index> unless the item carries its own', async () => {
    const tag = uniqueName('keys');
    const own = { ...recordFor(`${tag}-1`), idempotencyKey: `own-${tag}` };
    const answer = await postBatch(gateway.url, JSON.stringify([recordFor(`${tag}-0`), own, recordFor(`${tag}-2`)]), {
      'idempotency-key': `batch-${tag}`,
    });
    expect(answer.status, answer.text).toBe(202);
    expect(answer.body).toMatchObject({
      status: 'accepted',
      accepted: 3,
      refused: 0,
      message: 'All 3 usage records accepted for processing.',
    });
    const ours = await readTopic(names.topic, (records) => records.filter((r) => r.value.record.user.id.startsWith(tag)).length >= 3);
    const keyOf = (index: number) => ours.find((r) => r.value.record.user.id === `${tag}-${index}`)!.key;
    expect([keyOf(0), keyOf(1), keyOf(2)]).toEqual([`${keyId}:batch-${tag}:0`, `${keyId}:own-${tag}`, `${keyId}:batch-${tag}:2`]);
    // idempotencyKey is taken off the record before it is queued.
    expect(ours.find((r) => r.value.record.user.id === `${tag}-1`)!.value.record).not.toHaveProperty('idempotencyKey');
  });

  it('a replayed batch answers the original requestIds; a reused item key for another record is 422', async () => {
    const tag = uniqueName('replay');
    const items = JSON.stringify([recordFor(`${tag}-0`), recordFor(`${tag}-1`)]);
    const first = await postBatch(gateway.url, items, { 'idempotency-key': tag });
    const again = await postBatch(gateway.url, items, { 'idempotency-key': tag });
    expect(again.status).toBe(202);
    expect(again.body.results).toEqual(first.body.results);
    const changed = [recordFor(`${tag}-0`), recordFor(`${tag}-changed`)];
    const reused = await postBatch(gateway.url, JSON.stringify(changed), { 'idempotency-key': tag });
    expect(reused.status, reused.text).toBe(207);
    expect(reused.body.results[1]).toMatchObject({ index: 1, status: 422, errorType: 'IdempotencyKeyReused' });
    // Two items of one batch with the same key: the same record is one record, another record is 422.
    const twins = [
      { ...recordFor(`${tag}-twin`), idempotencyKey: `twin-${tag}` },
      { ...recordFor(`${tag}-twin`), idempotencyKey: `twin-${tag}` },
      { ...recordFor(`${tag}-other`), idempotencyKey: `twin-${tag}` },
    ];
    const twinAnswer = await postBatch(gateway.url, JSON.stringify(twins));
    expect(twinAnswer.body.results.map((result: { status: number }) => result.status)).toEqual([202, 202, 422]);
    expect(twinAnswer.body.results[1].requestId).toBe(twinAnswer.body.results[0].requestId);
    await new Promise((resolve) => setTimeout(resolve, 1000));
    const ours = (await readTopic(names.topic, () => false, 3000)).filter((r) => r.value.record.user.id.startsWith(tag));
    expect(ours.map((r) => r.value.record.user.id).sort()).toEqual([`${tag}-0`, `${tag}-1`, `${tag}-twin`]);
  });

  it('no valid item: 400 with errors pointing into the batch and the results', async () => {
    const bad = success();
    delete bad.user;
    const answer = await postBatch(gateway.url, JSON.stringify([bad, { idempotencyKey: 7 }]));
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError', message: expect.stringMatching(/No record/) });
    expect(answer.body.errors).toContainEqual({ path: '/0/user', message: 'is required' });
    expect(answer.body.errors).toContainEqual({ path: '/1/idempotencyKey', message: expect.stringMatching(/printable ASCII/) });
    expect(answer.body.results).toHaveLength(2);
  });
});

describe('NDJSON and gzip', () => {
  it('takes gzip NDJSON; an unreadable line is refused alone', async () => {
    const tag = uniqueName('ndjson');
    const lines = [JSON.stringify(recordFor(`${tag}-0`)), '', '{"not json', JSON.stringify(recordFor(`${tag}-1`)), ''].join('\r\n');
    const answer = await postBatch(gateway.url, zlib.gzipSync(lines), { 'content-encoding': 'gzip' }, 'application/x-ndjson');
    expect(answer.status, answer.text).toBe(207);
    expect(answer.body.results.map((result: { status: number }) => result.status)).toEqual([202, 400, 202]);
    expect(answer.body.results[1]).toMatchObject({ errorType: 'ValidationError', message: 'This line is not valid JSON.' });
    const ours = await readTopic(names.topic, (records) => records.filter((r) => r.value.record.user.id.startsWith(tag)).length >= 2);
    expect(ours.filter((r) => r.value.record.user.id.startsWith(tag))).toHaveLength(2);
  });

  it('stops inflating a zip bomb (10 GiB of zeros) at the batch limit with 413, and the gateway stays small', async () => {
    // gzip members may be concatenated: one member of 64 MiB of zeros, 160 times.
    const member = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024), { level: 9 });
    const bomb = Buffer.concat(Array.from({ length: 160 }, () => member));
    expect(bomb.length).toBeLessThan(20 * 1024 * 1024);
    const rss = async () => {
      const metrics = await httpRequest(`http://127.0.0.1:${gateway.metricsPort}/metrics`);
      return Number(/^process_resident_memory_bytes (\d+)/m.exec(metrics.text)![1]);
    };
    const before = await rss();
    const answer = await postBatch(gateway.url, bomb, { 'content-encoding': 'gzip' });
    expect(answer.status, answer.text).toBe(413);
    expect(answer.body).toMatchObject({ statusCode: 413, errorType: 'PayloadTooLarge' });
    // The compressed body and at most the batch limit inflated: tens of MiB, not the 10 GiB.
    const after = await rss();
    expect(after - before).toBeLessThan(100 * 1024 * 1024);
    expect(after).toBeLessThan(256 * 1024 * 1024);
  });
});

describe('limits on the whole request', () => {
  it('refuses what is not a batch, an empty batch, more than 1,000 items, more than 5 MiB, other media types, no key', async () => {
    const notArray = await postBatch(gateway.url, JSON.stringify(success()));
    expect(notArray.status).toBe(400);
    expect(notArray.body.errors).toEqual([{ path: '/', message: 'must be an array' }]);
    expect((await postBatch(gateway.url, '[]')).body.errors).toEqual([{ path: '/', message: 'must not be empty' }]);
    const tooMany = await postBatch(gateway.url, JSON.stringify(Array.from({ length: 1001 }, () => success())));
    expect(tooMany.status).toBe(413);
    expect(tooMany.body.message).toMatch(/at most 1000 records/);
    const big = success();
    big.io.prompt = 'x'.repeat(200 * 1024);
    const tooBig = await postBatch(gateway.url, JSON.stringify(Array.from({ length: 30 }, () => big)));
    expect(tooBig.status).toBe(413);
    expect((await postBatch(gateway.url, 'x', {}, 'text/plain')).status).toBe(415);
    const noKey = await httpRequest(`${gateway.url}/v1/telemetry/usage/batch`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '[]',
    });
    expect(noKey.status).toBe(401);
  });

  it('the rate limit counts items', async () => {
    const limited = await startGateway({
      topic: names.topic,
      keyPrefix: names.keyPrefix,
      extraEnv: { RATE_LIMIT_PER_SECOND: 50, RATE_LIMIT_BURST: 100 },
    });
    try {
      const sixty = JSON.stringify(Array.from({ length: 60 }, () => success()));
      expect((await postBatch(limited.url, sixty)).status).toBe(202);
      const second = await postBatch(limited.url, sixty);
      expect(second.status).toBe(429);
      expect(second.body).toMatchObject({ errorType: 'RateLimited' });
      expect(Number(second.headers['retry-after'])).toBeGreaterThan(0);
    } finally {
      await limited.stop();
    }
  });
});

describe('GET /openapi.json', () => {
  it('serves the generated document, which a real OpenAPI parser validates, without a key', async () => {
    const answer = await httpRequest(`${gateway.url}/openapi.json`);
    expect(answer.status).toBe(200);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    const result = await validate(answer.body);
    expect(result.valid ? [] : result.errors).toEqual([]);
    expect(Object.keys(answer.body.paths)).toEqual(
      expect.arrayContaining(['/v1/telemetry/usage', '/v1/telemetry/usage/batch', '/v1/analytics/usage']),
    );
  });
});

describe('replays into ClickHouse', () => {
  it('a batch replayed after a gateway restart (its replay cache gone) is stored once', async () => {
    const own = testNames('gw-batch-ch');
    const firstGateway = await startGateway({ topic: own.topic, keyPrefix: names.keyPrefix });
    const ingester = await startIngester({ ...own, keyPrefix: own.keyPrefix });
    let secondGateway: ServiceProcess | undefined;
    try {
      const tag = uniqueName('stored-once');
      const items = JSON.stringify(Array.from({ length: 50 }, (_, index) => recordFor(`${tag}-${index}`)));
      expect((await postBatch(firstGateway.url, items, { 'idempotency-key': tag })).status).toBe(202);
      await firstGateway.stop();
      secondGateway = await startGateway({ topic: own.topic, keyPrefix: names.keyPrefix });
      expect((await postBatch(secondGateway.url, items, { 'idempotency-key': tag })).status).toBe(202);
      expect((await postBatch(secondGateway.url, items, { 'idempotency-key': tag })).status).toBe(202);
      const clickhouse = testClickHouse(own.database);
      try {
        const count = async () =>
          Number((await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM usage_events WHERE user_id LIKE '${tag}-%'`))[0]!.n);
        await eventually(async () => (await count()) >= 50);
        // The replays were on the topic too (the second gateway did not know the keys): give the ingester time to see them.
        const onTopic = await readTopic(own.topic, (records) => records.length >= 100);
        expect(onTopic.length).toBeGreaterThanOrEqual(100);
        await new Promise((resolve) => setTimeout(resolve, 3000));
        expect(await count()).toBe(50);
      } finally {
        await clickhouse.close();
      }
    } finally {
      await secondGateway?.stop();
      await ingester.stop();
      await firstGateway.stop().catch(() => undefined);
    }
  });
});

describe('broker stopped mid-batch', () => {
  it('answers 503 (or 207) and every item reported 202 is on the topic', async () => {
    const broker = await startPrivateKafka(29292);
    const topic = uniqueName('gw-batch-broker');
    const faulty = await startGateway({
      topic,
      keyPrefix: names.keyPrefix,
      extraEnv: { KAFKA_BROKERS: broker.address, PRODUCE_TIMEOUT_MS: 2000, RETRY_AFTER_SECONDS: 2, RATE_LIMIT_PER_SECOND: 0 },
    });
    try {
      const accepted = new Set<string>();
      const statuses: number[] = [];
      let running = true;
      let sent = 0;
      const client = async () => {
        while (running && sent < 400) {
          sent++;
          const answer = await postBatch(faulty.url, JSON.stringify(Array.from({ length: 100 }, () => success())));
          statuses.push(answer.status);
          for (const result of answer.body?.results ?? []) if (result.status === 202) accepted.add(result.requestId);
          if (answer.status === 503) expect(answer.headers['retry-after']).toBe('2');
          if (answer.status !== 202) await new Promise((resolve) => setTimeout(resolve, 100));
        }
      };
      const clients = Array.from({ length: 3 }, client);
      await new Promise((resolve) => setTimeout(resolve, 1500));
      await broker.stop();
      await new Promise((resolve) => setTimeout(resolve, 5000));
      running = false;
      await Promise.all(clients);
      expect(statuses).toContain(503);
      expect(statuses.filter((status) => ![202, 207, 503].includes(status))).toEqual([]);
      await broker.start();
      const onTopic = await readTopic(topic, holdsRequestIds(accepted), 60_000, broker.address);
      const stored = new Set(onTopic.map((r) => r.value.meta.requestId));
      const missing = [...accepted].filter((id) => !stored.has(id));
      console.log(`broker down mid-batch: ${statuses.length} batches, ${accepted.size} items answered 202, ${missing.length} missing`);
      expect(accepted.size).toBeGreaterThan(0);
      expect(missing).toEqual([]);
    } finally {
      await faulty.stop();
      await broker.stop();
    }
  });
});
