// Re-costs stored rows with the current price table (services/shared/src/rollups/recost.ts):
//   npm run recost -- --from 2026-10-01T00:00:00Z --to 2026-11-01T00:00:00Z [--provider openai] [--model gpt-4o] [--dry-run]
// The prices are the price database this build carries plus PRICE_TABLE_FILE, as the ingester reads them. The
// change is written to the audit log first (no entry, no change).
import { Command } from 'commander';
import { parseTimestamp } from '@otm/schemas';
import { AuditLog } from '@otm/shared/audit';
import { infrastructureSpec, parseConfig, str } from '@otm/shared/config';
import { PriceTable } from '../services/ingester/src/prices.js';
import { recost } from '@otm/shared/rollups/recost';
import { cliActor, runRollupJob } from './lib/rollup-job-command.js';

const options = new Command('recost')
  .description('recompute cost_usd of stored rows with the current prices and rebuild the rollups of the range')
  .requiredOption('--from <time>', 'RFC 3339 start of the range (by event time; widened to whole minutes)')
  .requiredOption('--to <time>', 'RFC 3339 end of the range, exclusive')
  .option('--provider <provider>', 'only this provider')
  .option('--model <model>', 'only this model id (as stored)')
  .option('--dry-run', 'show the rows and prices, change nothing')
  .parse(process.argv)
  .opts<{ from: string; to: string; provider?: string; model?: string; dryRun?: boolean }>();

const config = parseConfig(process.env, { ...infrastructureSpec, PRICE_TABLE_FILE: str({ default: '', desc: 'price overrides' }) });
const fromMs = parseTimestamp(options.from);
const toMs = parseTimestamp(options.to);
if (fromMs === null || toMs === null || fromMs >= toMs) {
  console.error('--from and --to: RFC 3339 date-times with a time zone, --from before --to');
  process.exit(2);
}
const prices = PriceTable.load(config.PRICE_TABLE_FILE || undefined);
const scope = { fromMs, toMs, provider: options.provider, model: options.model };
await runRollupJob('recost', config, async ({ clickhouse, fence }) => {
  const run = () => recost(clickhouse, fence, prices, scope, { dryRun: options.dryRun, cluster: config.CLICKHOUSE_CLUSTER });
  const outcome = options.dryRun
    ? await run()
    : await new AuditLog(clickhouse).around(
        {
          actor: cliActor(),
          action: 'recost',
          target: `${new Date(fromMs).toISOString()}..${new Date(toMs).toISOString()}`,
          details: { provider: options.provider ?? '*', model: options.model ?? '*', priceTableVersion: prices.version },
        },
        run,
      );
  console.log(
    `price table ${outcome.priceTableVersion}; ${new Date(outcome.fromMs).toISOString()} .. ${new Date(outcome.toMs).toISOString()}`,
  );
  const usd = (value: number) => `$${value.toFixed(6)}`;
  for (const pair of outcome.pairs) {
    const source = pair.schedule
      ? `${pair.schedule.source} ${pair.schedule.provider}/${pair.schedule.model}`
      : 'no price (cost stays empty)';
    console.log(
      `  ${pair.provider} ${pair.model}: ${pair.rows} rows, ${pair.rowsChanged} changed, ${usd(pair.costBefore)} -> ${usd(pair.costAfter)} (${source})`,
    );
  }
  const verb = options.dryRun ? 'would change' : 'changed';
  console.log(
    `${outcome.rows} rows in range; ${outcome.rowsChanged} ${verb}; cost ${usd(outcome.costBefore)} -> ${usd(outcome.costAfter)}` +
      (options.dryRun ? '' : '; the rollups of the range rebuilt'),
  );
});
