// What the commands that rebuild rollups share (recost, remove-records): ClickHouse and
// Redis reached first (a clear message and exit code when either is not), the fence on
// both (Redis and its copy in ClickHouse), the audit log's refusal said as such, both
// connections closed however the job ends.
import os from 'node:os';
import { AuditUnavailableError } from '@otm/shared/audit';
import { clickhouseSettingsFrom, createClickHouse, type ClickHouseClient } from '@otm/shared/clickhouse';
import { reachClickHouse, reachRedis, runCommand } from '@otm/shared/dependency-failure';
import { redisOptionsFrom, redisPrefixFrom } from '@otm/shared/redis';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { dayLevelsLedger } from '@otm/shared/rollups/day-levels';

type JobConfig = Parameters<typeof clickhouseSettingsFrom>[0] &
  Parameters<typeof redisOptionsFrom>[0] &
  Parameters<typeof redisPrefixFrom>[0] & { REDIS_URL: string };

/** Who ran a command, as the audit log names them. */
export const cliActor = () => `cli:${os.userInfo().username}@${os.hostname()}`;

/** Runs `job` with ClickHouse and the fence; an unavailable audit log ends it with exit code 1, nothing changed. */
export async function runRollupJob(
  name: string,
  config: JobConfig,
  job: (deps: { clickhouse: ClickHouseClient; fence: RollupFence }) => Promise<void>,
): Promise<void> {
  const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
  await runCommand(name, async () => {
    await reachClickHouse(clickhouse, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE).catch(async (error: unknown) => {
      await clickhouse.close();
      throw error;
    });
    const redis = await reachRedis(config.REDIS_URL, redisOptionsFrom(config, `${name}-cli`));
    try {
      // On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
      await job({
        clickhouse,
        fence: new RollupFence(redis, redisPrefixFrom(config), new GuardLedger(clickhouse), dayLevelsLedger(clickhouse)),
      });
    } catch (error) {
      if (!(error instanceof AuditUnavailableError)) throw error;
      console.error(`the audit log is unavailable (${error.message}); nothing was changed`);
      process.exitCode = 1;
    } finally {
      redis.disconnect();
      await clickhouse.close();
    }
  });
}
