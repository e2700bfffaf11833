import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';

export type { ClickHouseClient };

export interface ClickHouseSettings {
  url: string;
  database: string;
  username: string;
  password: string;
}

/** The connection settings from a parsed configuration (CLICKHOUSE_* variables). */
export function clickhouseSettingsFrom(config: {
  CLICKHOUSE_URL: string;
  CLICKHOUSE_DATABASE: string;
  CLICKHOUSE_USER: string;
  CLICKHOUSE_PASSWORD: string;
}): ClickHouseSettings {
  return {
    url: config.CLICKHOUSE_URL,
    database: config.CLICKHOUSE_DATABASE,
    username: config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD,
  };
}

export function createClickHouse(settings: ClickHouseSettings, database: string | null = settings.database): ClickHouseClient {
  return createClient({
    url: settings.url,
    username: settings.username,
    password: settings.password,
    ...(database ? { database } : {}),
    request_timeout: 30_000,
    // 18.16 predates several settings the client would otherwise send.
    clickhouse_settings: {},
    compression: { request: false, response: false },
    // Every failed request is thrown to its caller, which logs it at the level it
    // deserves (a migration runner racing another on "already exists" is not an error);
    // the client's own ERROR lines on stderr would say it twice, or wrongly.
    log: { level: ClickHouseLogLevel.OFF },
  });
}

/** Server version as [major, minor], to gate features that 18.16 lacks. */
export async function serverVersion(client: ClickHouseClient): Promise<[number, number]> {
  const result = await client.query({ query: 'SELECT version() AS v', format: 'JSONEachRow' });
  const [row] = await result.json<{ v: string }>();
  const [major = 0, minor = 0] = (row?.v ?? '0.0').split('.').map(Number);
  return [major, minor];
}
