// Applies migrations/*.sql in name order, once each, recording them in
// schema_migrations. Idempotent: statements use IF NOT EXISTS, applied files are
// skipped, and runners that start together tolerate each other's "already exists". Every statement must run on ClickHouse 18.16 and current releases.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { ClickHouseClient } from './clickhouse.js';
import { formatDateTime } from './clickhouse-values.js';
import { clickhouseErrorCode } from './clickhouse-errors.js';

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
 */
export async function migrate(
  server: ClickHouseClient,
  inDatabase: ClickHouseClient,
  database: string,
  log: (line: string) => void = () => {},
): Promise<string[]> {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(database)) throw new Error(`CLICKHOUSE_DATABASE: not a plain identifier: ${database}`);
  await server.command({ query: `CREATE DATABASE IF NOT EXISTS ${database}` });
  await server.command({
    query: `CREATE TABLE IF NOT EXISTS ${database}.schema_migrations (name String, applied_at DateTime) ENGINE = MergeTree ORDER BY name`,
  });
  const result = await server.query({ query: `SELECT name FROM ${database}.schema_migrations`, format: 'JSONEachRow' });
  const applied = new Set((await result.json<{ name: string }>()).map((row) => row.name));
  const files = fs
    .readdirSync(migrationsDir)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  const appliedNow: string[] = [];
  for (const file of files) {
    if (applied.has(file)) continue;
    for (const statement of splitStatements(fs.readFileSync(path.join(migrationsDir, file), 'utf8'))) {
      try {
        await inDatabase.command({ query: statement });
      } catch (error) {
        // Two ingesters starting together (replicas, a scale-out) run the same
        // migration at once; 18.16 has no ADD COLUMN IF NOT EXISTS, so the second
        // ALTER finds the column there. What it wanted exists: go on.
        if (!alreadyThere(error)) throw error;
        log(`${file}: already applied by another runner (${(error as Error).message.slice(0, 80)})`);
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

/** ClickHouse's "column already exists" (44) or "table already exists" (57). */
function alreadyThere(error: unknown): boolean {
  // The client wraps the server's error: look at the cause too.
  for (let at: unknown = error; at; at = (at as { cause?: unknown }).cause) {
    const code = clickhouseErrorCode(at);
    if ((code === 44 || code === 57) && /already exists/i.test(String((at as Error).message))) return true;
  }
  return false;
}
