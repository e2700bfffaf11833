// The rollups' materialized views, as the migrations define them, for the jobs that
// rebuild rollup rows from usage_events (erasure, re-costing): the rebuild runs the
// view's own SELECT with a narrower WHERE, so it can never count differently from the
// view. A later migration that redefines a view replaces it here (the last one wins).
import fs from 'node:fs';
import path from 'node:path';
import { migrationsDir } from './migrate.js';

export type RollupView = 'usage_rollup_minute_mv' | 'usage_errors_minute_mv';

interface ViewQuery {
  table: string;
  /** `SELECT … FROM usage_events` */
  select: string;
  /** The view's own WHERE condition, if it has one. */
  where: string | undefined;
  /** `GROUP BY …` */
  groupBy: string;
}

let views: Map<string, ViewQuery> | undefined;

function load(): Map<string, ViewQuery> {
  const found = new Map<string, ViewQuery>();
  const files = fs
    .readdirSync(migrationsDir)
    .filter((file) => file.endsWith('.sql'))
    .sort();
  // Each view is `CREATE MATERIALIZED VIEW IF NOT EXISTS <view> TO <rollup> AS SELECT … FROM
  // usage_events [WHERE …] GROUP BY …;`: cut at its markers (no backtracking regex).
  const marker = 'CREATE MATERIALIZED VIEW IF NOT EXISTS ';
  const from = 'FROM usage_events';
  for (const file of files) {
    const text = fs.readFileSync(path.join(migrationsDir, file), 'utf8');
    for (const chunk of text.split(marker).slice(1)) {
      const statement = chunk.slice(0, chunk.indexOf(';'));
      const head = /^(\w+) TO (\w+) AS\s/.exec(statement);
      const fromAt = statement.indexOf(from);
      const groupAt = statement.indexOf('GROUP BY ', fromAt);
      if (!head || fromAt < 0 || groupAt < 0) continue;
      const between = statement.slice(fromAt + from.length, groupAt).trim();
      if (between !== '' && !between.startsWith('WHERE ')) continue;
      found.set(head[1]!, {
        table: head[2]!,
        select: statement.slice(head[0].length, fromAt + from.length).trim(),
        where: between === '' ? undefined : between.slice('WHERE '.length).trim(),
        groupBy: statement.slice(groupAt).trim(),
      });
    }
  }
  return found;
}

/** `INSERT INTO <rollup> <the view's SELECT> WHERE <the view's condition> AND <condition> GROUP BY …` */
export function rebuildRollupSql(view: RollupView, condition: string): string {
  views ??= load();
  const query = views.get(view);
  if (!query) throw new Error(`no migration defines the view ${view}`);
  const where = [query.where, condition]
    .filter(Boolean)
    .map((part) => `(${part})`)
    .join(' AND ');
  return `INSERT INTO ${query.table} ${query.select} WHERE ${where} ${query.groupBy}`;
}
