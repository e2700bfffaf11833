import { describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { PENDING_PRINTS, ReplayMemory } from './replay-memory.js';

const reply = (n: number) => ({
  requestId: `0193a2b4-c5d6-7e8f-9a0b-${n.toString(16).padStart(12, '0')}`,
  timestamp: new Date(Date.UTC(2026, 10, 25, 12, 0, 0, n % 1000)).toISOString(),
  digest: createHash('sha256').update(`record ${n}`).digest('base64url'),
});

describe('ReplayMemory', () => {
  it('answers exactly what it was given, by key', () => {
    const memory = new ReplayMemory(10, 3_600_000, () => Date.UTC(2026, 10, 25, 12, 30));
    memory.set('key:a', reply(1));
    memory.set('key:b', reply(2));
    expect(memory.get('key:a')).toEqual(reply(1));
    expect(memory.get('key:b')).toEqual(reply(2));
    expect(memory.get('key:c')).toBeUndefined();
    // The same key again takes its own slot again.
    memory.set('key:a', reply(3));
    expect(memory.get('key:a')).toEqual(reply(3));
    expect(memory.size).toBe(2);
  });

  it('the oldest key leaves when it is full', () => {
    const memory = new ReplayMemory(3, 3_600_000, () => Date.UTC(2026, 10, 25, 12, 30));
    for (let n = 0; n < 5; n++) memory.set(`key:${n}`, reply(n));
    expect([0, 1, 2, 3, 4].map((n) => memory.get(`key:${n}`)?.requestId)).toEqual([
      undefined,
      undefined,
      reply(2).requestId,
      reply(3).requestId,
      reply(4).requestId,
    ]);
    expect(memory.size).toBe(3);
  });

  it('a key older than the time to live is not answered', () => {
    let now = Date.UTC(2026, 10, 25, 12, 0, 0, 500);
    const memory = new ReplayMemory(4, 60_000, () => now);
    memory.set('key:a', reply(500));
    now += 59_000;
    expect(memory.get('key:a')).toEqual(reply(500));
    now += 2_000;
    expect(memory.get('key:a')).toBeUndefined();
  });

  it('values without the compact form are kept as they are', () => {
    const memory = new ReplayMemory(4, 3_600_000, () => Date.UTC(2026, 10, 25, 12, 30));
    const odd = { requestId: 'REQ-1', timestamp: '2026-11-25T12:00:00Z', digest: 'not base64url of 32 bytes' };
    memory.set('key:odd', odd);
    expect(memory.get('key:odd')).toEqual(odd);
    memory.set('key:odd', reply(7));
    expect(memory.get('key:odd')).toEqual(reply(7));
  });

  it('100,000 keys: every one answered, in fixed memory', () => {
    const memory = new ReplayMemory(100_000, 3_600_000, () => Date.UTC(2026, 10, 25, 12, 30));
    for (let n = 0; n < 100_000; n++) memory.set(`tenant:idempotency-${n}`, reply(n));
    let found = 0;
    for (let n = 0; n < 100_000; n += 97) if (memory.get(`tenant:idempotency-${n}`)?.digest === reply(n).digest) found++;
    expect(found).toBe(Math.ceil(100_000 / 97));
  });

  it('a key missed, then set, is answered the same whether its fingerprint was still kept or had left the ring', () => {
    const memory = new ReplayMemory(10, 3_600_000, () => Date.UTC(2026, 10, 25, 12, 30));
    // Missed twice (two requests with the key in hand at once), set once: kept fingerprints of it are taken out.
    expect(memory.get('key:early')).toBeUndefined();
    expect(memory.get('key:early')).toBeUndefined();
    expect(memory.get('key:kept')).toBeUndefined();
    // Enough other misses to push key:early out of the ring, not key:kept's second place.
    for (let n = 0; n < PENDING_PRINTS - 1; n++) memory.get(`key:miss-${n}`);
    expect(memory.pendingPrints).toBe(PENDING_PRINTS);
    memory.set('key:early', reply(1));
    memory.set('key:kept', reply(2));
    memory.set('key:never-missed', reply(3));
    expect(memory.get('key:early')).toEqual(reply(1));
    expect(memory.get('key:kept')).toEqual(reply(2));
    expect(memory.get('key:never-missed')).toEqual(reply(3));
    expect(memory.pendingPrints).toBeLessThanOrEqual(PENDING_PRINTS);
  });
});
