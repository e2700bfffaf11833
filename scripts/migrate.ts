// npm run migrate: applies the ClickHouse migrations (idempotent).
//
//   npm run migrate                    # one server
//   npm run migrate -- --cluster otm   # cluster mode: replicated local tables ON CLUSTER,
//                                      # Distributed tables under the usual names
//                                      # (docs/clickhouse-cluster.md)
import { Command, Option } from 'commander';
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { MIGRATION_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { migrate } from '@otm/shared/migrate';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { reachClickHouse, runCommand } from '@otm/shared/dependency-failure';

const options = new Command('migrate')
  .description('Apply the ClickHouse migrations (CLICKHOUSE_* variables say where)')
  .addOption(new Option('--cluster <name>', 'cluster mode: the cluster (remote_servers) to create the tables on').env('CLICKHOUSE_CLUSTER'))
  .parse(process.argv)
  .opts<{ cluster?: string }>();

const config = parseConfig(process.env, {
  CLICKHOUSE_URL: infrastructureSpec.CLICKHOUSE_URL,
  CLICKHOUSE_DATABASE: infrastructureSpec.CLICKHOUSE_DATABASE,
  CLICKHOUSE_USER: infrastructureSpec.CLICKHOUSE_USER,
  CLICKHOUSE_PASSWORD: infrastructureSpec.CLICKHOUSE_PASSWORD,
  CLICKHOUSE_CA_FILE: infrastructureSpec.CLICKHOUSE_CA_FILE,
});
const settings = clickhouseSettingsFrom({ ...config, CLICKHOUSE_CLUSTER: options.cluster ?? '' });
const server = createClickHouse(settings, null, MIGRATION_TIMEOUT_MS);
const inDatabase = createClickHouse(settings, settings.database, MIGRATION_TIMEOUT_MS);
// Reached with the usual request limit: only the migration's own statements may take minutes.
const probe = createClickHouse(settings, null);
await runCommand('migrate', async () => {
  try {
    // The server first, without the database (migrate creates it).
    await reachClickHouse(probe, settings.url);
    const applied = await migrate(server, inDatabase, settings.database, console.log, settings.cluster);
    // A new installation has nothing to backfill; once the backfill of 0008 is done, the
    // legacy minute rollup's view is dropped here too, for services without DDL rights.
    await markBackfilledIfEmpty(inDatabase, settings.cluster);
    const where = settings.cluster ? `${settings.database} on cluster ${settings.cluster}` : settings.database;
    console.log(applied.length ? `migrated ${where}: ${applied.length} applied` : `${where} is up to date`);
  } finally {
    await Promise.all([probe.close(), server.close(), inDatabase.close()]);
  }
});
