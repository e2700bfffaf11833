// The migrate command: applies the ClickHouse migrations (idempotent) and exits. Run by
// `npm run migrate` in a checkout and, from the services image, by
// `node services/ingester/dist/migrate.js` (the chart's migration Job): a deployment
// whose services hold no DDL rights (MIGRATE_ON_START=false) migrates with what it ships.
//
//   migrate                    # one server
//   migrate --cluster otm      # cluster mode: replicated local tables ON CLUSTER,
//                              # Distributed tables under the usual names
import { parseArgs } from 'node:util';
import { infrastructureSpec, parseConfig } from './config.js';
import { MIGRATION_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from './clickhouse.js';
import { migrate } from './migrate.js';
import { markBackfilledIfEmpty } from './rollups/backfill.js';
import { reachClickHouse, runCommand } from './dependency-failure.js';

const USAGE = `Usage: migrate [--cluster <name>]

Apply the ClickHouse migrations (CLICKHOUSE_URL, CLICKHOUSE_DATABASE, CLICKHOUSE_USER,
CLICKHOUSE_PASSWORD and CLICKHOUSE_CA_FILE say where and as whom).

  --cluster <name>  cluster mode: the cluster (remote_servers) to create the tables on
                    (default: CLICKHOUSE_CLUSTER)
  -h, --help        this text`;

export async function runMigrateCommand(argv: readonly string[], env: NodeJS.ProcessEnv = process.env): Promise<void> {
  await runCommand('migrate', async () => {
    const { values } = parseArgs({
      args: [...argv],
      options: { cluster: { type: 'string' }, help: { type: 'boolean', short: 'h' } },
      strict: true,
    });
    if (values.help) {
      console.log(USAGE);
      return;
    }
    const config = parseConfig(env, {
      CLICKHOUSE_URL: infrastructureSpec.CLICKHOUSE_URL,
      CLICKHOUSE_DATABASE: infrastructureSpec.CLICKHOUSE_DATABASE,
      CLICKHOUSE_USER: infrastructureSpec.CLICKHOUSE_USER,
      CLICKHOUSE_PASSWORD: infrastructureSpec.CLICKHOUSE_PASSWORD,
      CLICKHOUSE_CA_FILE: infrastructureSpec.CLICKHOUSE_CA_FILE,
    });
    const cluster = values.cluster ?? env.CLICKHOUSE_CLUSTER ?? '';
    const settings = clickhouseSettingsFrom({ ...config, CLICKHOUSE_CLUSTER: cluster });
    const server = createClickHouse(settings, { database: null, requestTimeoutMs: MIGRATION_TIMEOUT_MS });
    const inDatabase = createClickHouse(settings, { requestTimeoutMs: MIGRATION_TIMEOUT_MS });
    // Reached with the usual request limit: only the migration's own statements may take minutes.
    const probe = createClickHouse(settings, { database: null });
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
}
