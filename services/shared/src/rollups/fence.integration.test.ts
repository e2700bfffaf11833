// The fence in the real Redis: two jobs fencing the same interval (a re-costing and a
// rollup recount of the same day) each hold their own entry; one lifting its own leaves
// the interval fenced for the other. Tombstones Redis alone holds are copied to the
// ledger in ClickHouse.
import { afterAll, describe, expect, it } from 'vitest';
import { testStack, uniqueName } from '../../../../test/helpers/stack.js';
import { RollupFence } from './fence.js';
import { GUARDS_TABLE, GuardLedger, subjectDigest } from './guard-ledger.js';
import { createClickHouse } from '../clickhouse.js';
import { migrate } from '../migrate.js';
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

  it('tombstones Redis alone holds (written before the ledger) are copied to the ledger once, each with its time to live', async () => {
    if (redis.status === 'wait') await redis.connect();
    const database = uniqueName('fence_ledger').replace(/[^a-z0-9_]/gi, '_');
    const settings = { url: testStack().CLICKHOUSE_URL, username: 'default', password: '' };
    const server = createClickHouse({ ...settings, database: '' }, { database: null });
    const clickhouse = createClickHouse({ ...settings, database });
    try {
      await migrate(server, clickhouse, database);
      const prefix = `${uniqueName('tombstones')}:`;
      const ledger = new GuardLedger(clickhouse);
      const store = new RollupFence(redis, prefix, ledger);
      // As a job wrote them before migration 0013: in Redis only (a user id may hold a colon).
      const erasedAt = Date.now() - 60_000;
      await redis.set(`${prefix}erasure:prod:user-a`, String(erasedAt), 'EX', 3600);
      await redis.set(`${prefix}erasure:dev:org:user-b`, String(erasedAt + 1), 'EX', 3600);
      // One the ledger has already, and the fence's own key, which is no tombstone.
      await store.erase({ environment: 'prod', userId: 'user-c' }, erasedAt + 2, 3600);
      await redis.sadd(`${prefix}erasure-fence`, 'all:0:1:owner');
      const seen = async () => {
        const check = await ledger.beginInsert([
          { environment: 'prod', userId: 'user-a' },
          { environment: 'dev', userId: 'org:user-b' },
          { environment: 'prod', userId: 'user-c' },
          { environment: 'prod', userId: 'user-d' },
        ]);
        await ledger.endInsert(check.lease);
        return Object.fromEntries(check.erasedAt);
      };
      expect(await seen()).toEqual({ 'prod\u0000user-c': erasedAt + 2 });
      expect(await store.copyTombstonesToLedger()).toBe(2);
      expect(await seen()).toEqual({
        'prod\u0000user-a': erasedAt,
        'dev\u0000org:user-b': erasedAt + 1,
        'prod\u0000user-c': erasedAt + 2,
      });
      // Kept as long as Redis keeps it: the key's time to live, not a new one.
      const [copied] = await (
        await clickhouse.query({
          query: `SELECT max(expires_ms) AS expires FROM ${GUARDS_TABLE} WHERE kind = 'tombstone' AND id = '${subjectDigest({ environment: 'prod', userId: 'user-a' })}'`,
          format: 'JSONEachRow',
        })
      ).json<{ expires: string }>();
      expect(Math.abs(Number(copied!.expires) - (Date.now() + 3600_000))).toBeLessThan(10_000);
      expect(await store.copyTombstonesToLedger()).toBe(0);
    } finally {
      await server.command({ query: `DROP DATABASE IF EXISTS ${database}` });
      await Promise.all([server.close(), clickhouse.close()]);
    }
  });
});
