// npm run migrate: applies the ClickHouse migrations (idempotent).
import { infrastructureSpec, parseConfig } from '@otm/shared/config';
import { clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { migrate } from '../services/shared/src/migrate.js';

const config = parseConfig(process.env, {
  CLICKHOUSE_URL: infrastructureSpec.CLICKHOUSE_URL,
  CLICKHOUSE_DATABASE: infrastructureSpec.CLICKHOUSE_DATABASE,
  CLICKHOUSE_USER: infrastructureSpec.CLICKHOUSE_USER,
  CLICKHOUSE_PASSWORD: infrastructureSpec.CLICKHOUSE_PASSWORD,
});
const settings = clickhouseSettingsFrom(config);
const server = createClickHouse(settings, null);
const inDatabase = createClickHouse(settings);
try {
  const applied = await migrate(server, inDatabase, settings.database, console.log);
  console.log(applied.length ? `migrated ${settings.database}: ${applied.length} applied` : `${settings.database} is up to date`);
} finally {
  await Promise.all([server.close(), inDatabase.close()]);
}
