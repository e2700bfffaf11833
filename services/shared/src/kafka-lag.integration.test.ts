// consumerLag against the local stack's broker: what the admin service's GET /v1/pipeline
// and the dashboard's ingest backlog read.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { testStack, uniqueName } from '../../../test/helpers/stack.js';
import { consumerLag, createKafka, ensureTopic, openKafkaInspector, type Admin } from './kafka.js';

const kafka = createKafka({ brokers: testStack().KAFKA_BROKERS.split(','), clientId: 'lag-test' });
let admin: Admin;
beforeAll(async () => {
  admin = kafka.admin();
  await admin.connect();
});
afterAll(async () => {
  await admin.disconnect();
});

describe('consumerLag', () => {
  it('a topic not created yet is no partitions and nothing behind, answered at once (not an unavailable Kafka after its retries)', async () => {
    const started = performance.now();
    expect(await consumerLag(admin, uniqueName('lag-group'), uniqueName('lag.absent'))).toEqual([]);
    expect(performance.now() - started).toBeLessThan(2_000);
    // Through the inspector the admin service uses, which drops its connection on an error.
    const inspector = openKafkaInspector(kafka);
    try {
      expect(await inspector.consumerLag(uniqueName('lag-group'), uniqueName('lag.absent'))).toEqual([]);
    } finally {
      await inspector.close();
    }
  });

  it('a topic with records and a group that never committed: every record behind, per partition', async () => {
    const topic = uniqueName('lag.present');
    await ensureTopic(kafka, topic, 2);
    const producer = kafka.producer();
    await producer.connect();
    try {
      await producer.send({
        topic,
        messages: [
          { partition: 0, value: 'a' },
          { partition: 0, value: 'b' },
          { partition: 1, value: 'c' },
        ],
      });
    } finally {
      await producer.disconnect();
    }
    const lag = await consumerLag(admin, uniqueName('lag-group'), topic);
    expect(lag.sort((a, b) => a.partition - b.partition)).toEqual([
      { partition: 0, lag: 2 },
      { partition: 1, lag: 1 },
    ]);
    await admin.deleteTopics({ topics: [topic] });
  });
});
