// The ingester against real Kafka, Redis and ClickHouse: every field and derived
// value lands right, duplicates are one row, Redis down loses nothing and counts nothing
// twice, and poison messages go to the dead-letter topic. Kills, a broker, ClickHouse
// and a full Redis at length: ingester.faults.test.ts (npm run test:faults).
import { afterAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { createRegistry, encodeWire, registerJsonSchema } from '@otm/shared/registry';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { produceQueued, registeredSchemaId } from '../../../test/helpers/produce.js';
import {
  createTestKey,
  eventually,
  fixture,
  postUsage,
  queryRows,
  readDeadLetters,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  testStack,
} from '../../../test/helpers/stack.js';
import { createRedis } from '@otm/shared/redis';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { PriceTable } from './prices.js';
import { distinctCount, duplicatedLoad, expectExactContent, ingesterOnPrivateRedis } from '../../../test/helpers/loads.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

const names = (label: string) => testNames(`ing-${label}`);

describe('round trip through the gateway', () => {
  it('stores every field as sent and every derived value right', async () => {
    const n = names('roundtrip');
    const ingester = await startIngester(n);
    const gateway = await startGateway({ topic: n.topic, keyPrefix: n.keyPrefix });
    cleanups.push(
      () => ingester.stop(),
      () => gateway.stop(),
    );
    const key = await createTestKey(n.keyPrefix, 'preview', 'roundtrip');

    const success = fixture('valid/success.json');
    const partial = fixture('valid/error-partial-stream.json');
    const stacktrace = fixture('valid/error-stacktrace.json');
    const outOfOrder = fixture('valid/success.json');
    outOfOrder.request.modelId = 'in-house-7b';
    outOfOrder.request.provider = 'acme';
    outOfOrder.tokens = { input: 10, output: 5, total: 99 };
    outOfOrder.timing = {
      startTime: '2026-11-22T10:00:05Z',
      firstTokenTime: '2026-11-22T10:00:04Z',
      lastTokenTime: '2026-11-22T10:00:03Z',
      latencyMs: 9000,
    };

    const ids: Record<string, string> = {};
    for (const [name, body] of Object.entries({ success, partial, stacktrace, outOfOrder })) {
      const answer = await postUsage(gateway.url, body, { 'x-api-key': key.key, 'idempotency-key': `rt-${name}` });
      expect(answer.status, answer.text).toBe(202);
      ids[name] = answer.body.requestId;
    }
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) === 4, 30_000);
    const rows = await queryRows<Record<string, any>>(clickhouse, 'SELECT * FROM usage_events ORDER BY event_key');
    const byRequest = Object.fromEntries(rows.map((row) => [row.request_id, row]));
    const num = (value: unknown) => (value === null ? null : Number(value));

    const s = byRequest[ids.success!]!;
    expect(s).toMatchObject({
      event_key: `${key.id}:rt-success`,
      api_key_id: key.id,
      environment: 'preview',
      idempotency_key: 'rt-success',
      model_id: 'gpt-4o',
      provider: 'openai',
      status: 'success',
      user_id: 'u_5f2c9a',
      user_type: 'external',
      user_name: 'Ada',
      error_code: null,
      event_time: '2026-11-22 10:00:00',
      event_date: '2026-11-22',
      price_known: 1,
      flag_out_of_order: 0,
      flag_total_mismatch: 0,
      flag_latency_mismatch: 0,
    });
    expect(JSON.parse(s.context)).toEqual(success.context);
    expect([s.input_tokens, s.output_tokens, s.sent_total_tokens, s.total_tokens].map(num)).toEqual([1200, 350, 1550, 1550]);
    expect([s.start_time_ms, s.first_token_time_ms, s.last_token_time_ms].map(num)).toEqual([
      Date.parse('2026-11-22T10:00:00.000Z'),
      Date.parse('2026-11-22T10:00:00.420Z'),
      Date.parse('2026-11-22T10:00:02.100Z'),
    ]);
    expect([s.sent_latency_ms, s.latency_ms, s.ttft_ms].map(num)).toEqual([2100, 2100, 420]);
    expect(s.output_tokens_per_sec).toBeCloseTo(350 / 1.68, 6);
    expect(s.cost_usd).toBeCloseTo((1200 * 2.5 + 350 * 10) / 1e6, 12);
    expect(s.price_table_version).toBe(PriceTable.load().version);

    const p = byRequest[ids.partial!]!;
    expect(p).toMatchObject({
      status: 'error',
      error_code: 'stream_interrupted',
      error_message: 'connection reset',
      error_stack: null,
      price_known: 1,
    });
    // Offsets in the timestamps are honoured: 10:00 at +01:00 is 09:00 UTC.
    expect(p.event_time).toBe('2026-11-22 09:00:00');
    expect([p.total_tokens, p.latency_ms, p.ttft_ms, p.sent_latency_ms].map(num)).toEqual([520, 1000, 300, null]);
    expect(p.cost_usd).toBeCloseTo((500 * 0.15 + 20 * 0.6) / 1e6, 12);

    const e = byRequest[ids.stacktrace!]!;
    expect(e).toMatchObject({
      status: 'error',
      error_code: 'timeout',
      error_stack: 'TimeoutError: Upstream timed out',
      input_tokens: null,
      cost_usd: null,
      latency_ms: null,
      price_known: 1,
    });
    expect(num(e.total_tokens)).toBe(0);

    const o = byRequest[ids.outOfOrder!]!;
    expect(o).toMatchObject({
      flag_out_of_order: 1,
      flag_total_mismatch: 1,
      price_known: 0,
      cost_usd: null,
      ttft_ms: null,
      output_tokens_per_sec: null,
    });
    // Never "fixed": what was sent is kept, the derived latency is what the client said.
    expect([o.sent_total_tokens, o.total_tokens, o.sent_latency_ms, o.latency_ms].map(num)).toEqual([99, 99, 9000, 9000]);

    const io = await queryRows<Record<string, any>>(clickhouse, 'SELECT event_key, prompt, response FROM usage_io ORDER BY event_key');
    expect(io.find((row) => row.event_key === `${key.id}:rt-success`)).toMatchObject({
      prompt: success.io.prompt,
      response: success.io.response,
    });
    expect(io.find((row) => row.event_key === `${key.id}:rt-partial`)).toMatchObject({ prompt: 'Hello', response: null });
    expect(io.some((row) => row.event_key === `${key.id}:rt-stacktrace`)).toBe(false);
  });
});

