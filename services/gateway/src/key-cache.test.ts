// The key cache's timing logic with a stand-in store (no Redis): refresh-ahead
// answers from the entry while a look-up runs in the background, an expired entry
// waits for the store, and a deletion reaches the cache through the refresh.
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import type { ApiKeyRecord, KeyStore } from '@otm/shared/keys/key-store';
import type { Redis } from '@otm/shared/redis';
import { KeyCache } from './key-cache.js';

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

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('KeyCache', () => {
  it('answers from the entry and refreshes it in the background after half its lifetime', async () => {
    let current: ApiKeyRecord | null = record;
    let release: () => void = () => {};
    let slow = false;
    const fake = fakeStore(async () => {
      if (slow) await new Promise<void>((resolve) => (release = resolve));
      return current;
    });
    const cache = new KeyCache(fake.store, fakeSubscriber(), { hitTtlMs: 200, missTtlMs: 50, maxEntries: 10 });
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
    const cache = new KeyCache(fake.store, fakeSubscriber(), { hitTtlMs: 30, missTtlMs: 30, maxEntries: 10 });
    await cache.lookup('h');
    await sleep(40);
    const answer = cache.lookup('h');
    expect(answer).toBeInstanceOf(Promise);
    expect(await answer).toBe(record);
  });

  it('drops an entry at once on a deletion message', async () => {
    const fake = fakeStore(async () => record);
    const subscriber = fakeSubscriber();
    const cache = new KeyCache(fake.store, subscriber, { hitTtlMs: 10_000, missTtlMs: 50, maxEntries: 10 });
    await cache.start();
    await cache.lookup('h');
    (subscriber as unknown as EventEmitter).emit('message', 'revoked', 'h');
    expect(cache.lookup('h')).toBeInstanceOf(Promise);
  });
});
