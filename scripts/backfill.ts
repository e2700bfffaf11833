// Copies the records stored before migrations 0008 and 0009 into their rollups
// (services/shared/src/rollups/backfill.ts), as every ingester does by itself at start;
// resumable, with its progress printed:
//   npm run backfill
// Reads the ClickHouse and Redis settings from the environment, like the ingester.
import { Command } from 'commander';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { BACKFILL_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { dayLevelsLedger } from '@otm/shared/rollups/day-levels';
import { createRedis, redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import { backfillRollups } from '@otm/shared/rollups/backfill';
import { randomUUID } from 'node:crypto';

new Command('backfill')
  .description(
    'Copy the records stored before migrations 0008 and 0009 into their rollups, day ranges under a fence, resumable (CLICKHOUSE_* and REDIS_* variables say where)',
  )
  .parse(process.argv);

const config = parseConfig(process.env, infrastructureSpec);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);
const settings = clickhouseSettingsFrom(config);
const clickhouse = createClickHouse(settings, { requestTimeoutMs: BACKFILL_TIMEOUT_MS });
const redis = createRedis(config.REDIS_URL, redisOptionsFrom(config, 'backfill-cli'));
await redis.connect();
const lock = `${redisPrefix}rollup-backfill-lock`;
const token = randomUUID();
try {
  if ((await redis.set(lock, token, 'PX', 3_600_000, 'NX')) !== 'OK') {
    console.error('another backfill is running (an ingester, or this command elsewhere); try again later');
    process.exitCode = 1;
  } else {
    const outcome = await backfillRollups(
      clickhouse,
      new RollupFence(redis, redisPrefix, new GuardLedger(clickhouse), dayLevelsLedger(clickhouse)),
      {
        cluster: config.CLICKHOUSE_CLUSTER,
        log: (line) => console.log(line),
      },
    );
    console.log(`${outcome.days} days, ${outcome.rows} records copied; ${outcome.done ? 'done' : 'not done'}`);
  }
} finally {
  if ((await redis.get(lock)) === token) await redis.del(lock);
  redis.disconnect();
  await clickhouse.close();
}
