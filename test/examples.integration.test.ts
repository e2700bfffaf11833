// The examples of examples/ against the real stack, run the way their READMEs say:
// the Python consumer and producer with pip-installed packages in a virtualenv made
// here (skipped, saying so, only when python3 is absent), the TypeScript consumer with
// tsx. Each reads or writes a topic of its own; the counts and sums are checked.
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, type QueuedUsageRecord } from '@otm/schemas';
import { createKafka, ensureTopic, keyPartition } from '@otm/shared/kafka';
import { createRegistry, registerJsonSchema } from '@otm/shared/registry';
import { queuedRecords, sampleUsageRecords } from './fixtures/sample-records.js';
import { produceQueued } from './helpers/produce.js';
import { pythonWith, runPython } from './helpers/python.js';
import {
  eventually,
  projectRoot,
  queryRows,
  readTopic,
  startIngester,
  testClickHouse,
  testNames,
  testStack,
  uniqueName,
} from './helpers/stack.js';

const run = promisify(execFile);
const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

const REQUIREMENTS = ['examples/python-consumer/requirements.txt', 'examples/python-producer/requirements.txt'];

type Sums = Record<string, { records: number; input: number; output: number; cachedInput: number; reasoning: number }>;

/** What every consumer example must print for these records. */
function expectedSums(records: QueuedUsageRecord[]): Sums {
  const sums: Sums = {};
  for (const { record } of records) {
    const model = `${record.request.provider}/${record.request.modelId}`;
    const entry = (sums[model] ??= { records: 0, input: 0, output: 0, cachedInput: 0, reasoning: 0 });
    entry.records += 1;
    entry.input += record.tokens?.input ?? 0;
    entry.output += record.tokens?.output ?? 0;
    entry.cachedInput += record.tokens?.cachedInput ?? 0;
    entry.reasoning += record.tokens?.reasoning ?? 0;
  }
  return Object.fromEntries(Object.entries(sums).sort(([a], [b]) => a.localeCompare(b)));
}

/** A topic holding 60 records as the gateways write them, some with schema-v2 token detail. */
async function topicWithRecords(label: string): Promise<{ topic: string; records: QueuedUsageRecord[] }> {
  const topic = uniqueName(label);
  const records = queuedRecords(sampleUsageRecords(60, { seed: 21 }), { eventKey: (index) => `${label}-${index}` });
  records.forEach((queued, index) => {
    if (index % 3 === 0 && queued.record.tokens) {
      queued.record.tokens.cachedInput = Math.floor(queued.record.tokens.input / 2);
      queued.record.tokens.reasoning = Math.floor(queued.record.tokens.output / 3);
    }
  });
  await produceQueued(topic, records, { partitions: 3 });
  return { topic, records };
}

const stack = testStack();

describe('examples/python-consumer', () => {
  it('reads every record through the registry and prints the token sums per model', async (context) => {
    const python = await pythonWith(REQUIREMENTS);
    if (!python) return context.skip('python3 is not on the PATH: the Python examples need it');
    const { topic, records } = await topicWithRecords('pycons');
    const output = await runPython(python, [
      'examples/python-consumer/consumer.py',
      ...['--brokers', stack.KAFKA_BROKERS, '--registry', stack.SCHEMA_REGISTRY_URL],
      ...['--topic', topic, '--group', uniqueName('pycons'), '--idle-seconds', '4'],
    ]);
    expect(JSON.parse(output)).toEqual(expectedSums(records));
  });
});

describe('examples/typescript-consumer', () => {
  it('reads every record through the registry and prints the token sums per model', async () => {
    const { topic, records } = await topicWithRecords('tscons');
    const { stdout } = await run(
      path.join(projectRoot, 'node_modules', '.bin', 'tsx'),
      [
        'examples/typescript-consumer/consumer.ts',
        ...['--brokers', stack.KAFKA_BROKERS, '--registry', stack.SCHEMA_REGISTRY_URL],
        ...['--topic', topic, '--group', uniqueName('tscons'), '--idle-seconds', '4'],
      ],
      { cwd: projectRoot, timeout: 120_000 },
    );
    expect(JSON.parse(stdout.trim().split('\n').at(-1)!)).toEqual(expectedSums(records));
  });
});

describe('examples/python-producer', () => {
  it("writes records the documented way: they land on the gateways' partitions and appear in ClickHouse once, re-run or not", async (context) => {
    const python = await pythonWith(REQUIREMENTS);
    if (!python) return context.skip('python3 is not on the PATH: the Python examples need it');
    const n = testNames('pyprod');
    // The topic and its subject as a gateway leaves them at start.
    await ensureTopic(createKafka({ brokers: stack.KAFKA_BROKERS.split(','), clientId: 'examples-test' }), n.topic, 3);
    const schemaId = await registerJsonSchema(createRegistry(stack.SCHEMA_REGISTRY_URL), `${n.topic}-value`, buildQueuedRecordSchema());
    const ingester = await startIngester(n);
    cleanups.push(() => ingester.stop());

    const produce = async () =>
      JSON.parse(
        await runPython(python, [
          'examples/python-producer/producer.py',
          ...['--brokers', stack.KAFKA_BROKERS, '--registry', stack.SCHEMA_REGISTRY_URL],
          ...['--topic', n.topic, '--count', '30', '--producer-name', 'pytest-backfill'],
        ]),
      ) as { produced: number; eventKeys: string[]; sums: Record<string, { records: number; input: number; output: number }> };
    const first = await produce();
    expect(first.produced).toBe(30);

    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    const stored = async () =>
      queryRows<{ model: string; records: string; input: string; output: string; gateways: string[] }>(
        clickhouse,
        `SELECT concat(provider, '/', model_id) AS model, count() AS records, sum(input_tokens) AS input, sum(output_tokens) AS output,
                groupUniqArray(gateway_id) AS gateways
         FROM usage_events GROUP BY model ORDER BY model`,
      );
    const total = async () => (await stored()).reduce((sum, row) => sum + Number(row.records), 0);
    await eventually(async () => (await total()) === 30, 60_000);
    expect(
      Object.fromEntries(
        (await stored()).map((row) => [row.model, { records: Number(row.records), input: Number(row.input), output: Number(row.output) }]),
      ),
    ).toEqual(first.sums);
    expect(new Set((await stored()).flatMap((row) => row.gateways))).toEqual(new Set(['direct:pytest-backfill']));

    // Keys partitioned as the gateways partition them (kafkajs's murmur2 default).
    const onTopic = await readTopic(n.topic, (found) => found.length === 30);
    for (const message of onTopic) {
      expect(message.partition, message.key).toBe(keyPartition(message.key, 3));
      expect(message.schemaId).toBe(schemaId);
      expect(message.headers?.['x-schema-id']?.toString()).toBe(String(schemaId));
      expect(message.headers?.['content-type']?.toString()).toBe('application/json; framing=schema-registry');
    }

    // A re-run writes the same keys with the same records: nothing is stored twice.
    const second = await produce();
    expect(second.eventKeys).toEqual(first.eventKeys);
    await readTopic(n.topic, (found) => found.length === 60);
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(await total()).toBe(30);
  });
});
