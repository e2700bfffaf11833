// No record can stop ingestion (decisions.md, bounds rule 8), against real Kafka,
// Redis and ClickHouse: records that reach the topic without the gateway's checks are
// stored with their anomalies or dead-lettered with a reason; a row ClickHouse itself
// refuses is found and dead-lettered with ClickHouse's code while the rest load; a
// consumer kafkajs gives up on ends the process; and a property test posts generated
// hostile records through the real gateway and sees every 202 accounted for.
import { afterAll, describe, expect, it } from 'vitest';
import fc from 'fast-check';
import type { QueuedUsageRecord } from '@otm/schemas';
import { createClickHouse } from '@otm/shared/clickhouse';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { produceQueued, registeredSchemaId } from '../../../test/helpers/produce.js';
import { encodeWire } from '@otm/shared/registry';
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
import { enrich } from './enrich-step.js';
import { encodeRow } from './encode-step.js';
import { loadIsolatingBadRows } from './load-step.js';
import { migrate } from '@otm/shared/migrate';
import { PriceTable } from './prices.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

const names = (label: string) => testNames(`ingh-${label}`);

function queued(eventKey: string, change: (record: QueuedUsageRecord['record']) => void): QueuedUsageRecord {
  const [record] = queuedRecords(sampleUsageRecords(1, { seed: eventKey.length }), { eventKey: () => eventKey });
  record!.record.request.status = 'success';
  record!.record.tokens ??= { input: 1, output: 1 };
  record!.record.timing ??= {
    startTime: '2026-11-22T10:00:00Z',
    firstTokenTime: '2026-11-22T10:00:01Z',
    lastTokenTime: '2026-11-22T10:00:02Z',
  };
  record!.record.io ??= { prompt: 'p', response: 'r' };
  change(record!.record);
  return record!;
}

describe('records that reach the topic without the gateway (older gateways, direct producers)', () => {
  it('are stored with their anomalies or dead-lettered with a reason, and never block the records after them', async () => {
    const n = names('direct');
    const hostile = [
      queued('pre-1970', (record) => (record.timing!.startTime = '1969-12-31T23:59:59Z')),
      queued('far-future', (record) => (record.timing!.lastTokenTime = '2200-01-01T00:00:00Z')),
      queued('surrogate-user', (record) => (record.user.id = 'u\ud800')),
      queued('surrogate-context', (record) => (record.context = { note: 'x\udfff', ['k\ud800']: 1 })),
      queued('surrogate-prompt', (record) => (record.io!.prompt = 'half a pair: \ud83d')),
      queued('leap-second', (record) => (record.timing!.startTime = '2026-06-30T23:59:60Z')),
      queued('offset-plus-01', (record) => (record.timing!.firstTokenTime = '2026-11-22T10:00:00+01')),
      // Past the plausible bounds the gateway refuses beyond (the schema allows it): stored, the value null.
      queued('implausible', (record) => {
        record.tokens = { input: 2 ** 53 - 1, output: 7 };
        record.timing = { ...record.timing!, latencyMs: 49 * 3_600_000 };
      }),
    ];
    const good = queuedRecords(sampleUsageRecords(20, { seed: 3 }), { eventKey: (index) => `after-${index}` });
    // One partition, hostile first: what follows must load all the same.
    await produceQueued(n.topic, [...hostile, ...good], {
      partitions: 1,
      headers: (record) => ({ 'x-request-id': `req-${record.meta.eventKey}` }),
    });
    const ingester = await startIngester(n);
    cleanups.push(() => ingester.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());

    await eventually(async () => {
      const [row] = await queryRows<{ n: string }>(clickhouse, "SELECT count() AS n FROM usage_events WHERE event_key LIKE 'after-%'");
      return Number(row?.n) === 20;
    }, 30_000);
    const rows = await queryRows<{
      event_key: string;
      anomalies: string[];
      user_id: string;
      start_time_ms: string | null;
      event_time: string;
    }>(
      clickhouse,
      "SELECT event_key, anomalies, user_id, start_time_ms, toString(event_time) AS event_time FROM usage_events WHERE event_key NOT LIKE 'after-%' ORDER BY event_key",
    );
    const byKey = Object.fromEntries(rows.map((row) => [row.event_key, row]));
    expect(Object.keys(byKey).sort()).toEqual([
      'far-future',
      'implausible',
      'pre-1970',
      'surrogate-context',
      'surrogate-prompt',
      'surrogate-user',
    ]);
    expect(byKey['implausible']!.anomalies).toEqual(['tokens.input:implausible', 'timing.latencyMs:implausible']);
    const [implausible] = await queryRows<{
      input_tokens: string | null;
      output_tokens: string;
      sent_latency_ms: string | null;
      cost_usd: number | null;
    }>(clickhouse, "SELECT input_tokens, output_tokens, sent_latency_ms, cost_usd FROM usage_events WHERE event_key = 'implausible'");
    expect(implausible).toEqual({ input_tokens: null, output_tokens: '7', sent_latency_ms: null, cost_usd: null });
    expect(byKey['pre-1970']).toMatchObject({ anomalies: ['timing.startTime:out_of_range'], start_time_ms: null });
    // Bucketed at the gateway's receive time instead of an instant it cannot hold.
    expect(byKey['pre-1970']!.event_time).toBe('2026-11-22 12:00:00');
    expect(byKey['far-future']).toMatchObject({ anomalies: ['timing.lastTokenTime:out_of_range'] });
    expect(byKey['surrogate-user']).toMatchObject({ anomalies: ['user.id:not_well_formed'], user_id: 'u\ufffd' });
    expect(byKey['surrogate-context']!.anomalies).toEqual([]); // context is stored as JSON text, escapes and all
    expect(byKey['surrogate-prompt']).toMatchObject({ anomalies: ['io.prompt:not_well_formed'] });
    const [io] = await queryRows<{ prompt: string }>(clickhouse, "SELECT prompt FROM usage_io WHERE event_key = 'surrogate-prompt'");
    expect(io!.prompt).toBe('half a pair: \ufffd');

    const letters = await readDeadLetters(`${n.topic}.dlq`, (found) => found.length >= 2);
    expect(letters.map((letter) => letter.key).sort()).toEqual(['leap-second', 'offset-plus-01']);
    for (const letter of letters) {
      expect(letter.headers['x-dlq-reason']).toMatch(/does not match schema .*must match format "date-time"/);
      expect(letter.headers['x-dlq-reason-code']).toBe('schema_mismatch');
      // The gateway's request id travels with the dead letter and into the ingester's log.
      expect(letter.headers['x-request-id']).toBe(`req-${letter.key}`);
      expect(ingester.logs.some((line) => line.includes('dead-lettered') && line.includes(`"requestId":"req-${letter.key}"`))).toBe(true);
    }
    expect(ingester.child.exitCode).toBeNull();
  });
});

