// ensureTopic against a broker that has just started (a broker of the test's own):
// topics created many at a time are all usable when it returns. Right after its start
// a KRaft broker answers "unknown topic" for a moment after creating one, and kafkajs's
// own wait for leaders gave up on that (a benchmark's gateway died of it).
import { afterAll, describe, expect, it } from 'vitest';
import { startPrivateKafka, type PrivateService } from '../../../test/helpers/private-services.js';
import { uniqueName } from '../../../test/helpers/stack.js';
import { createKafka, ensureTopic, type Admin } from './kafka.js';

let admin: Admin | undefined;
let broker: PrivateService | undefined;
afterAll(async () => {
  await admin?.disconnect();
  await broker?.stop();
});

describe('ensureTopic', () => {
  it('50 new topics, 10 at a time, on a fresh broker: every one returns with a leader on each partition', async () => {
    broker = await startPrivateKafka(29392);
    const kafka = createKafka({ brokers: [broker.address], clientId: 'ensure-topic-test' });
    const topics: string[] = [];
    for (let round = 0; round < 5; round++) {
      const batch = Array.from({ length: 10 }, (_, i) => uniqueName(`ensure.${round}.${i}`));
      topics.push(...batch);
      await Promise.all(batch.map((topic) => ensureTopic(kafka, topic, 6)));
    }
    admin = kafka.admin();
    await admin.connect();
    const { topics: described } = await admin.fetchTopicMetadata({ topics });
    expect(described).toHaveLength(50);
    for (const topic of described) {
      expect(topic.partitions).toHaveLength(6);
      expect(topic.partitions.every((partition) => partition.leader >= 0)).toBe(true);
    }
    // An existing topic keeps its partitions.
    await ensureTopic(kafka, topics[0]!, 3);
    const [again] = (await admin.fetchTopicMetadata({ topics: [topics[0]!] })).topics;
    expect(again!.partitions).toHaveLength(6);
    await admin.deleteTopics({ topics });
  });
});