describe('exactly-once effect', () => {
  it('the same Idempotency-Key sent 5 times through different gateways is one row', async () => {
    const n = names('idem');
    const ingester = await startIngester(n);
    // No replay cache: every request is produced, so the duplicates reach the ingester.
    const gateways = await Promise.all(
      [0, 1].map(() => startGateway({ topic: n.topic, keyPrefix: n.keyPrefix, extraEnv: { IDEMPOTENCY_REPLAY_ENTRIES: 0 } })),
    );
    cleanups.push(() => ingester.stop(), ...gateways.map((gateway) => () => gateway.stop()));
    const key = await createTestKey(n.keyPrefix, 'prod', 'idem');
    const requestIds = new Set<string>();
    for (let attempt = 0; attempt < 5; attempt++) {
      const answer = await postUsage(gateways[attempt % 2]!.url, fixture('valid/success.json'), {
        'x-api-key': key.key,
        'idempotency-key': 'charge-7',
      });
      expect(answer.status).toBe(202);
      requestIds.add(answer.body.requestId);
    }
    expect(requestIds.size).toBe(5); // five distinct gateway requests
    // And a second key using the same idempotency string is a different record.
    const other = await createTestKey(n.keyPrefix, 'prod', 'idem-other');
    expect(
      (await postUsage(gateways[0]!.url, fixture('valid/success.json'), { 'x-api-key': other.key, 'idempotency-key': 'charge-7' })).status,
    ).toBe(202);

    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) === 2, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 1500)); // let every duplicate arrive
    const [raw] = await queryRows<{ rows: string; tokens: string }>(
      clickhouse,
      'SELECT count() AS rows, sum(total_tokens) AS tokens FROM usage_events',
    );
    expect(Number(raw!.rows)).toBe(2); // Redis dropped the 4 duplicates before the load
    const [grouped] = await queryRows<{ n: string; tokens: string }>(
      clickhouse,
      "SELECT count() AS n, sum(t) AS tokens FROM (SELECT event_key, any(total_tokens) AS t FROM usage_events WHERE api_key_id = '" +
        key.id +
        "' GROUP BY event_key)",
    );
    expect([Number(grouped!.n), Number(grouped!.tokens)]).toEqual([1, 1550]);
  });
});

