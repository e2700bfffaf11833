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
});
