import fs from 'node:fs';
import { ClickHouseLogLevel, createClient, type ClickHouseClient } from '@clickhouse/client';

export type { ClickHouseClient };

export interface ClickHouseSettings {
  url: string;
  database: string;
  username: string;
  password: string;
  /** Cluster mode (docs/clickhouse-cluster.md): the cluster's name; '' or absent for one server. */
  cluster?: string;
  /** PEM file of the CAs that sign an https server's certificate; absent: the system's. */
  caFile?: string;
}

/** The connection settings from a parsed configuration (CLICKHOUSE_* variables). */
export function clickhouseSettingsFrom(config: {
  CLICKHOUSE_URL: string;
  CLICKHOUSE_DATABASE: string;
  CLICKHOUSE_USER: string;
  CLICKHOUSE_PASSWORD: string;
  CLICKHOUSE_CLUSTER?: string;
  CLICKHOUSE_CA_FILE?: string;
}): ClickHouseSettings {
  return {
    url: config.CLICKHOUSE_URL,
    database: config.CLICKHOUSE_DATABASE,
    username: config.CLICKHOUSE_USER,
    password: config.CLICKHOUSE_PASSWORD,
    cluster: config.CLICKHOUSE_CLUSTER ?? '',
    caFile: config.CLICKHOUSE_CA_FILE ?? '',
  };
}

/**
 * How long a schema change may take: in cluster mode an ON CLUSTER statement waits for
 * every replica through ZooKeeper (35 s seen on two replicas starting on two busy cores),
 * past the 30 s every other request gets. For the migration runners' clients.
 */
export const MIGRATION_TIMEOUT_MS = 300_000;

/**
 * How long one statement of the rollup backfill may take: a month of usage_events read
 * FINAL through one view (83 million records took longer than 30 s on two cores). For
 * the backfill's clients (the ingester's, `npm run backfill`).
 */
export const BACKFILL_TIMEOUT_MS = 1_800_000;

/** How one client differs from the defaults. */
export interface ClickHouseClientOptions {
  /** The database its queries run in: settings.database unless given; null for none (the server's default). */
  database?: string | null;
  /** How long a request may take (30 s unless given). */
  requestTimeoutMs?: number;
  /** Settings every query of this client carries (the ingester's parallel_view_processing). */
  querySettings?: Record<string, number | string>;
}

export function createClickHouse(settings: ClickHouseSettings, options: ClickHouseClientOptions = {}): ClickHouseClient {
  const { database = settings.database, requestTimeoutMs = 30_000, querySettings = {} } = options;
  return createClient({
    url: settings.url,
    username: settings.username,
    password: settings.password,
    ...(database ? { database } : {}),
    ...(settings.caFile ? { tls: { ca_cert: fs.readFileSync(settings.caFile) } } : {}),
    request_timeout: requestTimeoutMs,
    // 18.16 predates several settings the client would otherwise send. In cluster mode an
    // insert into a Distributed table returns once the shard's replica has the rows
    // (not once they are queued on this server to be sent later): the ingester commits
    // its Kafka offsets after that.
    clickhouse_settings: { ...(settings.cluster ? { insert_distributed_sync: 1 } : {}), ...querySettings },
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
