// The dedupe step against the real Redis: which keys it reports seen, across its
// MGET chunks of 1,000 keys, with repeats inside one batch; and which it reports as
// collisions (the key seen with another record).
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
    await dedupe.markSeen(marked.map((eventKey) => ({ eventKey, digest: `d-${eventKey}` })));

    // Every key once, then the first 100 again (repeats inside one batch).
    const items = [...keys, ...keys.slice(0, 100)].map((key, index) => ({ key, index }));
    const { fresh, duplicates, collisions } = await dedupe.filterSeen(
      items,
      (item) => item.key,
      (item) => `d-${item.key}`,
    );
    expect(collisions).toEqual([]);

    const expected = keys.filter((_, i) => i % 3 !== 0);
    expect(fresh.map((item) => item.key)).toEqual(expected);
    expect(fresh.every((item) => item.index < keys.length)).toBe(true);
    expect(duplicates).toBe(items.length - expected.length);
    expect(await redis.ttl(`${prefix}seen:${marked[0]}`)).toBeGreaterThan(50);
  });

  it('the same key with another record is a collision, in the batch and across batches; marks without a digest stay duplicates', async () => {
    redis ??= createRedis(testStack().REDIS_URL, { name: 'dedupe-test' });
    if (redis.status === 'wait') await redis.connect();
    const prefix = `${uniqueName('collide')}:`;
    const dedupe = new DedupeStep(redis, prefix, 60);
    await dedupe.markSeen([{ eventKey: 'a', digest: 'A' }]);
    await redis.set(`${prefix}seen:legacy`, '1'); // as ingesters before digests marked
    const items = [
      { key: 'a', digest: 'A' }, // a retry: duplicate
      { key: 'a', digest: 'B' }, // same key, other record: collision
      { key: 'legacy', digest: 'X' }, // marked without a digest: duplicate
      { key: 'new', digest: 'N' },
      { key: 'new', digest: 'N' }, // repeated in the batch, same record: duplicate
      { key: 'new', digest: 'M' }, // repeated in the batch, other record: collision
    ];
    const check = await dedupe.filterSeen(
      items,
      (item) => item.key,
      (item) => item.digest,
    );
    expect(check.fresh).toEqual([{ key: 'new', digest: 'N' }]);
    expect(check.duplicates).toBe(3);
    expect(check.collisions).toEqual([
      { key: 'a', digest: 'B' },
      { key: 'new', digest: 'M' },
    ]);
  });
});