describe('a record that becomes a dead letter at load time', () => {
  it('is sent unchanged, its value read again from its compressed batch (the ingester does not hold it meanwhile)', async () => {
    const n = names('late-letter');
    const first = queued('clash', (record) => (record.request.modelId = 'first-model'));
    const second = queued('clash', (record) => (record.request.modelId = 'second-model'));
    const ingester = await startIngester(n);
    cleanups.push(() => ingester.stop());
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    const before = queuedRecords(sampleUsageRecords(10, { seed: 5 }), { eventKey: (index) => `before-${index}` });
    await produceQueued(n.topic, [...before, first], { partitions: 1, compression: 'snappy' });
    await eventually(async () => {
      const [row] = await queryRows<{ n: string }>(clickhouse, 'SELECT count() AS n FROM usage_events');
      return Number(row?.n) === 11;
    }, 30_000);
    // The same event key with another record: a collision, found only when its unit loads.
    const after = queuedRecords(sampleUsageRecords(10, { seed: 6 }), { eventKey: (index) => `after-${index}` });
    await produceQueued(n.topic, [after[0]!, second, ...after.slice(1)], {
      partitions: 1,
      compression: 'snappy',
      headers: (record) => ({ 'x-request-id': `req-${record.meta.eventKey}` }),
    });
    const [letter] = await readDeadLetters(`${n.topic}.dlq`, (found) => found.length >= 1);
    expect(letter!.headers['x-dlq-reason-code']).toBe('event_key_collision');
    expect(letter!.headers['x-request-id']).toBe('req-clash');
    expect(letter!.key).toBe('clash');
    expect(letter!.value).toBe(encodeWire(await registeredSchemaId(), JSON.stringify(second)).toString('latin1'));
    await eventually(async () => {
      const [row] = await queryRows<{ n: string }>(clickhouse, "SELECT count() AS n FROM usage_events WHERE event_key LIKE 'after-%'");
      return Number(row?.n) === 10;
    }, 30_000);
  });
});

