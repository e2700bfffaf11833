// The three-broker profile (npm start -- --kafka-brokers 3): on brokers of the
// test's own, a new topic has three replicas of each partition and needs two in sync,
// and acks=all writes still succeed with one broker killed: every message acknowledged
// by either client the gateway can produce with is readable afterwards.
import { afterAll, describe, expect, it } from 'vitest';
import { createKafka, ensureTopic, type RecordSender } from '@otm/shared/kafka';
import { PRODUCER_CLIENTS, openRecordSender } from '@otm/shared/kafka-senders';
import { loadStackConfig, stackAddresses } from '../scripts/stack/config.js';
import { kafkaServices } from '../scripts/stack/services.js';
import { eventually, uniqueName } from './helpers/stack.js';

const config = loadStackConfig({
  OTM_STACK_DIR: '.stack/test-kafka-r3',
  OTM_STACK_KAFKA_BROKERS: '3',
  OTM_STACK_KAFKA_PORT: '29592',
  OTM_STACK_KAFKA_CONTROLLER_PORT: '29593',
  OTM_STACK_KAFKA_HEAP_MB: '256',
});
const brokers = kafkaServices(config);
afterAll(async () => {
  for (const broker of brokers) await broker.down();
});

describe('three-broker Kafka profile', () => {
  it('topics get replication factor 3 and min.insync.replicas 2; acks=all writes go on with one broker killed', async () => {
    for (const broker of brokers) await broker.start();
    await Promise.all(brokers.map((broker) => broker.waitHealthy(broker.startTimeoutMs)));
    const addresses = stackAddresses(config).KAFKA_BROKERS;
    expect(addresses.split(',')).toHaveLength(3);
    const kafka = createKafka({ brokers: addresses.split(','), clientId: 'replicated-test' });
    const topic = uniqueName('replicated');
    await ensureTopic(kafka, topic, 3);

    const admin = kafka.admin();
    await admin.connect();
    const { topics } = await admin.fetchTopicMetadata({ topics: [topic] });
    expect(topics[0]!.partitions.map((partition) => partition.replicas.length)).toEqual([3, 3, 3]);
    // The broker asked may not know the new topic yet ("does not host this
    // topic-partition", seen once on a fresh clone): asked again until it does.
    const described = await eventually(() =>
      admin.describeConfigs({
        resources: [{ type: 2, name: topic, configNames: ['min.insync.replicas'] }],
        includeSynonyms: false,
      }),
    );
    expect(described.resources[0]!.configEntries.find((entry) => entry.configName === 'min.insync.replicas')?.configValue).toBe('2');
    await admin.disconnect();

    // As the gateway sends, on each client it can produce with: acknowledged only when every
    // record was, else sent again on a new sender (the gateway answers 503 and the client
    // retries the same records).
    const settings = { brokers: addresses.split(','), clientId: 'replicated-test' };
    const senders = new Map<string, RecordSender>();
    const send = async (client: (typeof PRODUCER_CLIENTS)[number], from: number) => {
      const records = Array.from({ length: 50 }, (_, i) => ({ key: `${client}-k${from + i}`, value: Buffer.from(`v${from + i}`) }));
      await eventually(
        async () => {
          const sender = senders.get(client) ?? (await openRecordSender(client, kafka, settings, { retries: 10, maxRetryTimeMs: 30_000 }));
          senders.set(client, sender);
          try {
            await sender.send(topic, records);
          } catch (error) {
            senders.delete(client);
            await sender.close().catch(() => undefined);
            throw error;
          }
          return true;
        },
        60_000,
        500,
      );
    };
    for (const client of PRODUCER_CLIENTS) await send(client, 0);
    expect(brokers[1]!.signal('SIGKILL')).toBe(true);
    // Two of three replicas remain: acks=all still means "on two brokers".
    for (const client of PRODUCER_CLIENTS) await send(client, 50);
    for (const sender of senders.values()) await sender.close();

    // Every key acknowledged is on the topic (a resend may have written some twice:
    // at least once, as the ingester expects).
    const keys = new Set<string>();
    const consumer = kafka.consumer({ groupId: uniqueName('replicated-reader'), maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    await consumer.run({ eachMessage: async ({ message }) => void keys.add(String(message.key)) });
    await eventually(async () => keys.size >= 100 * PRODUCER_CLIENTS.length, 60_000).catch(() => undefined);
    await consumer.disconnect();
    expect(keys.size).toBe(100 * PRODUCER_CLIENTS.length);
  }, 180_000);
});
