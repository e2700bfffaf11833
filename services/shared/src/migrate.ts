// Applies migrations/*.sql in name order, once each, recording them in
// schema_migrations. Idempotent: statements use IF NOT EXISTS, applied files are
// skipped, and runners that start together tolerate each other's "already exists". Every statement must run on ClickHouse 18.16 and current releases.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClickHouseClient } from './clickhouse.js';
import { formatDateTime } from './clickhouse-values.js';
import { clickhouseErrorCode } from './clickhouse-errors.js';
import { alteredTable, clusterStatements, onCluster, recreateDistributed } from './cluster-ddl.js';
import { DependencyError } from './dependency-failure.js';

export const migrationsDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../migrations');

export function splitStatements(sql: string): string[] {
  return sql
    .split('\n')
    .filter((line) => !line.trim().startsWith('--'))
    .join('\n')
    .split(/;\s*(?:\n|$)/)
    .map((statement) => statement.trim())
    .filter(Boolean);
}

/**
 * @param server a client without a default database (the database may not exist yet)
 * @param inDatabase a client whose default database is `database`
 * @param cluster in cluster mode, the cluster's name (remote_servers): every statement
 *   runs ON CLUSTER, tables become replicated local tables behind Distributed ones
 *   (cluster-ddl.ts), and the list of applied migrations is itself replicated
 */
