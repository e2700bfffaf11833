// npm run migrate: applies the ClickHouse migrations (idempotent).
//
//   npm run migrate                    # one server
//   npm run migrate -- --cluster otm   # cluster mode: replicated local tables ON CLUSTER,
//                                      # Distributed tables under the usual names
//                                      # (docs/clickhouse-cluster.md)
// The same command ships in the services image: node services/ingester/dist/migrate.js.
import { runMigrateCommand } from '@otm/shared/migrate-command';

await runMigrateCommand(process.argv.slice(2));