describe('Redis outage', () => {
  it('Redis stopped under load: loading goes on without it, every record once; the marks kept meanwhile are written when it is back', async () => {
    const { n, privateRedis, ingester, clickhouse } = await ingesterOnPrivateRedis(names('redisdown'), 26379, cleanups);

    const load = duplicatedLoad(4000, 13);
    const half = Math.floor(load.messages.length / 2);
    await produceQueued(n.topic, load.messages.slice(0, half));
    await eventually(async () => (await distinctCount(clickhouse)) > 0, 30_000);
    await privateRedis.stop();
    await produceQueued(n.topic, load.messages.slice(half));
    // Every record loaded, once, with Redis still down.
    await expectExactContent(clickhouse, load, 90_000);
    expect(ingester.child.exitCode).toBeNull();
    expect(ingester.logs.some((line) => line.includes('Redis unreachable: loading goes on without it'))).toBe(true);

    await privateRedis.start();
    // A unit after Redis is back asks it again (the client reconnects within a second or
    // so) and writes the marks of what loaded without it with its own.
    let round = 0;
    await eventually(
      async () => {
        await produceQueued(n.topic, duplicatedLoad(5, 100 + round++).messages);
        return ingester.logs.some((line) => line.includes('Redis answers again'));
      },
      60_000,
      1000,
    );
    const redis = createRedis(privateRedis.address, { name: 'test' });
    await redis.connect();
    cleanups.push(() => redis.quit());
    await eventually(async () => (await redis.keys(`${n.keyPrefix}seen:load-13-*`)).length === load.distinct, 30_000, 500);
  });

  it("without Redis the erasure fence is read from ClickHouse: an erased user's earlier records are dropped, a fenced interval waits for its job", async () => {
    const { n, privateRedis, ingester, clickhouse } = await ingesterOnPrivateRedis(names('redisdown-erasure'), 26383, cleanups);
    const warmup = duplicatedLoad(20, 21);
    await produceQueued(n.topic, warmup.messages);
    await eventually(async () => (await distinctCount(clickhouse)) === warmup.distinct, 30_000);
    await privateRedis.stop();

    // A job reaching Redis (the shared one: not the ingester's) erases a user and fences
    // an interval, writing both to Redis and to the ledger in the ingester's database.
    const jobRedis = createRedis(testStack().REDIS_URL, { name: 'test' });
    await jobRedis.connect();
    cleanups.push(() => jobRedis.quit());
    const fence = new RollupFence(jobRedis, n.keyPrefix, new GuardLedger(clickhouse));
    const erasedAt = Date.now();
    await fence.erase({ environment: 'prod', userId: 'erased-user' }, erasedAt, 3600);

    const records = queuedRecords(sampleUsageRecords(6, { seed: 22 }), { eventKey: (index) => `erasure-${index}` });
    records.forEach((record, index) => {
      record.meta.environment = 'prod';
      record.meta.receivedAt = new Date(erasedAt - 1000).toISOString();
      if (index < 2) record.record.user.id = 'erased-user';
    });
    // The millisecond record 5 happened in is fenced: its unit waits until the fence is lifted.
    const inFence = records[5]!;
    const eventMs = Date.parse(inFence.record.timing!.startTime!);
    const held = await fence.fence([{ kind: 'all', fromMs: eventMs, toMs: eventMs + 1 }]);
    await fence.waitForInsertsInFlight();
    await produceQueued(n.topic, records.slice(0, 5));
    await eventually(async () => (await distinctCount(clickhouse)) === warmup.distinct + 3, 60_000, 500);
    await produceQueued(n.topic, [inFence]);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(await distinctCount(clickhouse)).toBe(warmup.distinct + 3);
    await fence.liftFence(held);
    await eventually(async () => (await distinctCount(clickhouse)) === warmup.distinct + 4, 60_000, 500);
    const stored = await queryRows<{ event_key: string }>(
      clickhouse,
      "SELECT event_key FROM usage_events WHERE event_key LIKE 'erasure-%' ORDER BY event_key",
    );
    expect(stored.map((row) => row.event_key)).toEqual(['erasure-2', 'erasure-3', 'erasure-4', 'erasure-5']);
    expect(ingester.logs.some((line) => line.includes('Redis unreachable: loading goes on without it'))).toBe(true);
  });
});

