// The kafkajs RecordSource's own bookkeeping: which batches are still live and whose
// functions it keeps. kafkajs stands in as a minimal consumer that records the listeners
// and the batch handler it is given; no broker is involved.
import { describe, expect, it, vi } from 'vitest';
import { kafkajsRecordSource, type EachBatchPayload, type IncomingBatch } from './kafka.js';

function fakeConsumer() {
  const listeners = new Map<string, (() => void)[]>();
  let eachBatch: ((payload: EachBatchPayload) => Promise<void>) | undefined;
  const consumer = {
    events: { REBALANCING: 'consumer.rebalancing', GROUP_JOIN: 'consumer.group_join' },
    on(event: string, listener: () => void) {
      listeners.set(event, [...(listeners.get(event) ?? []), listener]);
      return () => undefined;
    },
    subscribe: async () => undefined,
    run: async (config: { eachBatch: (payload: EachBatchPayload) => Promise<void> }) => {
      eachBatch = config.eachBatch;
    },
    commitOffsets: async () => undefined,
    pause: () => undefined,
  };
  return {
    consumer: consumer as unknown as Parameters<typeof kafkajsRecordSource>[0],
    emit: (event: string) => listeners.get(event)?.forEach((listener) => listener()),
    /** Hands a batch of `partition` over as kafkajs would, with its own liveness and heartbeat. */
    batch: async (partition: number) => {
      const heartbeat = vi.fn(async () => undefined);
      await eachBatch!({
        batch: { topic: 'usage', partition, messages: [{ key: null, value: Buffer.from('{}'), offset: '0', timestamp: '0' }] },
        resolveOffset: () => undefined,
        heartbeat,
        isRunning: () => true,
        isStale: () => false,
      } as unknown as EachBatchPayload);
      return heartbeat;
    },
  };
}

describe('kafkajsRecordSource', () => {
  it('a batch handed over before the assignment may have changed is no longer live, and its heartbeat is not used', async () => {
    const fake = fakeConsumer();
    const handed: IncomingBatch[] = [];
    const assignments = vi.fn();
    await kafkajsRecordSource(fake.consumer).run({
      topic: 'usage',
      partitionsConcurrently: 2,
      onBatch: async (batch) => void handed.push(batch),
      onAssignment: assignments,
    });
    const firstHeartbeat = await fake.batch(0);
    await fake.batch(1);
    expect(handed.map((batch) => batch.live())).toEqual([true, true]);
    await handed[0]!.heartbeat();
    expect(firstHeartbeat).toHaveBeenCalledTimes(1);

    fake.emit('consumer.rebalancing');
    expect(assignments).toHaveBeenCalledTimes(1);
    expect(handed.map((batch) => batch.live())).toEqual([false, false]);
    await handed[0]!.heartbeat();
    expect(firstHeartbeat).toHaveBeenCalledTimes(1);

    // The partition comes back: its new batch is live, the one from before stays not.
    fake.emit('consumer.group_join');
    const secondHeartbeat = await fake.batch(0);
    expect(handed.map((batch) => batch.live())).toEqual([false, false, true]);
    await handed[0]!.heartbeat();
    await handed[2]!.heartbeat();
    expect(firstHeartbeat).toHaveBeenCalledTimes(1);
    expect(secondHeartbeat).toHaveBeenCalledTimes(1);
  });

  it("a later batch of the same partition answers for an earlier one's liveness and heartbeat (the earlier one's functions are let go)", async () => {
    const fake = fakeConsumer();
    const handed: IncomingBatch[] = [];
    await kafkajsRecordSource(fake.consumer).run({
      topic: 'usage',
      partitionsConcurrently: 1,
      onBatch: async (batch) => void handed.push(batch),
      onAssignment: () => undefined,
    });
    const first = await fake.batch(0);
    const second = await fake.batch(0);
    await handed[0]!.heartbeat();
    expect(first).not.toHaveBeenCalled();
    expect(second).toHaveBeenCalledTimes(1);
    expect(handed[0]!.live()).toBe(true);
  });
});
