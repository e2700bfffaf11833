// Cluster mode (docs/clickhouse-cluster.md): the migrations, written for one server,
// rewritten for a ClickHouse cluster. Each table becomes
//
//   <name>_local  ON CLUSTER: the Replicated* form of its engine, the rows of one shard,
//                 copied between that shard's replicas through ZooKeeper;
//   <name>        ON CLUSTER: a Distributed table over the <name>_local tables, under the
//                 name the services and the analytics queries already use.
//
// A materialized view reads and writes the local tables: it runs where a block is
// inserted (the replica a Distributed insert chose) and its rows replicate like any
// other. Rows are sharded by event_key where a table has one (a ReplacingMergeTree
// collapses repeats only within a shard), at random otherwise.
//
// Only the statement forms the migrations use are understood; anything else throws, so
// a new kind of migration cannot pass unconverted.

export const LOCAL_SUFFIX = '_local';

/** ` ON CLUSTER <cluster>` in cluster mode, nothing otherwise: for a statement that runs on every host. */
export function onCluster(cluster: string): string {
  return cluster ? ` ON CLUSTER ${cluster}` : '';
}

/** The table holding a shard's rows of `table` in cluster mode; `table` itself otherwise. */
export function localTable(table: string, cluster: string): string {
  return cluster ? `${table}${LOCAL_SUFFIX}` : table;
}

const identifier = '[A-Za-z_][A-Za-z0-9_]*';
const createTable = new RegExp(
  `^CREATE TABLE IF NOT EXISTS (${identifier})\\s*(\\([\\s\\S]*\\))\\s*ENGINE\\s*=\\s*(${identifier})(?:\\(([^)]*)\\))?([\\s\\S]*)$`,
);
const createView = new RegExp(`^CREATE MATERIALIZED VIEW IF NOT EXISTS (${identifier}) TO (${identifier}) AS\\s+([\\s\\S]*)$`);
const alterTable = new RegExp(`^ALTER TABLE (${identifier}) (ADD COLUMN [\\s\\S]*)$`);
const dropTable = new RegExp(`^DROP TABLE IF EXISTS (${identifier})$`);
const insertSelect = new RegExp(`^INSERT INTO (${identifier}) (\\([^)]*\\))\\s*(SELECT [\\s\\S]*?) FROM (${identifier})\\b([\\s\\S]*)$`);
const mergeTreeEngines = /^(Replacing|Aggregating|Summing|Collapsing|VersionedCollapsing)?MergeTree$/;

export interface ClusterTarget {
  cluster: string;
  database: string;
}

/** The statements that do in cluster mode what `statement` does on one server. */
export function clusterStatements(statement: string, target: ClusterTarget): string[] {
  const sql = statement.trim();
  const on = `ON CLUSTER ${target.cluster}`;
  // Every name qualified: a host runs the query in its own session, whose default
  // database need not be ours.
  const db = (name: string) => `${target.database}.${name}`;

  const table = createTable.exec(sql);
  if (table) {
    const [, name, columns, engine, engineArgs, rest] = table as unknown as [string, string, string, string, string | undefined, string];
    if (!mergeTreeEngines.test(engine)) throw new Error(`cluster mode: no replicated form of engine ${engine} (table ${name})`);
    const local = `${name}${LOCAL_SUFFIX}`;
    const replicated = [
      `'/clickhouse/tables/{shard}/${target.database}/${local}'`,
      `'{replica}'`,
      ...(engineArgs?.trim() ? [engineArgs.trim()] : []),
    ];
    const shardBy = /\bevent_key\s+String\b/.test(columns) ? 'cityHash64(event_key)' : 'rand()';
    return [
      `CREATE TABLE IF NOT EXISTS ${db(local)} ${on} ${columns} ENGINE = Replicated${engine}(${replicated.join(', ')})${rest}`,
      `CREATE TABLE IF NOT EXISTS ${db(name)} ${on} AS ${db(local)} ENGINE = Distributed(${target.cluster}, ${target.database}, ${local}, ${shardBy})`,
    ];
  }

  const view = createView.exec(sql);
  if (view) {
    const [, name, to, select] = view as unknown as [string, string, string, string];
    const source = /\bFROM (\w+)/.exec(select);
    if (!source) throw new Error(`cluster mode: materialized view ${name} reads from no table`);
    const localSelect = select.replace(/\bFROM (\w+)/, `FROM ${target.database}.$1${LOCAL_SUFFIX}`);
    return [`CREATE MATERIALIZED VIEW IF NOT EXISTS ${db(name)} ${on} TO ${db(to + LOCAL_SUFFIX)} AS\n${localSelect}`];
  }

  const alter = alterTable.exec(sql);
  if (alter) {
    const [, name, change] = alter as unknown as [string, string, string];
    // The local tables get the column. The Distributed table must name it too, but 18.16
    // refuses an ALTER ON CLUSTER of a table that is not replicated in a replicated
    // shard: the migration runner makes it again (recreateDistributed).
    return [`ALTER TABLE ${db(name + LOCAL_SUFFIX)} ${on} ${change}`];
  }

  const drop = dropTable.exec(sql);
  // A dropped table goes with its shards' rows: the Distributed table and the local one
  // (a view has no local table; IF EXISTS makes that a no-op).
  if (drop) return [`DROP TABLE IF EXISTS ${db(drop[1]!)} ${on}`, `DROP TABLE IF EXISTS ${db(drop[1]! + LOCAL_SUFFIX)} ${on}`];

  const insert = insertSelect.exec(sql);
  // A copy of rows already stored: once, from the Distributed table to the Distributed
  // table, which shards what it writes as the services' inserts are sharded.
  if (insert) {
    const [, into, columns, select, from, rest] = insert as unknown as [string, string, string, string, string, string];
    return [`INSERT INTO ${db(into)} ${columns} ${select} FROM ${db(from)}${rest}`];
  }

  throw new Error(`cluster mode: no cluster form for this migration statement: ${sql.slice(0, 120)}`);
}

/** The table whose columns `statement` changes (an ALTER … ADD COLUMN), if it does. */
export function alteredTable(statement: string): string | undefined {
  return alterTable.exec(statement.trim())?.[1];
}

/**
 * The statements that make the Distributed table `name` again over its local table (so it
 * has the local table's columns), keeping its engine: `createStatement` is its current
 * definition, as SHOW CREATE TABLE gives it.
 */
export function recreateDistributed(name: string, createStatement: string, target: ClusterTarget): string[] {
  const at = createStatement.indexOf('ENGINE = Distributed(');
  const engine =
    at < 0
      ? undefined
      : createStatement
          .slice(at + 'ENGINE = '.length)
          .split('\n')[0]!
          .trimEnd();
  if (!engine?.endsWith(')')) throw new Error(`cluster mode: ${name} is not a Distributed table: ${createStatement.slice(0, 120)}`);
  const on = `ON CLUSTER ${target.cluster}`;
  const table = `${target.database}.${name}`;
  return [`DROP TABLE IF EXISTS ${table} ${on}`, `CREATE TABLE IF NOT EXISTS ${table} ${on} AS ${table}${LOCAL_SUFFIX} ENGINE = ${engine}`];
}
