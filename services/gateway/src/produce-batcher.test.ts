// Pure batching logic with a stand-in producer (no broker): coalescing, byte caps,
// deadlines and producer resets. The real broker path is in the integration tests.
import { describe, expect, it } from 'vitest';
import type { RecordSender } from '@otm/shared/kafka';
import { ProduceBatcher, ProduceUnavailableError } from './produce-batcher.js';

/** A sender in memory (the Kafka seam's interface), acknowledging as `behaviour` says. */
function fakeProducer(behaviour: (records: number) => Promise<void>) {
  const sends: number[] = [];
  let resets = 0;
  const sender: RecordSender = {
    send: async (_topic, records) => {
      sends.push(records.length);
      await behaviour(records.length);
    },
    close: async () => {},
  };
  return { sends, resets: () => resets, factory: { current: async () => sender, reset: async () => void resets++ } };
}

const options = { topic: 't', lingerMs: 5, maxBatchRecords: 100, maxBatchBytes: 1000, maxQueuedRecords: 1000, sendTimeoutMs: 200 };
const message = (bytes = 10) => ({ key: 'k', value: Buffer.alloc(bytes) });

describe('ProduceBatcher', () => {
  it('coalesces concurrent records into one send and answers each when it is acknowledged', async () => {
    const fake = fakeProducer(async () => {});
    const batcher = new ProduceBatcher(fake.factory, options);
    await Promise.all(Array.from({ length: 50 }, () => batcher.enqueue(message())));
    expect(fake.sends).toEqual([50]);
  });

  it('tells one listener the outcome of each of its records, by the slot it gave, once', async () => {
    const fake = fakeProducer(async () => {});
    const batcher = new ProduceBatcher(fake.factory, { ...options, maxQueuedRecords: 3 });
    const heard: [number, string][] = [];
    let done!: () => void;
    const all = new Promise<void>((resolve) => (done = resolve));
    const listener = {
      settled(slot: number, error: Error | undefined) {
        heard.push([slot, error === undefined ? 'acknowledged' : error.constructor.name]);
        if (heard.length === 4) done();
      },
    };
    for (const slot of [7, 8, 9, 10]) batcher.put(message(), listener, slot);
    // The fourth is past the queue's bound: refused at once, before the others are sent.
    expect(heard).toEqual([[10, 'ProduceUnavailableError']]);
    await all;
    expect(heard.sort(([a], [b]) => a - b)).toEqual([
      [7, 'acknowledged'],
      [8, 'acknowledged'],
      [9, 'acknowledged'],
      [10, 'ProduceUnavailableError'],
    ]);
    expect(fake.sends).toEqual([3]);
  });

  it('caps a batch by records and by bytes; records queued during a send go in the next one', async () => {
    const fake = fakeProducer(() => new Promise((resolve) => setTimeout(resolve, 10)));
    const batcher = new ProduceBatcher(fake.factory, { ...options, maxBatchRecords: 30 });
    await Promise.all(Array.from({ length: 70 }, () => batcher.enqueue(message())));
    expect(fake.sends.reduce((a, b) => a + b, 0)).toBe(70);
    expect(Math.max(...fake.sends)).toBeLessThanOrEqual(30);
    const bytes = fakeProducer(async () => {});
    const byteBatcher = new ProduceBatcher(bytes.factory, options);
    await Promise.all(Array.from({ length: 10 }, () => byteBatcher.enqueue(message(400))));
    expect(Math.max(...bytes.sends)).toBe(2);
  });

  it('a failed send rejects every record of its batch and resets the producer', async () => {
    const fake = fakeProducer(async () => {
      throw new Error('broker gone');
    });
    const batcher = new ProduceBatcher(fake.factory, options);
    const results = await Promise.allSettled([batcher.enqueue(message()), batcher.enqueue(message())]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(ProduceUnavailableError);
    expect(fake.resets()).toBe(1);
  });

  it('answers within the deadline when the broker hangs', async () => {
    const fake = fakeProducer(() => new Promise(() => {}));
    const batcher = new ProduceBatcher(fake.factory, options);
    const started = Date.now();
    await expect(batcher.enqueue(message())).rejects.toBeInstanceOf(ProduceUnavailableError);
    const queuedBehind = batcher.enqueue(message());
    await expect(queuedBehind).rejects.toBeInstanceOf(ProduceUnavailableError);
    expect(Date.now() - started).toBeLessThan(2 * options.sendTimeoutMs + 250);
  });

  it('refuses new records when the queue is full and after drain()', async () => {
    const fake = fakeProducer(() => new Promise((resolve) => setTimeout(resolve, 50)));
    const batcher = new ProduceBatcher(fake.factory, { ...options, maxQueuedRecords: 2 });
    const accepted = [batcher.enqueue(message()), batcher.enqueue(message())];
    await expect(batcher.enqueue(message())).rejects.toThrow(/full/);
    await batcher.drain();
    await Promise.all(accepted);
    await expect(batcher.enqueue(message())).rejects.toThrow(/shutting down/);
  });
});

describe('ProduceBatcher queue bytes', () => {
  it('refuses a record that would take the queued bytes over maxQueuedBytes, and takes records again once sent', async () => {
    let release: () => void = () => {};
    const fake = fakeProducer(() => new Promise<void>((resolve) => (release = resolve)));
    const batcher = new ProduceBatcher(fake.factory, { ...options, lingerMs: 0, maxBatchBytes: 100, maxQueuedBytes: 250 });
    const inFlight = batcher.enqueue(message(100)); // sent at once: no longer queued
    await new Promise((resolve) => setTimeout(resolve, 10));
    const queued = [batcher.enqueue(message(100)), batcher.enqueue(message(100))]; // 200 of 250 queued
    await expect(batcher.enqueue(message(100))).rejects.toThrow(/full/);
    release();
    await inFlight;
    await new Promise((resolve) => setTimeout(resolve, 10)); // the next batch takes one record out of the queue
    const again = batcher.enqueue(message(100));
    for (let i = 0; i < 3; i++) {
      release();
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await Promise.all([...queued, again]);
  });

  it('takes a record larger than maxQueuedBytes when the queue is empty', async () => {
    const fake = fakeProducer(async () => {});
    const batcher = new ProduceBatcher(fake.factory, { ...options, maxQueuedBytes: 50 });
    await batcher.enqueue(message(500));
    expect(fake.sends).toEqual([1]);
  });
});

describe('ProduceBatcher with several producers', () => {
  it('keeps up to maxInFlightBatches batches in flight, one per producer', async () => {
    let concurrent = 0;
    let peak = 0;
    const slots = Array.from({ length: 3 }, () =>
      fakeProducer(async () => {
        concurrent++;
        peak = Math.max(peak, concurrent);
        await new Promise((resolve) => setTimeout(resolve, 20));
        concurrent--;
      }),
    );
    const batcher = new ProduceBatcher(
      slots.map((slot) => slot.factory),
      { ...options, maxBatchRecords: 10, maxInFlightBatches: 3 },
    );
    await Promise.all(Array.from({ length: 60 }, () => batcher.enqueue(message())));
    expect(peak).toBe(3);
    expect(slots.reduce((sum, slot) => sum + slot.sends.reduce((a, b) => a + b, 0), 0)).toBe(60);
  });
});
