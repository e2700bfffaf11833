// The foundation: each real service of the stack does what the pipeline needs of
// it, through the same client modules the services use.
import { afterAll, describe, expect, it } from 'vitest';
import { createKafka, createDurableProducer, ensureTopic } from '@otm/shared/kafka';
import { createRegistry, decodeWire, encodeWire, fetchJsonSchema, registerJsonSchema } from '@otm/shared/registry';
import { createClickHouse } from '@otm/shared/clickhouse';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { projectRoot, queryRows, readTopic, testStack, uniqueName, withRedis } from './helpers/stack.js';
import { SOURCE_FLAGS } from '../scripts/lib/service-process.js';

describe('local stack', () => {
  const stack = testStack();
  const clickhouse = createClickHouse({ url: stack.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
  afterAll(() => clickhouse.close());

  it('Kafka: an idempotent acks=all producer writes a record that a consumer group reads back', async () => {
    const topic = uniqueName('stack-kafka');
    const kafka = createKafka({ brokers: stack.KAFKA_BROKERS.split(','), clientId: 'stack-test' });
    await ensureTopic(kafka, topic, 2);
    const producer = createDurableProducer(kafka, { retries: 3, maxRetryTimeMs: 5000 });
    await producer.connect();
    const payload = encodeWire(7, JSON.stringify({ meta: { n: 1 }, record: { hello: 'kafka' } }));
    await producer.send({ topic, acks: -1, messages: [{ key: 'k1', value: payload }] });
    await producer.disconnect();

    const records = await readTopic(topic, (all) => all.length >= 1, 20_000);
    expect(records).toHaveLength(1);
    expect(records[0]!.key).toBe('k1');
    expect(records[0]!.schemaId).toBe(7);
    expect(records[0]!.value).toEqual({ meta: { n: 1 }, record: { hello: 'kafka' } });
  });

  it("Kafka's own tools through npm run stack -- kafka: create a topic, list it, produce a line, consume it", async () => {
    const topic = uniqueName('stack-tools');
    const bootstrap = ['--bootstrap-server', stack.KAFKA_BROKERS.split(',')[0]!];
    const tool = (args: string[], input?: string) =>
      spawnSync(process.execPath, [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/stack.ts'), 'kafka', ...args, ...bootstrap], {
        input,
        encoding: 'utf8',
        timeout: 60_000,
      });
    expect(tool(['topics', '--create', '--topic', topic, '--partitions', '2']).status).toBe(0);
    expect(tool(['topics', '--list']).stdout.split('\n')).toContain(topic);
    expect(tool(['console-producer', '--topic', topic], 'hello from the console producer\n').status).toBe(0);
    const consumed = tool(['console-consumer', '--topic', topic, '--from-beginning', '--max-messages', '1', '--timeout-ms', '30000']);
    expect(consumed.stdout.trim()).toBe('hello from the console producer');
  }, 120_000);

  it('Apicurio: registers a JSON schema through the Confluent API and returns it by id', async () => {
    const registry = createRegistry(stack.SCHEMA_REGISTRY_URL);
    const subject = uniqueName('stack-subject');
    const schema = { $id: `urn:test:${subject}`, type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] };
    const id = await registerJsonSchema(registry, subject, schema);
    expect(id).toBeGreaterThan(0);
    // The same content registers to the same id (idempotent registration).
    expect(await registerJsonSchema(registry, subject, schema)).toBe(id);
    expect(await fetchJsonSchema(registry, id)).toEqual(schema);
    // The registry says the schema type is JSON (a missing type would mean Avro to clients).
    const response = await fetch(`${stack.SCHEMA_REGISTRY_URL}/schemas/ids/${id}`);
    expect(((await response.json()) as { schemaType?: string }).schemaType).toBe('JSON');
    const decoded = decodeWire(encodeWire(id, '{"n":1}'));
    expect(decoded).toEqual({ ok: true, schemaId: id, json: '{"n":1}' });
  });

  it('Redis: writes and reads a key with a TTL', async () => {
    const key = uniqueName('stack-redis');
    await withRedis(async (redis) => {
      await redis.set(key, 'value', 'EX', 60);
      expect(await redis.get(key)).toBe('value');
      expect(await redis.ttl(key)).toBeGreaterThan(0);
    });
  });

  it('ClickHouse: creates a table, inserts JSONEachRow rows and selects them', async () => {
    const table = uniqueName('stack_ch');
    await clickhouse.command({
      query: `CREATE TABLE ${table} (id UInt64, name String, at DateTime, n Nullable(UInt64)) ENGINE = MergeTree ORDER BY id`,
    });
    await clickhouse.insert({
      table,
      values: [
        { id: 1, name: 'one', at: '2026-11-22 10:00:00', n: null },
        { id: 2, name: 'two', at: '2026-11-22 10:00:01', n: 5 },
      ],
      format: 'JSONEachRow',
    });
    const rows = await queryRows<{ id: string; name: string; n: string | null }>(
      clickhouse,
      `SELECT id, name, n FROM ${table} ORDER BY id`,
    );
    expect(rows.map((row) => [Number(row.id), row.name, row.n === null ? null : Number(row.n)])).toEqual([
      [1, 'one', null],
      [2, 'two', 5],
    ]);
    await clickhouse.command({ query: `DROP TABLE ${table}` });
  });
});
