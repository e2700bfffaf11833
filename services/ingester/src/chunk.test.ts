// A record leaves by one outcome: a second one, or none, is a fault the chunk reports
// instead of committing past it.
import { describe, expect, it } from 'vitest';
import { codecs } from '@otm/shared/kafka-codecs';
import { deadLettersOf, held, settle, tally, type DecodedChunk, type HeldRecord } from './chunk.js';
import { deadLetter } from './outcome.js';

function chunkOf(count: number): DecodedChunk {
  const messages: HeldRecord[] = Array.from({ length: count }, (_, index) => ({
    key: Buffer.from(`k-${index}`),
    value: Buffer.from(`v-${index}`),
    offset: String(10 + index),
    timestamp: '0',
    ...(index === 1 ? { requestId: 'req-1' } : {}),
  }));
  return {
    topic: 'usage',
    partition: 3,
    messages,
    rows: count,
    bytes: 0,
    items: [],
    probes: [],
    outcomes: [],
    oldestMs: 0,
    alive: () => true,
    heartbeat: async () => undefined,
  };
}

describe('chunk outcomes', () => {
  it('counts each outcome once every record has one, and turns dead-letter outcomes into letters', async () => {
    const chunk = chunkOf(3);
    settle(chunk, 0, { kind: 'loaded' });
    settle(chunk, 1, deadLetter('not_json', undefined));
    settle(chunk, 2, { kind: 'duplicate' });
    expect(tally([chunk])).toEqual({ loaded: 1, probe: 0, duplicate: 1, erased: 0, deadLetter: 1 });
    expect(await deadLettersOf([chunk])).toEqual([
      {
        topic: 'usage',
        partition: 3,
        offset: '11',
        key: Buffer.from('k-1'),
        value: Buffer.from('v-1'),
        code: 'not_json',
        reason: 'value is not valid JSON',
        headers: { 'x-request-id': 'req-1' },
      },
    ]);
  });

  it('holds nothing of the fetched batch: the key copied, the request id as text, the value read again from the compressed batch', async () => {
    // Past Node's pool (4 KiB): a small batch's output may share a pool slab with any copy made after it.
    const batch = Buffer.concat([Buffer.from('key-1value-1key-2value-2'), Buffer.alloc(8192, 0x20)]);
    const decompressed = await codecs.snappy.decompress(await codecs.snappy.compress({ buffer: batch }));
    const message = {
      key: decompressed.subarray(0, 5),
      value: decompressed.subarray(5, 12),
      headers: { 'x-request-id': decompressed.subarray(12, 17), 'content-type': decompressed.subarray(17, 24) },
      offset: '7',
      timestamp: '1',
    };
    const kept = held(message, false);
    expect(kept).toMatchObject({ key: Buffer.from('key-1'), value: null, requestId: 'key-2', offset: '7', timestamp: '1' });
    expect(kept.key!.buffer).not.toBe(decompressed.buffer);
    expect((await kept.recover!()).toString()).toBe('value-1');

    // A dead letter already: its value copied, sent with its unit.
    const letter = held(message, true);
    expect(letter.value!.toString()).toBe('value-1');
    expect(letter.value!.buffer).not.toBe(decompressed.buffer);
    expect(letter.recover).toBeUndefined();

    // Not from a codec that can read it again (an uncompressed batch): kept as fetched.
    const plain = held({ ...message, value: batch.subarray(5, 12) }, false);
    expect(plain.value!.buffer).toBe(batch.buffer);
    expect(plain.value!.toString()).toBe('value-1');
    expect(plain.recover).toBeUndefined();

    // A record to be loaded that became a dead letter at load time is sent unchanged.
    const chunk = chunkOf(1);
    chunk.messages = [kept];
    settle(chunk, 0, deadLetter('clickhouse_refused', { code: 27, message: 'bad' }));
    expect((await deadLettersOf([chunk]))[0]).toMatchObject({ key: Buffer.from('key-1'), value: Buffer.from('value-1'), offset: '7' });
  });

  it('refuses a record without an outcome and a second outcome for one record', () => {
    const chunk = chunkOf(2);
    settle(chunk, 0, { kind: 'loaded' });
    expect(() => tally([chunk])).toThrow('offset 11 of partition 3 has no outcome');
    expect(() => settle(chunk, 0, { kind: 'duplicate' })).toThrow('offset 10 of partition 3 was given a second outcome (duplicate)');
  });
});