export async function migrate(
  server: ClickHouseClient,
  inDatabase: ClickHouseClient,
  database: string,
  log: (line: string) => void = () => {},
  cluster = '',
  /** Tests only: apply the files up to this name (an installation from before a migration). */
  upTo?: string,
): Promise<string[]> {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) throw new Error(`CLICKHOUSE_DATABASE: not a plain identifier: ${database}`);
  if (cluster && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(cluster)) throw new Error(`CLICKHOUSE_CLUSTER: not a plain identifier: ${cluster}`);
  const on = onCluster(cluster);
  await server.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}${on}` });
  const ledgerEngine = cluster
    ? `ReplicatedMergeTree('/clickhouse/tables/{shard}/${database}/schema_migrations', '{replica}')`
    : 'MergeTree';
  await server.command({
    query: `CREATE TABLE IF NOT EXISTS ${database}.schema_migrations${on} (name String, applied_at DateTime) ENGINE = ${ledgerEngine} ORDER BY name`,
  });
  const result = await server.query({ query: `SELECT name FROM ${database}.schema_migrations`, format: 'JSONEachRow' });
  const applied = new Set((await result.json<{ name: string }>()).map((row) => row.name));
  const files = fs
    .readdirSync(migrationsDir)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  const appliedNow: string[] = [];
  for (const file of files) {
    if (applied.has(file) || (upTo !== undefined && file > upTo)) continue;
    const written = splitStatements(fs.readFileSync(path.join(migrationsDir, file), 'utf8'));
    const statements = cluster ? written.flatMap((statement) => clusterStatements(statement, { cluster, database })) : written;
    for (const statement of statements) await apply(inDatabase, file, statement, log);
    // Cluster mode: a Distributed table over a local table that gained columns is made
    // again, so that it reads and writes them (cluster-ddl.ts).
    const altered = cluster ? new Set(written.map(alteredTable).filter((table) => table !== undefined)) : new Set<string>();
    for (const table of altered) {
      const shown = await inDatabase.query({ query: `SHOW CREATE TABLE ${database}.${table}`, format: 'TabSeparatedRaw' });
      for (const statement of recreateDistributed(table, await shown.text(), { cluster, database })) {
        await apply(inDatabase, file, statement, log);
      }
    }
    await server.insert({
      table: `${database}.schema_migrations`,
      values: [{ name: file, applied_at: formatDateTime(Date.now()) }],
      format: 'JSONEachRow',
    });
    appliedNow.push(file);
    log(`applied ${file}`);
  }
  return appliedNow;
}

/**
 * The migration files not yet applied to `database` (all of them when it has no ledger):
 * what a service started with MIGRATE_ON_START=false checks instead of migrating, so that
 * it can run as a user without DDL rights (docs/production.md, least privilege).
 */
export async function pendingMigrations(inDatabase: ClickHouseClient, database: string): Promise<string[]> {
  const files = fs
    .readdirSync(migrationsDir)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) throw new Error(`CLICKHOUSE_DATABASE: not a plain identifier: ${database}`);
  // 18.16 has no query parameters; the name is a plain identifier (checked above).
  const ledger = await inDatabase.query({
    query: `SELECT count() AS n FROM system.tables WHERE database = '${database}' AND name = 'schema_migrations'`,
    format: 'JSONEachRow',
  });
  const [row] = await ledger.json<{ n: string }>();
  if (Number(row?.n ?? 0) === 0) return files;
  const result = await inDatabase.query({ query: `SELECT name FROM ${database}.schema_migrations`, format: 'JSONEachRow' });
  const applied = new Set((await result.json<{ name: string }>()).map((entry) => entry.name));
  return files.filter((file) => !applied.has(file));
}

/** Throws a DependencyError naming the migrations `npm run migrate` has still to apply. */
export async function requireMigrated(inDatabase: ClickHouseClient, database: string): Promise<void> {
  const pending = await pendingMigrations(inDatabase, database);
  if (pending.length === 0) return;
  const named = pending.length > 3 ? `${pending.slice(0, 3).join(', ')} and ${pending.length - 3} more` : pending.join(', ');
  throw new DependencyError(
    'ClickHouse',
    `the database ${database} lacks migrations ${named} (MIGRATE_ON_START is false: run npm run migrate as the migrating user)`,
    ['CLICKHOUSE_DATABASE', 'MIGRATE_ON_START'],
    true,
  );
}

/** Runs one migration statement, tolerating another runner that applies it at the same time. */
export async function apply(
  inDatabase: Pick<ClickHouseClient, 'command'>,
  file: string,
  statement: string,
  log: (line: string) => void,
  retryDelayMs = 200,
): Promise<void> {
  for (let attempt = 1; ; attempt++) {
    try {
      await inDatabase.command({ query: statement });
      return;
    } catch (error) {
      // Two ingesters starting together (replicas, a scale-out) run the same
      // migration at once; 18.16 has no ADD COLUMN IF NOT EXISTS, so the second
      // ALTER finds the column there. What it wanted exists: go on.
      if (alreadyThere(error)) {
        log(`${file}: already applied by another runner (${(error as Error).message.slice(0, 80)})`);
        return;
      }
      // An ALTER … ADD COLUMN … DEFAULT that meets the same column being added by
      // another runner fails on 18.16 with code 179 over its own `<column>_tmp` alias
      // (its defaults computed with the other's column half in place). Asked again, it
      // finds the column there (44, above).
      if (attempt < 3 && addedMeanwhile(error)) {
        log(`${file}: the same column added by another runner meanwhile; asking again`);
        await new Promise((resolve) => setTimeout(resolve, retryDelayMs));
        continue;
      }
      throw error;
    }
  }
}

/** True when `error` or one of its causes (the client wraps the server's error) passes `test`. */
function anyCause(error: unknown, test: (code: number | undefined, message: string) => boolean): boolean {
  for (let at: unknown = error; at; at = (at as { cause?: unknown }).cause) {
    if (test(clickhouseErrorCode(at), String((at as Error).message))) return true;
  }
  return false;
}

function addedMeanwhile(error: unknown): boolean {
  return anyCause(error, (code, message) => code === 179 && /same alias \w+_tmp\b/.test(message));
}

/**
 * ClickHouse's "column already exists" (44) or "table already exists" (57), also as an
 * ON CLUSTER query reports it from a host ("There was an error on [host:port]: Code: 44").
 */
function alreadyThere(error: unknown): boolean {
  return anyCause(
    error,
    (code, message) =>
      ((code === 44 || code === 57) && /already exists/i.test(message)) ||
      // ON CLUSTER: a replica's answer quoted inside the initiator's ("There was an error on [host:port]: Code: 57 … already exists").
      (message.includes('There was an error on [') && /\]: Code: (?:44|57)\b/.test(message) && /already exists/.test(message)),
  );
}