describe('a row ClickHouse refuses', () => {
  it('is found by halving the batch and returned with ClickHouse code and message; every other row loads', async () => {
    const n = names('bisect');
    const stack = testStack();
    const settings = { url: stack.CLICKHOUSE_URL, username: 'default', password: '' };
    const server = createClickHouse({ ...settings, database: '' }, { database: null });
    const clickhouse = createClickHouse({ ...settings, database: n.database });
    cleanups.push(
      () => server.close(),
      () => clickhouse.close(),
    );
    await migrate(server, clickhouse, n.database);
    const prices = PriceTable.load();
    const records = queuedRecords(sampleUsageRecords(40, { seed: 21 }), { eventKey: (index) => `row-${index}` }).map((record) =>
      enrich(record, prices),
    );
    // Rows ClickHouse cannot read, as a bug in the encoder might write them: a
    // usage_events row and a usage_io row cut short. Each is the last of its table's
    // rows, so the rows before it stay aligned and the insert fails at its end
    // (a row cut short in the middle would shift the rows after it).
    const last = records.length - 1;
    records[last]!.io = null;
    const withIo = records.findLastIndex((record) => record.io !== null);
    const encoded = records.map(encodeRow);
    encoded[last] = { ...encoded[last]!, event: encoded[last]!.event.subarray(0, 20) };
    encoded[withIo] = { ...encoded[withIo]!, io: encoded[withIo]!.io!.subarray(0, 12) };
    const result = await loadIsolatingBadRows(clickhouse, encoded, (row) => row);
    expect(result.refused.map((refused) => refused.item.eventKey).sort()).toEqual([`row-${last}`, `row-${withIo}`].sort());
    for (const refused of result.refused) {
      expect(refused.code).toBeGreaterThan(0);
      expect(refused.message).toMatch(/DB::Exception/);
    }
    console.log(
      `refused: ${result.refused.map((refused) => `${refused.item.eventKey} code ${refused.code}: ${refused.message}`).join(' | ')}`,
    );
    expect(result.loaded).toHaveLength(38);
    const keys = await queryRows<{ event_key: string }>(clickhouse, 'SELECT event_key FROM usage_events GROUP BY event_key');
    // The record whose text was refused is not counted either: its event waits for its text.
    expect(keys.map((row) => row.event_key).sort()).toEqual(
      records
        .map((record) => record.event.event_key)
        .filter((key) => key !== `row-${last}` && key !== `row-${withIo}`)
        .sort(),
    );
  });
});

describe('a consumer kafkajs will not restart', () => {
  it('ends the process with a non-zero code, for its supervisor to restart', async () => {
    const n = names('crash');
    await produceQueued(n.topic, queuedRecords(sampleUsageRecords(1, { seed: 1 }), { eventKey: () => 'crash-1' }), { partitions: 1 });
    const ingester = await startIngester({ ...n, extraEnv: { INGEST_FAULT_INJECTION: 'consumer-crash' } });
    cleanups.push(() => ingester.stop());
    const code = await new Promise<number | null>((resolve) => {
      if (ingester.child.exitCode !== null) resolve(ingester.child.exitCode);
      const timer = setTimeout(() => resolve(null), 30_000);
      ingester.child.once('exit', (exitCode) => {
        clearTimeout(timer);
        resolve(exitCode);
      });
    });
    expect(code, ingester.logs.slice(-20).join('\n')).toBe(70);
    expect(ingester.logs.some((line) => line.includes('consumer crashed and will not restart'))).toBe(true);
  }, 60_000);
});

