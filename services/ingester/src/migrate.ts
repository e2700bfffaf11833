// The migrate command as the services image runs it (the chart's migration Job):
// node services/ingester/dist/migrate.js [--cluster <name>]. Applies the ClickHouse
// migrations and exits; `npm run migrate` runs the same command in a checkout.
import { runMigrateCommand } from '@otm/shared/migrate-command';

await runMigrateCommand(process.argv.slice(2));
