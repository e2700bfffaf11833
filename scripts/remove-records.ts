// Removes records from history by event key or request id, and fixes every rollup they
// were counted in (services/shared/src/rollups/removal.ts; docs/privacy.md, "Removing records"):
//   npm run remove-records -- --event-key <key> [--event-key <key>] [--request-id <id>] --reason "a test record"
// Written to the audit log first (no entry, no change). Asking again is harmless.
import { Command } from 'commander';
import { AuditLog } from '@otm/shared/audit';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { removeRecords } from '@otm/shared/rollups/removal';
import { cliActor, runRollupJob } from './lib/rollup-job-command.js';

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
const selection = { eventKeys: options.eventKey, requestIds: options.requestId };
await runRollupJob('remove-records', config, async ({ clickhouse, fence }) => {
  const outcome = await new AuditLog(clickhouse).around(
    {
      actor: cliActor(),
      action: 'records.remove',
      target: `${options.eventKey.length + options.requestId.length} ids`,
      details: { ...selection, reason: options.reason },
    },
    () => removeRecords(clickhouse, fence, selection, { cluster: config.CLICKHOUSE_CLUSTER }),
  );
  console.log(`${outcome.records} records removed (${outcome.removed.events} rows of usage_events, ${outcome.removed.io} of usage_io)`);
  for (const { table, groups } of outcome.tables) if (groups > 0) console.log(`  ${table}: ${groups} groups rebuilt`);
});
