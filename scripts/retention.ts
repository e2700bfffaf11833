// Applies the retention once, as every ingester does on its schedule
// (services/shared/src/rollups/retention.ts).
//   npm run retention [-- --dry-run] [-- --now 2026-11-23T00:00:00Z]
// Reads RETENTION_* and the ClickHouse settings from the environment, like the ingester.
import { Command } from 'commander';
import { parseTimestamp } from '@otm/schemas';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { reachClickHouse, runCommand } from '@otm/shared/dependency-failure';
import { applyRetention, retentionPolicyFrom, retentionSpec } from '@otm/shared/rollups/retention';

const options = new Command('retention')
  .description('drop the monthly partitions older than each table’s retention')
  .option('--dry-run', 'list what would be dropped, drop nothing')
  .option('--now <time>', 'RFC 3339 instant to count from (default: now)')
  .parse(process.argv)
  .opts<{ dryRun?: boolean; now?: string }>();

const config = parseConfig(process.env, { ...infrastructureSpec, ...retentionSpec });
const now = options.now === undefined ? Date.now() : parseTimestamp(options.now);
if (now === null) {
  console.error('--now: must be an RFC 3339 date-time with a time zone');
  process.exit(2);
}
const policy = retentionPolicyFrom(config);
console.log(
  `retention (days; 0 keeps for ever): usage_events ${policy.eventsDays}, usage_io ${policy.ioDays}, rollups ${policy.rollupsDays}, canary ${policy.canaryDays}`,
);
const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
await runCommand('retention', async () => {
  try {
    await reachClickHouse(clickhouse, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE);
    const outcome = await applyRetention(clickhouse, policy, now, options.dryRun, config.CLICKHOUSE_CLUSTER);
    for (const { table, partition } of outcome.dropped) console.log(`${options.dryRun ? 'would drop' : 'dropped'} ${table} ${partition}`);
    if (outcome.dropped.length === 0) console.log('nothing has expired');
    if (outcome.canaryCutoff)
      console.log(`${options.dryRun ? 'would delete' : 'deleted'} canary probes loaded before ${outcome.canaryCutoff}`);
  } finally {
    await clickhouse.close();
  }
});
