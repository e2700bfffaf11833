// Every Kafka codec loads: records from a producer that is not kafkajs (Python's
// confluent-kafka, librdkafka underneath, with `compression.type` set) are read by the
// real ingester and stored in ClickHouse exactly once, for gzip, snappy, lz4 and zstd;
// and a topic whose `compression.type` is zstd (the broker recompresses every batch,
// the gateway's included) still loads everything the gateway answered 202.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigResourceTypes } from 'kafkajs';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { createKafka, ensureTopic } from '@otm/shared/kafka';
import { createRegistry, registerJsonSchema } from '@otm/shared/registry';
import { pythonWith, runPython } from './helpers/python.js';
import {
  createTestKey,
  eventually,
  fixture,
  postUsage,
  queryRows,
  startGateway,
  startIngester,
  testClickHouse,
  testNames,
  testStack,
  type ServiceProcess,
} from './helpers/stack.js';

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
    const admin = kafka.admin();
    await admin.connect();
    await admin.alterConfigs({
      validateOnly: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: n.topic, configEntries: [{ name: 'compression.type', value: 'zstd' }] }],
    });
    const described = await admin.describeConfigs({
      includeSynonyms: false,
      resources: [{ type: ConfigResourceTypes.TOPIC, name: n.topic, configNames: ['compression.type'] }],
    });
    await admin.disconnect();
    expect(described.resources[0]!.configEntries[0]!.configValue).toBe('zstd');

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
