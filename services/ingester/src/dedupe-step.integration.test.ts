// The dedupe step against the real Redis: which keys it reports seen, across its
// MGET chunks of 1,000 keys, with repeats inside one batch.
import { afterAll, describe, expect, it } from 'vitest';
import { createRedis, type Redis } from '@otm/shared/redis';
import { testStack, uniqueName } from '../../../test/helpers/stack.js';
import { DedupeStep } from './dedupe-step.js';

let redis: Redis | undefined;
afterAll(() => redis?.quit());

describe('dedupe step', () => {
  it('over 2,500 keys: marked keys are dropped, repeats count once, the rest stay in order', async () => {
    redis = createRedis(testStack().REDIS_URL, { name: 'dedupe-test' });
    await redis.connect();
    const prefix = `${uniqueName('dedupe')}:`;
    const dedupe = new DedupeStep(redis, prefix, 60);
    const keys = Array.from({ length: 2500 }, (_, i) => `k${i}`);
    const marked = keys.filter((_, i) => i % 3 === 0);
    await dedupe.markSeen(marked);

    // Every key once, then the first 100 again (repeats inside one batch).
    const items = [...keys, ...keys.slice(0, 100)].map((key, index) => ({ key, index }));
    const { fresh, duplicates } = await dedupe.filterSeen(items, (item) => item.key);

    const expected = keys.filter((_, i) => i % 3 !== 0);
    expect(fresh.map((item) => item.key)).toEqual(expected);
    expect(fresh.every((item) => item.index < keys.length)).toBe(true);
    expect(duplicates).toBe(items.length - expected.length);
    expect(await redis.ttl(`${prefix}seen:${marked[0]}`)).toBeGreaterThan(50);
  });
});
