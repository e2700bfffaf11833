// The key cache's timing logic with a stand-in store (no Redis): refresh-ahead
// answers from the entry while a look-up runs in the background, an expired entry
// waits for the store, and a deletion reaches the cache through the refresh.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ApiKeyRecord, KeyStore } from '@otm/shared/keys/key-store';
import type { Redis } from '@otm/shared/redis';
import { KeyCache } from './key-cache.js';
import { setTimeout as sleep } from 'node:timers/promises';

const record = { id: 'key_1', environment: 'prod' } as unknown as ApiKeyRecord;

function fakeStore(answer: () => Promise<ApiKeyRecord | null>) {
  let lookups = 0;
  const store = {
    revocationChannel: 'revoked',
    findByHash: () => {
      lookups++;
      return answer();
    },
  } as unknown as KeyStore;
  return { store, lookups: () => lookups };
}

function fakeSubscriber(): Redis {
  const emitter = new EventEmitter();
  return Object.assign(emitter, { connect: async () => {}, subscribe: async () => {} }) as unknown as Redis;
}

describe('KeyCache', () => {
  it('answers from the entry and refreshes it in the background after half its lifetime', async () => {
    let current: ApiKeyRecord | null = record;
    let release: () => void = () => {};
    let slow = false;
    const fake = fakeStore(async () => {
      if (slow) await new Promise<void>((resolve) => (release = resolve));
      return current;
    });
    const cache = new KeyCache(fake.store, fakeSubscriber(), { hitTtlMs: 200, missTtlMs: 50, maxEntries: 10, maxUnknownEntries: 10 });
    expect(await cache.lookup('h')).toBe(record);
    expect(fake.lookups()).toBe(1);

    await sleep(120); // past half the lifetime, within it
    slow = true; // the store is slow now: the request must not wait for it
    expect(cache.lookup('h')).toBe(record);
    expect(fake.lookups()).toBe(2);
    expect(cache.lookup('h')).toBe(record); // one refresh at a time
    expect(fake.lookups()).toBe(2);

    current = null; // the key was deleted meanwhile; the refresh brings that back
    release();
    await sleep(5);
    expect(cache.lookup('h')).toBeNull();
  });

  it('waits for the store once an entry has expired', async () => {
    const fake = fakeStore(async () => record);
    const cache = new KeyCache(fake.store, fakeSubscriber(), { hitTtlMs: 30, missTtlMs: 30, maxEntries: 10, maxUnknownEntries: 10 });
    await cache.lookup('h');
    await sleep(40);
    const answer = cache.lookup('h');
    expect(answer).toBeInstanceOf(Promise);
    expect(await answer).toBe(record);
  });

  it('drops an entry at once on a deletion message', async () => {
    const fake = fakeStore(async () => record);
    const subscriber = fakeSubscriber();
    const cache = new KeyCache(fake.store, subscriber, { hitTtlMs: 10_000, missTtlMs: 50, maxEntries: 10, maxUnknownEntries: 10 });
    await cache.start();
    await cache.lookup('h');
    (subscriber as unknown as EventEmitter).emit('message', 'revoked', 'h');
    expect(cache.lookup('h')).toBeInstanceOf(Promise);
  });

  it('a flood of unknown keys never pushes a valid key out, and an unknown digest is asked for once while remembered', async () => {
    const fake = fakeStore(async () => null);
    const valid = fakeStore(async () => record);
    const store = {
      revocationChannel: 'revoked',
      findByHash: (hash: string) => (hash === 'valid' ? valid.store.findByHash(hash) : fake.store.findByHash(hash)),
    } as unknown as KeyStore;
    const cache = new KeyCache(store, fakeSubscriber(), { hitTtlMs: 10_000, missTtlMs: 10_000, maxEntries: 10, maxUnknownEntries: 100 });
    expect(await cache.lookup('valid')).toBe(record);
    for (let i = 0; i < 1000; i++) expect(await cache.lookup(`unknown-${i}`)).toBeNull();
    expect(valid.lookups()).toBe(1);
    expect(cache.peek('valid')).toBe(record); // still held, without asking the store
    expect(cache.lookup('valid')).toBe(record);
    expect(valid.lookups()).toBe(1);
    const before = fake.lookups();
    expect(cache.lookup('unknown-999')).toBeNull(); // remembered: no round trip
    expect(fake.lookups()).toBe(before);
    expect(cache.peek('never-seen')).toBeUndefined();
  });
  it('while the store fails, a known key is answered from its last entry until outageTtlMs, an unknown key is not', async () => {
    let down = false;
    const fake = fakeStore(async () => {
      if (down) throw new Error('connection is closed');
      return record;
    });
    const cache = new KeyCache(fake.store, fakeSubscriber(), {
      hitTtlMs: 50,
      missTtlMs: 50,
      maxEntries: 10,
      maxUnknownEntries: 10,
      outageTtlMs: 400,
    });
    await cache.start();
    expect(await cache.lookup('known')).toBe(record);
    down = true;
    await sleep(80); // expired: the look-up fails, the entry answers
    expect(await cache.lookup('known')).toBe(record);
    expect(cache.storeFailingSince).toBeGreaterThan(0);
    // Failing a moment ago: answered at once, the store not asked again within the second.
    const asked = fake.lookups();
    for (let i = 0; i < 20; i++) expect(await cache.lookup('known')).toBe(record);
    expect(fake.lookups()).toBe(asked);
    await expect(Promise.resolve().then(() => cache.lookup('never-seen'))).rejects.toThrow('connection is closed');
    await sleep(1100); // past outageTtlMs since the last good look-up: refused (the caller answers 503)
    await expect(Promise.resolve().then(() => cache.lookup('known'))).rejects.toThrow('connection is closed');
    down = false;
    expect(await cache.lookup('known')).toBe(record);
    expect(cache.storeFailingSince).toBe(0);
  });

  it('without outageTtlMs a failing store refuses even known keys once their entry expired', async () => {
    let down = false;
    const fake = fakeStore(async () => {
      if (down) throw new Error('down');
      return record;
    });
    const cache = new KeyCache(fake.store, fakeSubscriber(), { hitTtlMs: 30, missTtlMs: 30, maxEntries: 10, maxUnknownEntries: 10 });
    await cache.start();
    expect(await cache.lookup('known')).toBe(record);
    down = true;
    await sleep(50);
    await expect(Promise.resolve().then(() => cache.lookup('known'))).rejects.toThrow('down');
  });

  it('a lost subscription keeps the entries until it is back, then asks every key again (deletions may have been missed)', async () => {
    const fake = fakeStore(async () => record);
    const subscriber = fakeSubscriber();
    const cache = new KeyCache(fake.store, subscriber, { hitTtlMs: 10_000, missTtlMs: 50, maxEntries: 10, maxUnknownEntries: 10 });
    await cache.start();
    await cache.lookup('known');
    (subscriber as unknown as EventEmitter).emit('error', new Error('ECONNREFUSED'));
    (subscriber as unknown as EventEmitter).emit('reconnecting');
    expect(cache.peek('known')).toBe(record);
    (subscriber as unknown as EventEmitter).emit('ready');
    expect(cache.peek('known')).toBeUndefined();
    // A ready without a loss before it (the first connection) empties nothing.
    await cache.lookup('known');
    (subscriber as unknown as EventEmitter).emit('ready');
    expect(cache.peek('known')).toBe(record);
  });

  it('a subscription back before the store answers again keeps known keys answered (a Redis killed and restarted)', async () => {
    // The subscriber's connection can be ready while the look-ups still fail (the other
    // connection reconnecting, or the server loading its data): the entries must be
    // asked again, not dropped, or every key is refused until the look-ups work.
    let down = false;
    let current: ApiKeyRecord | null = record;
    const fake = fakeStore(async () => {
      if (down) throw new Error('LOADING Redis is loading the dataset in memory');
      return current;
    });
    const subscriber = fakeSubscriber();
    const cache = new KeyCache(fake.store, subscriber, {
      hitTtlMs: 10_000,
      missTtlMs: 50,
      maxEntries: 10,
      maxUnknownEntries: 10,
      outageTtlMs: 60_000,
    });
    await cache.start();
    expect(await cache.lookup('known')).toBe(record);
    down = true;
    (subscriber as unknown as EventEmitter).emit('error', new Error('ECONNRESET'));
    (subscriber as unknown as EventEmitter).emit('reconnecting');
    (subscriber as unknown as EventEmitter).emit('ready');
    // No longer answered without asking (a deletion may have been missed) ...
    expect(cache.peek('known')).toBeUndefined();
    const asked = fake.lookups();
    // ... but while the store fails, answered from the last entry, as in any outage.
    expect(await cache.lookup('known')).toBe(record);
    expect(fake.lookups()).toBe(asked + 1);
    // Once the store answers, a key deleted meanwhile is refused.
    down = false;
    current = null;
    await sleep(1100);
    expect(await cache.lookup('known')).toBeNull();
  });
});
