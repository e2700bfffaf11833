// The views of the rollups fed from a stage (migration 0013, docs/ingester.md, "The
// tables"): a view over usage_events writes into a stage (a Null table), and each rollup's
// view reads what it writes. Which views a view's rows reach depends on the server:
// current releases push them through the views of its target table (the stage table),
// ClickHouse 18.x through the views that read the view itself. The migrations name the
// stage table; the migration runner asks the server which form fires (cascadeForm, with
// tables of its own), writes the views in that form (stageViewStatement), and at every
// run makes anew a view of the other form (reformStageViews: a server upgraded across the
// change), so that each rollup counts each record exactly once.
import { randomUUID } from 'node:crypto';
import type { ClickHouseClient } from './clickhouse.js';

export type CascadeForm = 'target table' | 'view name';

/** The form of cascade the server fires; throws when it fires both or neither. */
export async function cascadeForm(inDatabase: Pick<ClickHouseClient, 'command' | 'query'>): Promise<CascadeForm> {
  const name = `cascade_probe_${randomUUID().replaceAll('-', '').slice(0, 12)}`;
  const [source, stage, stageView, out, byTable, byView] = ['source', 'stage', 'stage_mv', 'out', 'by_table_mv', 'by_view_mv'].map(
    (part) => `${name}_${part}`,
  ) as [string, string, string, string, string, string];
  const statements = [
    `CREATE TABLE ${source} (v UInt8) ENGINE = Null`,
    `CREATE TABLE ${stage} (v UInt8) ENGINE = Null`,
    `CREATE TABLE ${out} (v UInt8) ENGINE = Memory`,
    `CREATE MATERIALIZED VIEW ${stageView} TO ${stage} AS SELECT v FROM ${source}`,
    `CREATE MATERIALIZED VIEW ${byTable} TO ${out} AS SELECT toUInt8(1) AS v FROM ${stage}`,
    `CREATE MATERIALIZED VIEW ${byView} TO ${out} AS SELECT toUInt8(2) AS v FROM ${stageView}`,
  ];
  try {
    for (const query of statements) await inDatabase.command({ query });
    await inDatabase.command({ query: `INSERT INTO ${source} VALUES (0)` });
    const result = await inDatabase.query({ query: `SELECT toString(sum(v)) AS fired FROM ${out}`, format: 'JSONEachRow' });
    const fired = Number((await result.json<{ fired: string }>())[0]?.fired ?? 0);
    if (fired === 1) return 'target table';
    if (fired === 2) return 'view name';
    throw new Error(
      fired === 3
        ? "ClickHouse pushes a view's rows through both the views of its target table and those of the view itself: the rollups fed from a stage (migration 0013) would count every record twice"
        : "ClickHouse pushes a view's rows through neither the views of its target table nor those of the view itself: the rollups fed from a stage (migration 0013) would count nothing",
    );
  } finally {
    for (const table of [byView, byTable, stageView, out, stage, source]) {
      await inDatabase.command({ query: `DROP TABLE IF EXISTS ${table}` }).catch(() => undefined);
    }
  }
}

/** The stages: the tables of engine Null that the migrations make. */
export function stageTables(statements: readonly string[]): Set<string> {
  const stages = new Set<string>();
  for (const statement of statements) {
    const table = /^CREATE TABLE IF NOT EXISTS (\w+)\s*\([\s\S]*\)\s*ENGINE = Null$/.exec(statement.trim());
    if (table) stages.add(table[1]!);
  }
  return stages;
}

const viewReading = /^CREATE MATERIALIZED VIEW IF NOT EXISTS (\w+) TO \w+ AS\s[\s\S]*\bFROM (\w+)\b/;

/** A migration statement in the form the server fires: a view reading a stage reads the stage's view on an 18.x server. */
export function stageViewStatement(statement: string, form: CascadeForm, stages: ReadonlySet<string>): string {
  const view = viewReading.exec(statement.trim());
  if (!view || !stages.has(view[2]!) || form === 'target table') return statement;
  return statement.replace(new RegExp(`\\bFROM ${view[2]}\\b`), `FROM ${view[2]}_mv`);
}

/**
 * Makes anew, in the server's form, every view over a stage that was made in the other
 * form (the server was upgraded across the change): dropped and created again from its
 * migration statement. The views made anew, by name.
 */
export async function reformStageViews(
  inDatabase: Pick<ClickHouseClient, 'command' | 'query'>,
  database: string,
  form: CascadeForm,
  statements: readonly string[],
  apply: (statement: string) => Promise<void>,
): Promise<string[]> {
  const stages = stageTables(statements);
  // The last statement making each view over a stage.
  const made = new Map<string, string>();
  for (const statement of statements) {
    const view = viewReading.exec(statement.trim());
    if (view && stages.has(view[2]!)) made.set(view[1]!, statement);
  }
  if (made.size === 0) return [];
  const result = await inDatabase.query({
    query: `SELECT name, create_table_query AS query FROM system.tables WHERE database = '${database}' AND engine = 'MaterializedView'`,
    format: 'JSONEachRow',
  });
  const reformed: string[] = [];
  for (const { name, query } of await result.json<{ name: string; query: string }>()) {
    const statement = made.get(name);
    if (!statement) continue;
    const stage = viewReading.exec(statement.trim())![2]!;
    const readsView = new RegExp(`\\b${stage}_mv\\b`).test(query);
    if (readsView === (form === 'view name')) continue;
    await apply(`DROP TABLE IF EXISTS ${name}`);
    await apply(stageViewStatement(statement, form, stages));
    reformed.push(name);
  }
  return reformed;
}
