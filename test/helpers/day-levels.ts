// The day rollups a job builds (services/shared/src/rollups/day-levels.ts), built by a
// test that reads them: every day the hours hold, today's too, as if it were over.
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { DAY_BUILD_LOCK, buildDays, dayLevelsLedger, type DayBuildFence } from '@otm/shared/rollups/day-levels';
import { RollupFence } from '@otm/shared/rollups/fence';
import { withRedis } from './stack.js';

const DAY_MS = 86_400_000;

/** Where nothing loads: no lease to wait for, no ingester reading the watermark from Redis. */
const QUIET: DayBuildFence = { setDayWatermark: async () => {}, waitForInsertsInFlight: async () => {} };

/**
 * Builds every day the hours hold, today included. With the Redis key prefix of the
 * ingesters that load into the database, it holds their builders' lock (an ingester
 * builds days too), waits for their leases and writes the watermark where they read it
 * (their records of the days built mark them after). Ingesters of other prefixes loading
 * into the same database build days too: their locks (`otherBuilders`) are held as well,
 * so that no run of theirs builds a day at the same time.
 */
export async function buildEveryDay(
  clickhouse: ClickHouseClient,
  redisKeyPrefix?: string,
  otherBuilders: readonly string[] = [],
): Promise<number[]> {
  const build = async (fence: DayBuildFence) =>
    (await buildDays(clickhouse as never, fence, { nowMs: Date.now() + 2 * DAY_MS, delayMs: 0, maxDays: 100_000, maxWeeks: 100_000 }))
      .built;
  if (redisKeyPrefix === undefined) return build(QUIET);
  return withRedis(async (redis) => {
    const token = randomUUID();
    const locks = [redisKeyPrefix, ...otherBuilders].map((prefix) => `${prefix}${DAY_BUILD_LOCK}`);
    const held: string[] = [];
    try {
      for (const lock of locks) {
        const deadline = Date.now() + 120_000;
        while ((await redis.set(lock, token, 'PX', 600_000, 'NX')) !== 'OK') {
          if (Date.now() > deadline) throw new Error(`${lock}: held for two minutes`);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
        held.push(lock);
      }
      return await build(new RollupFence(redis, redisKeyPrefix, null, dayLevelsLedger(clickhouse as never)));
    } finally {
      for (const lock of held) if ((await redis.get(lock)) === token) await redis.del(lock);
    }
  });
}
