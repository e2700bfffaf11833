// ClickHouse mutations (ALTER … UPDATE / DELETE), waited for: 18.16 has no
// synchronous mutations (mutations_sync came later), so the end is read from
// system.mutations. Used by the erasure job, re-costing and retention. In cluster mode
// the mutation is made on the replicated local tables, ON CLUSTER (a Distributed table
// holds no rows to change), and waited for on the server this client talks to.
import type { ClickHouseClient } from './clickhouse.js';
import { sqlString } from './clickhouse-values.js';
import { localTable, onCluster } from './cluster-ddl.js';

/**
 * An ALTER (UPDATE or DELETE), waited for: 18.16 has no synchronous mutations.
 * @param cluster cluster mode: the cluster's name ('' for one server)
 */
export async function mutate(
  clickhouse: ClickHouseClient,
  logicalTable: string,
  mutation: string,
  timeoutMs = 300_000,
  cluster = '',
): Promise<void> {
  const table = localTable(logicalTable, cluster);
  await clickhouse.command({ query: `ALTER TABLE ${table}${onCluster(cluster)} ${mutation}` });
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const result = await clickhouse.query({
      query: `SELECT count() AS n FROM system.mutations WHERE database = currentDatabase() AND table = ${sqlString(table)} AND is_done = 0`,
      format: 'JSONEachRow',
    });
    const [pending] = await result.json<{ n: string }>();
    if (Number(pending!.n) === 0) return;
    if (Date.now() > deadline) throw new Error(`the mutation of ${table} did not finish within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
