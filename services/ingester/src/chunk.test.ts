// A record leaves by one outcome: a second one, or none, is a fault the chunk reports
// instead of committing past it.
import { describe, expect, it } from 'vitest';
import type { IncomingRecord } from '@otm/shared/kafka';
import { deadLettersOf, settle, tally, type DecodedChunk } from './chunk.js';
import { deadLetter } from './outcome.js';

function chunkOf(count: number): DecodedChunk {
  const messages: IncomingRecord[] = Array.from({ length: count }, (_, index) => ({
    key: Buffer.from(`k-${index}`),
    value: Buffer.from(`v-${index}`),
    offset: String(10 + index),
    timestamp: '0',
    headers: index === 1 ? { 'x-request-id': 'req-1' } : {},
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
  it('counts each outcome once every record has one, and turns dead-letter outcomes into letters', () => {
    const chunk = chunkOf(3);
    settle(chunk, 0, { kind: 'loaded' });
    settle(chunk, 1, deadLetter('not_json', undefined));
    settle(chunk, 2, { kind: 'duplicate' });
    expect(tally([chunk])).toEqual({ loaded: 1, probe: 0, duplicate: 1, erased: 0, deadLetter: 1 });
    expect(deadLettersOf([chunk])).toEqual([
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

  it('refuses a record without an outcome and a second outcome for one record', () => {
    const chunk = chunkOf(2);
    settle(chunk, 0, { kind: 'loaded' });
    expect(() => tally([chunk])).toThrow('offset 11 of partition 3 has no outcome');
    expect(() => settle(chunk, 0, { kind: 'duplicate' })).toThrow('offset 10 of partition 3 was given a second outcome (duplicate)');
  });
});
