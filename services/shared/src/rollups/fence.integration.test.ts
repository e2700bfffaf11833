// The fence in the real Redis: two jobs fencing the same interval (a re-costing and a
// rollup recount of the same day) each hold their own entry; one lifting its own leaves
// the interval fenced for the other.
import { afterAll, describe, expect, it } from 'vitest';
import { testStack, uniqueName } from '../../../../test/helpers/stack.js';
import { RollupFence } from './fence.js';
import { createRedis } from '../redis.js';

const redis = createRedis(testStack().REDIS_URL, { name: 'erasures-test' });
afterAll(() => redis.quit());

describe('the fence', () => {
  it('two jobs on the same day: the interval stays fenced until both have lifted theirs', async () => {
    await redis.connect();
    const store = new RollupFence(redis, `${uniqueName('fence')}:`, null);
    const day = { kind: 'all' as const, fromMs: Date.UTC(2026, 10, 25), toMs: Date.UTC(2026, 10, 26) };
    const fencedNow = async () => {
      const check = await store.beginInsert([]);
      await store.endInsert(check.lease);
      return check.fenced.map(({ kind, fromMs, toMs }) => ({ kind, fromMs, toMs }));
    };
    const recost = await store.fence([day]);
    const recount = await store.fence([day]);
    expect(recost[0]!.owner).not.toBe(recount[0]!.owner);
    expect(await fencedNow()).toEqual([day, day]);
    await store.liftFence(recost);
    expect(await fencedNow()).toEqual([day]);
    await store.liftFence(recount);
    expect(await fencedNow()).toEqual([]);
  });
});
