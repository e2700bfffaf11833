// Every Kafka codec loads: records from a producer that is not kafkajs (Python's
// confluent-kafka, librdkafka underneath, with `compression.type` set) are read by the
// real ingester and stored in ClickHouse exactly once, for gzip, snappy, lz4 and zstd;
// and a topic whose `compression.type` is zstd (the broker recompresses every batch,
// the gateway's included) still loads everything the gateway answered 202. A batch
// the ingester cannot decode (a fault injected into its snappy codec) stops only its
// own partition, is named in the log and the metrics, and is skipped by the runbook's
// command with an audit entry.
import path from 'node:path';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { CompressionTypes, createDurableProducer, createKafka, ensureTopic, setTopicSettings, topicSettings } from '@otm/shared/kafka';
import { createRegistry, encodeWire, registerJsonSchema } from '@otm/shared/registry';
import { queuedRecords, sampleUsageRecords } from './fixtures/sample-records.js';
import { pythonWith, runPython } from './helpers/python.js';
import {
  createTestKey,
  eventually,
  fixture,
  postUsage,
  projectRoot,
  stackEnv,
  queryRows,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  testStack,
  type ServiceProcess,
} from './helpers/stack.js';

const run = promisify(execFile);
const stack = testStack();
const kafka = createKafka({ brokers: stack.KAFKA_BROKERS.split(','), clientId: 'codecs-test' });
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

describe('records compressed by another client', () => {
  const n = testNames('codecs');
  const clickhouse = testClickHouse(n.database);
  let python: string | undefined;
  let ingester: ServiceProcess;

  beforeAll(async () => {
    python = await pythonWith(['examples/python-producer/requirements.txt']);
    await ensureTopic(kafka, n.topic, 3);
    await registerJsonSchema(createRegistry(stack.SCHEMA_REGISTRY_URL), `${n.topic}-value`, buildQueuedRecordSchema());
    ingester = await startIngester(n);
    cleanups.push(
      () => ingester.stop(),
      () => clickhouse.close(),
    );
  });

  it.for(['gzip', 'snappy', 'lz4', 'zstd'])('%s: every record loads exactly once', async (codec, context) => {
    if (!python) return context.skip('python3 is not on the PATH: the Python producer needs it');
    const produce = async () =>
      JSON.parse(
        await runPython(python!, [
          'examples/python-producer/producer.py',
          ...['--brokers', stack.KAFKA_BROKERS, '--registry', stack.SCHEMA_REGISTRY_URL, '--topic', n.topic],
          ...['--count', '20', '--producer-name', `codec-${codec}`, '--compression', codec],
        ]),
      ) as { produced: number };
    expect((await produce()).produced).toBe(20);
    const stored = async () =>
      Number(
        (
          await queryRows<{ n: string }>(
            clickhouse,
            `SELECT count() AS n FROM usage_events FINAL WHERE gateway_id = 'direct:codec-${codec}'`,
          )
        )[0]!.n,
      );
    await eventually(async () => (await stored()) === 20, 60_000);
    // Sent again (a retried backfill): the same keys, nothing counted twice.
    expect((await produce()).produced).toBe(20);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect(await stored()).toBe(20);
    const raw = await queryRows<{ n: string }>(
      clickhouse,
      `SELECT count() AS n FROM usage_events WHERE gateway_id = 'direct:codec-${codec}'`,
    );
    expect(Number(raw[0]!.n)).toBe(20);
    expect(ingester.child.exitCode).toBeNull();
  });
});

describe('a topic compressed with zstd by the broker', () => {
  it('every record the gateway answered 202 is in ClickHouse once', async () => {
    const n = testNames('zstdtopic');
    await ensureTopic(kafka, n.topic, 3);
    await setTopicSettings(kafka, n.topic, { 'compression.type': 'zstd' });
    expect(await topicSettings(kafka, n.topic, ['compression.type'])).toEqual({ 'compression.type': 'zstd' });

    const [gateway, ingester] = await Promise.all([startGateway(n), startIngester(n)]);
    const clickhouse = testClickHouse(n.database);
    cleanups.push(
      () => gateway.stop(),
      () => ingester.stop(),
      () => clickhouse.close(),
    );
    const key = (await createTestKey(n.keyPrefix, 'qa', 'zstd')).key;
    const requestIds: string[] = [];
    for (let i = 0; i < 30; i++) {
      const answer = await postUsage(gateway.url, fixture('valid/success.json'), { 'x-api-key': key });
      expect(answer.status, answer.text).toBe(202);
      requestIds.push(answer.body.requestId);
    }
    const stored = async () => queryRows<{ request_id: string }>(clickhouse, 'SELECT request_id FROM usage_events');
    await eventually(async () => (await stored()).length === 30, 60_000);
    expect(new Set((await stored()).map((row) => row.request_id))).toEqual(new Set(requestIds));
    expect(ingester.child.exitCode).toBeNull();
  });
});

