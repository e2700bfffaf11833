// Removes records from history by event key or request id, and fixes every rollup they
// were counted in (services/shared/src/rollups/removal.ts; docs/privacy.md, "Removing records"):
//   npm run remove-records -- --event-key <key> [--event-key <key>] [--request-id <id>] --reason "a test record"
// Written to the audit log first (no entry, no change). Asking again is harmless.
import { redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import os from 'node:os';
import { Command } from 'commander';
import { AuditLog, AuditUnavailableError } from '@otm/shared/audit';
import { clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { reachClickHouse, reachRedis, runCommand } from '@otm/shared/dependency-failure';
import { removeRecords } from '@otm/shared/rollups/removal';

const collect = (value: string, list: string[]) => [...list, value];
const options = new Command('remove-records')
  .description('delete records by event key or request id and rebuild the rollups they were counted in')
  .option('--event-key <key>', 'an event key (repeat for more)', collect, [] as string[])
  .option('--request-id <id>', 'a request id (repeat for more)', collect, [] as string[])
  .requiredOption('--reason <text>', 'why the records go (kept in the audit log)')
  .parse(process.argv)
  .opts<{ eventKey: string[]; requestId: string[]; reason: string }>();
if (options.eventKey.length === 0 && options.requestId.length === 0) {
  console.error('name at least one record: --event-key or --request-id');
  process.exit(2);
}

const config = parseConfig(process.env, infrastructureSpec);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);
const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
const selection = { eventKeys: options.eventKey, requestIds: options.requestId };
await runCommand('remove-records', async () => {
  await reachClickHouse(clickhouse, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE).catch(async (error: unknown) => {
    await clickhouse.close();
    throw error;
  });
  const redis = await reachRedis(config.REDIS_URL, redisOptionsFrom(config, 'remove-records-cli'));
  try {
    const outcome = await new AuditLog(clickhouse).around(
      {
        actor: `cli:${os.userInfo().username}@${os.hostname()}`,
        action: 'records.remove',
        target: `${options.eventKey.length + options.requestId.length} ids`,
        details: { ...selection, reason: options.reason },
      },
      () =>
        removeRecords(clickhouse, new RollupFence(redis, redisPrefix, new GuardLedger(clickhouse)), selection, {
          cluster: config.CLICKHOUSE_CLUSTER,
        }),
    );
    console.log(`${outcome.records} records removed (${outcome.removed.events} rows of usage_events, ${outcome.removed.io} of usage_io)`);
    for (const { table, groups } of outcome.tables) if (groups > 0) console.log(`  ${table}: ${groups} groups rebuilt`);
  } catch (error) {
    if (!(error instanceof AuditUnavailableError)) throw error;
    console.error(`the audit log is unavailable (${error.message}); nothing was changed`);
    process.exitCode = 1;
  } finally {
    redis.disconnect();
    await clickhouse.close();
  }
});
