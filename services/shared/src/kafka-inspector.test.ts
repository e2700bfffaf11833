import { describe, expect, it } from 'vitest';
import { cachedConsumerLag, openKafkaInspector, type Kafka } from './kafka.js';

/** A stand-in for kafkajs's client: counts the admin clients it makes; `fail` makes the next metadata request throw. */
function fakeKafka() {
  const made: { connected: boolean; disconnected: boolean }[] = [];
  let fail = false;
  const kafka = {
    admin() {
      const state = { connected: false, disconnected: false };
      made.push(state);
      return {
        connect: async () => void (state.connected = true),
        disconnect: async () => void (state.disconnected = true),
        fetchTopicMetadata: async () => {
          if (fail) {
            fail = false;
            throw new Error('broker went away');
          }
          return { topics: [] };
        },
        fetchTopicOffsets: async () => [{ partition: 0, high: '10', low: '0' }],
        fetchOffsets: async () => [{ topic: 't', partitions: [{ partition: 0, offset: '4' }] }],
      };
    },
  } as unknown as Kafka;
  return { kafka, made, failNext: () => void (fail = true) };
}

describe('openKafkaInspector', () => {
  it('connects at the first call and keeps the connection while calls succeed', async () => {
    const { kafka, made } = fakeKafka();
    const inspector = openKafkaInspector(kafka);
    expect(made).toHaveLength(0);
    await inspector.topicReachable('t');
    await inspector.topicReachable('t');
    expect(await inspector.consumerLag('g', 't')).toEqual([{ partition: 0, lag: 6 }]);
    expect(made).toHaveLength(1);
    expect(made[0]).toEqual({ connected: true, disconnected: false });
  });

  it('drops a connection after a failed call; the next call opens another', async () => {
    const { kafka, made, failNext } = fakeKafka();
    const inspector = openKafkaInspector(kafka);
    await inspector.topicReachable('t');
    failNext();
    await expect(inspector.topicReachable('t')).rejects.toThrow('broker went away');
    await new Promise((resolve) => setImmediate(resolve));
    expect(made[0]!.disconnected).toBe(true);
    await inspector.topicReachable('t');
    expect(made).toHaveLength(2);
    expect(made[1]!.disconnected).toBe(false);
  });

  it('close drops the connection, and a later call opens another', async () => {
    const { kafka, made } = fakeKafka();
    const inspector = openKafkaInspector(kafka);
    await inspector.topicReachable('t');
    await inspector.close();
    expect(made[0]!.disconnected).toBe(true);
    await inspector.topicReachable('t');
    expect(made).toHaveLength(2);
  });
});

describe('cachedConsumerLag', () => {
  it('reads at most once per period and forgets a failed read', async () => {
    let reads = 0;
    let fail = false;
    const lag = cachedConsumerLag(
      {
        consumerLag: async () => {
          reads++;
          if (fail) throw new Error('away');
          return [{ partition: 0, lag: reads }];
        },
      },
      'g',
      't',
      60_000,
    );
    expect(await lag()).toEqual([{ partition: 0, lag: 1 }]);
    expect(await lag()).toEqual([{ partition: 0, lag: 1 }]);
    expect(reads).toBe(1);
    const other = cachedConsumerLag(
      {
        consumerLag: async () => {
          reads++;
          if (fail) throw new Error('away');
          return [];
        },
      },
      'g',
      't',
      60_000,
    );
    fail = true;
    await expect(other()).rejects.toThrow('away');
    fail = false;
    await new Promise((resolve) => setImmediate(resolve));
    expect(await other()).toEqual([]);
  });
});