describe('property: whatever the gateway answers 202 is a row or a dead letter, and ingestion goes on', () => {
  it('generated hostile records through the real gateway, ingester and ClickHouse', async () => {
    const n = names('fuzz');
    const ingester = await startIngester({ ...n, extraEnv: { INGEST_RETRY_MAX_MS: 1000 } });
    const gateway = await startGateway({ topic: n.topic, keyPrefix: n.keyPrefix });
    cleanups.push(
      () => ingester.stop(),
      () => gateway.stop(),
    );
    const key = await createTestKey(n.keyPrefix, 'dev', 'fuzz');
    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());

    // Mostly ordinary values with hostile ones mixed in, so that many records pass the
    // gateway and carry an edge case each: the edges are what the store must survive.
    const now = Date.now();
    const instant = fc.oneof(
      {
        weight: 10,
        arbitrary: fc
          .date({ min: new Date(now - 30 * 86_400_000), max: new Date(now + 3600_000), noInvalidDate: true })
          .map((date) => date.toISOString()),
      },
      {
        weight: 2,
        arbitrary: fc.constantFrom(
          '1969-12-31T23:59:59Z',
          '1970-01-01T00:00:00Z',
          '1999-12-31T23:59:59.999Z',
          '2000-01-01T00:00:00Z',
          '2000-01-01T00:00:00.000000001+14:00',
          '2026-06-30T23:59:60Z',
          '2026-11-22T10:00:00+01',
          '2026-11-22T10:00:00+01:00',
          '2026-11-22T10:00:00.123456789-12:59',
          '2106-02-07T06:28:16Z',
          '9999-12-31T23:59:59Z',
          new Date(now + 23 * 3600_000).toISOString(),
          new Date(now + 25 * 3600_000).toISOString(),
        ),
      },
      {
        weight: 1,
        arbitrary: fc
          .date({ min: new Date('1960-01-01T00:00:00Z'), max: new Date('2110-01-01T00:00:00Z'), noInvalidDate: true })
          .map((date) => date.toISOString()),
      },
    );
    const text = fc.oneof(
      { weight: 10, arbitrary: fc.string({ minLength: 1, maxLength: 30 }) },
      { weight: 1, arbitrary: fc.string({ unit: 'binary', maxLength: 40 }) },
      { weight: 1, arbitrary: fc.constantFrom('\ud800', 'a\udfffb', '\u202Eevil', 'nul\u0000', 'tab\t', 'quote\'\\"', '🦜', '\u0085') },
    );
    // Token counts up to the plausible bound (100,000,000) mostly, and past it and past the schema now and then.
    const uint = fc.oneof(
      { weight: 10, arbitrary: fc.nat({ max: 100_000_000 }) },
      { weight: 1, arbitrary: fc.constantFrom(0, 100_000_000, 100_000_001, 2 ** 32, 2 ** 53 - 1, 2 ** 53, -1, 1.5) },
    );
    const context = fc.oneof(
      { weight: 3, arbitrary: fc.constant(undefined) },
      { weight: 3, arbitrary: fc.dictionary(text, fc.jsonValue({ maxDepth: 3 }), { maxKeys: 8 }) },
      { weight: 1, arbitrary: fc.dictionary(text, fc.jsonValue({ maxDepth: 9 }), { maxKeys: 70 }) },
      { weight: 1, arbitrary: fc.dictionary(fc.string({ maxLength: 5 }), fc.array(fc.integer(), { maxLength: 300 }), { maxKeys: 3 }) },
    );
    const record = fc.record({
      modelId: text,
      provider: text,
      userId: text,
      start: instant,
      first: instant,
      last: instant,
      input: uint,
      output: uint,
      prompt: text,
      context,
    });
    const bodies = fc.sample(record, { numRuns: 300, seed: 20261123 }).map((generated) => {
      const body: Record<string, unknown> = {
        request: { modelId: generated.modelId, provider: generated.provider, status: 'success' },
        user: { id: generated.userId, type: 'external' },
        tokens: { input: generated.input, output: generated.output },
        timing: { startTime: generated.start, firstTokenTime: generated.first, lastTokenTime: generated.last },
        io: { prompt: generated.prompt, response: 'ok' },
      };
      if (generated.context !== undefined) body.context = generated.context;
      return body;
    });

    const acceptedKeys: string[] = [];
    const statuses = new Map<number, number>();
    for (const [index, body] of bodies.entries()) {
      const answer = await postUsage(gateway.url, body, { 'x-api-key': key.key, 'idempotency-key': `fuzz-${index}` });
      statuses.set(answer.status, (statuses.get(answer.status) ?? 0) + 1);
      expect([202, 400], answer.text).toContain(answer.status);
      if (answer.status === 202) acceptedKeys.push(`${key.id}:fuzz-${index}`);
    }
    console.log(`fuzz: ${bodies.length} generated records, answers ${JSON.stringify(Object.fromEntries(statuses))}`);
    expect(acceptedKeys.length).toBeGreaterThan(20);

    // Every 202 is a row or a dead letter.
    const loadedKeys = async () =>
      new Set(
        (await queryRows<{ event_key: string }>(clickhouse, 'SELECT event_key FROM usage_events GROUP BY event_key')).map(
          (row) => row.event_key,
        ),
      );
    const letters = new Set<string>();
    await eventually(
      async () => {
        const loaded = await loadedKeys();
        const missing = acceptedKeys.filter((eventKey) => !loaded.has(eventKey));
        if (missing.length === 0) return true;
        for (const letter of await readDeadLetters(`${n.topic}.dlq`, () => false, 1500)) letters.add(letter.key);
        return missing.every((eventKey) => letters.has(eventKey));
      },
      60_000,
      1000,
    );

    // A good record posted afterwards completes within seconds, and the ingester never stopped.
    const answer = await postUsage(gateway.url, fixture('valid/success.json'), { 'x-api-key': key.key, 'idempotency-key': 'after-fuzz' });
    expect(answer.status).toBe(202);
    const postedAt = Date.now();
    await eventually(async () => (await loadedKeys()).has(`${key.id}:after-fuzz`), 15_000);
    console.log(`good record after the fuzz load loaded in ${Date.now() - postedAt} ms; dead letters: ${letters.size}`);
    expect(ingester.child.exitCode).toBeNull();
  }, 240_000);
});