describe('poison messages', () => {
  it('go to the dead-letter topic with a reason, and the records after them are loaded', async () => {
    const n = names('poison');
    const schemaId = await registeredSchemaId();
    const good = queuedRecords(sampleUsageRecords(20, { seed: 5 }), { eventKey: (index) => `poison-good-${index}` });
    const wrongShape = { meta: { requestId: 'x' }, record: { nope: true } };
    const raw = [
      { key: 'poison-1', value: Buffer.from('{"plain":"json without the wire header"}') },
      { key: 'poison-2', value: encodeWire(999_999, JSON.stringify(good[0])) },
      { key: 'poison-3', value: encodeWire(schemaId, '{not json') },
      { key: 'poison-4', value: encodeWire(schemaId, JSON.stringify(wrongShape)) },
    ];
    // One partition, poison first: they must not block what follows.
    await produceQueued(n.topic, [], { partitions: 1, raw });
    await produceQueued(n.topic, good, { partitions: 1 });
    const ingester = await startIngester(n);
    cleanups.push(() => ingester.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) === 20, 30_000);

    const letters = (await readDeadLetters(`${n.topic}.dlq`, (found) => found.length === 4)).map((letter) => ({
      key: letter.key,
      reason: letter.headers['x-dlq-reason'] ?? '',
      code: letter.headers['x-dlq-reason-code'] ?? '',
      value: letter.value,
    }));
    expect(letters.map((letter) => letter.key).sort()).toEqual(['poison-1', 'poison-2', 'poison-3', 'poison-4']);
    const reasonOf = (key: string) => letters.find((letter) => letter.key === key)!.reason;
    expect(reasonOf('poison-1')).toMatch(/magic byte|wire header/);
    expect(reasonOf('poison-2')).toMatch(/unknown schema id 999999/);
    expect(reasonOf('poison-3')).toMatch(/not valid JSON/);
    expect(reasonOf('poison-4')).toMatch(/does not match schema/);
    // Each with its reason code beside the text.
    expect(Object.fromEntries(letters.map((letter) => [letter.key, letter.code]))).toEqual({
      'poison-1': 'no_wire_header',
      'poison-2': 'unknown_schema',
      'poison-3': 'not_json',
      'poison-4': 'schema_mismatch',
    });
    // The message itself is kept unchanged.
    expect(letters.find((letter) => letter.key === 'poison-1')!.value).toBe('{"plain":"json without the wire header"}');
  });
});