describe('a batch the ingester cannot decode', () => {
  it('stops only its partition, is named in the log and the metrics, and the runbook skips it', async () => {
    const n = testNames('undecodable');
    await ensureTopic(kafka, n.topic, 3);
    const schemaId = await registerJsonSchema(createRegistry(stack.SCHEMA_REGISTRY_URL), `${n.topic}-value`, buildQueuedRecordSchema());
    const records = queuedRecords(sampleUsageRecords(35, { seed: 39 }), { eventKey: (index) => `undecodable-${index}` });
    const message = (index: number) => ({ key: `undecodable-${index}`, value: encodeWire(schemaId, JSON.stringify(records[index])) });
    const batch = (partition: number, from: number, compression: number) => ({
      topic: n.topic,
      acks: -1,
      compression,
      messages: [0, 1, 2, 3, 4].map((i) => ({ ...message(from + i), partition })),
    });
    const producer = createDurableProducer(kafka, { retries: 5, maxRetryTimeMs: 30_000 });
    await producer.connect();
    // Every partition: 5 records (gzip) before; partition 1 then a snappy batch of 5
    // (offsets 5..9); every partition 5 more after. Records 0-14 before, 15-19 snappy, 20-34 after.
    for (const partition of [0, 1, 2]) await producer.send(batch(partition, partition * 5, CompressionTypes.GZIP));
    await producer.send(batch(1, 15, CompressionTypes.Snappy));
    for (const partition of [0, 1, 2]) await producer.send(batch(partition, 20 + partition * 5, CompressionTypes.GZIP));
    await producer.disconnect();

    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    const faulty = { extraEnv: { INGEST_FAULT_INJECTION: 'undecodable-snappy' } };
    let ingester = await startIngester({ ...n, ...faulty });
    cleanups.push(() => ingester.stop());
    const loadedKeys = async () =>
      new Set((await queryRows<{ event_key: string }>(clickhouse, 'SELECT event_key FROM usage_events FINAL')).map((row) => row.event_key));
    const keys = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `undecodable-${from + i}`);
    // Partitions 0 and 2 load whole; partition 1 up to the batch.
    const expected = [...keys(0, 15), ...keys(20, 25), ...keys(30, 35)];
    await eventually(async () => (await loadedKeys()).size >= expected.length, 60_000);
    const line = await ingester.waitForLog(/cannot be decoded/, 10_000);
    expect(JSON.parse(line)).toMatchObject({
      topic: n.topic,
      partition: 1,
      firstOffset: '5',
      lastOffset: '9',
      codec: 'snappy',
      reason: expect.stringContaining('injected fault'),
    });
    const metrics = await (await fetch(`http://127.0.0.1:${ingester.metricsPort}/metrics`)).text();
    expect(metrics).toContain(`otm_ingester_undecodable_batches_total{topic="${n.topic}",partition="1"} 1`);
    expect(metrics).toContain(`otm_ingester_stopped_partitions{topic="${n.topic}",partition="1"} 1`);
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    expect([...(await loadedKeys())].sort()).toEqual(expected.sort());
    expect(ingester.child.exitCode).toBeNull();

    // The runbook: stop the ingesters, skip the batch (audited), start them again.
    await ingester.stop();
    const skip = await run(
      path.join(projectRoot, 'node_modules', '.bin', 'tsx'),
      ['--conditions=otm-source', 'scripts/skip-batch.ts', '--partition', '1', '--from', '5', '--through', '9', '--reason', 'test'],
      { cwd: projectRoot, env: stackEnv({ USAGE_TOPIC: n.topic, INGEST_GROUP_ID: n.groupId, CLICKHOUSE_DATABASE: n.database }) },
    );
    expect(skip.stdout).toContain('skipped offsets 5..9');
    const audit = await queryRows<{ action: string; target: string; details: string }>(
      clickhouse,
      "SELECT action, target, details FROM admin_audit WHERE action = 'kafka.skip'",
    );
    expect(audit).toHaveLength(1);
    expect(audit[0]!.target).toBe(`${n.topic}/1`);
    expect(JSON.parse(audit[0]!.details)).toMatchObject({ fromOffset: '5', throughOffset: '9', reason: 'test' });
    ingester = await startIngester({ ...n, ...faulty });
    const everythingButTheBatch = [...keys(0, 15), ...keys(20, 35)];
    await eventually(async () => (await loadedKeys()).size >= everythingButTheBatch.length, 60_000);
    expect([...(await loadedKeys())].sort()).toEqual(everythingButTheBatch.sort());
  });
});