describe('schema versions', () => {
  it('a message written under schema v1 and one under v2 (token detail) both load; the rollup sums the detail', async () => {
    const n = names('versions');
    // A subject of its own: v1 first, then v2 as the registry's compatible next version.
    const registry = createRegistry(testStack().SCHEMA_REGISTRY_URL);
    const subject = `${n.topic}-value`;
    const v1 = JSON.parse(fs.readFileSync(new URL('../../../schemas/history/queued-record.v1.schema.json', import.meta.url), 'utf8'));
    const v1Id = await registerJsonSchema(registry, subject, v1);
    const v2Id = await registerJsonSchema(registry, subject, buildQueuedRecordSchema());
    expect(v2Id).not.toBe(v1Id);
    const [old, detailed] = queuedRecords(sampleUsageRecords(2, { seed: 11 }), { eventKey: (index) => `versions-${index}` });
    for (const queued of [old!, detailed!]) {
      queued.record.request = { modelId: 'gpt-4o', provider: 'openai', status: 'success' };
      queued.record.tokens = { input: 10_000, output: 2_000 };
      queued.record.timing = {
        startTime: '2026-11-22T10:00:00Z',
        firstTokenTime: '2026-11-22T10:00:01Z',
        lastTokenTime: '2026-11-22T10:00:02Z',
      };
      queued.record.io = {};
      delete queued.record.error;
    }
    old!.record.context = { v1: { nested: 'kept' } };
    detailed!.record.tokens = { input: 10_000, output: 2_000, cachedInput: 6_000, reasoning: 500 };
    await produceQueued(n.topic, [], {
      partitions: 1,
      raw: [
        { key: old!.meta.eventKey, value: encodeWire(v1Id, JSON.stringify(old)) },
        { key: detailed!.meta.eventKey, value: encodeWire(v2Id, JSON.stringify(detailed)) },
      ],
    });
    const ingester = await startIngester(n);
    cleanups.push(() => ingester.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    await eventually(async () => (await distinctCount(clickhouse)) === 2, 30_000);
    const rows = await queryRows<Record<string, any>>(
      clickhouse,
      'SELECT event_key, cached_input_tokens, cache_write_tokens, reasoning_tokens, cost_usd, context FROM usage_events ORDER BY event_key',
    );
    expect(rows.map((row) => ({ ...row, cost_usd: Number(row.cost_usd).toFixed(6) }))).toEqual([
      {
        event_key: 'versions-0',
        cached_input_tokens: null,
        cache_write_tokens: null,
        reasoning_tokens: null,
        cost_usd: '0.045000',
        context: '{"v1":{"nested":"kept"}}',
      },
      // 4,000 x 2.50 + 6,000 x 1.25 + 2,000 x 10 = 37,500 micro-dollars
      {
        event_key: 'versions-1',
        cached_input_tokens: '6000',
        cache_write_tokens: null,
        reasoning_tokens: '500',
        cost_usd: '0.037500',
        context: expect.any(String),
      },
    ]);
    // ClickHouse writes usage_events before it runs the views of the same insert: a query in
    // between sees the events and an empty rollup, so wait for the rollup to count both.
    const rollupRequests = async () =>
      Number((await queryRows<{ n: string }>(clickhouse, 'SELECT countMerge(requests) AS n FROM usage_rollup_by_minute'))[0]!.n);
    await eventually(async () => (await rollupRequests()) === 2, 30_000, 200);
    const [rollup] = await queryRows<Record<string, string>>(
      clickhouse,
      `SELECT sumMerge(input_tokens) AS input, sumMerge(cached_input_tokens) AS cached, sumMerge(reasoning_tokens) AS reasoning,
              sumMerge(cache_reported_input_tokens) AS reported FROM usage_rollup_by_minute`,
    );
    expect(rollup).toEqual({ input: '20000', cached: '6000', reasoning: '500', reported: '10000' });
  });
});

describe('migrations', () => {
  it('are idempotent and recorded', async () => {
    const n = names('migrate');
    const ingester = await startIngester(n);
    await ingester.stop();
    const again = await startIngester(n);
    await again.stop();
    const clickhouse = testClickHouse(n.database);
    const applied = await queryRows<{ name: string }>(clickhouse, 'SELECT name FROM schema_migrations ORDER BY name');
    await clickhouse.close();
    expect(applied.length).toBeGreaterThan(0);
    expect(new Set(applied.map((row) => row.name)).size).toBe(applied.length);
  });
});
