// What ClickHouse's threads spent on each table's parts over a stretch of the bench:
// writing the parts of inserts (the views' tables' parts included) and merging them, from
// its part log (system.part_log, which the local stack's configuration turns on). The
// times are its threads' wall time, not CPU: read them as shares, beside the CPU figures.
import type { ClickHouseClient } from '@clickhouse/client';

/** The tables named on their own: the two of every record, the copy by user, the key index. */
const NAMED_TABLES = ['usage_io', 'usage_events', 'usage_events_by_user', 'usage_event_keys'] as const;

/** The named tables, then every other (the rollups' tables). */
export const PART_GROUPS = [...NAMED_TABLES, 'rollups'] as const;
export type PartGroup = (typeof PART_GROUPS)[number];

export type PartWork = Record<PartGroup, { newPartMs: number; mergeMs: number }>;

/** The group a table of the pipeline's database belongs to (any table not named is a rollup's). */
export function partGroup(table: string): PartGroup {
  return (NAMED_TABLES as readonly string[]).includes(table) ? (table as PartGroup) : 'rollups';
}

/** Each group's share of the part work (0–1) and its seconds of new parts and of merges, in PART_GROUPS' order. */
export function partShares(work: Partial<PartWork>): { group: PartGroup; share: number; newPartS: number; mergeS: number }[] {
  const groups = PART_GROUPS.map((group) => ({ group, newPartMs: work[group]?.newPartMs ?? 0, mergeMs: work[group]?.mergeMs ?? 0 }));
  const total = groups.reduce((sum, { newPartMs, mergeMs }) => sum + newPartMs + mergeMs, 0);
  return groups.map(({ group, newPartMs, mergeMs }) => ({
    group,
    share: (newPartMs + mergeMs) / Math.max(1, total),
    newPartS: newPartMs / 1000,
    mergeS: mergeMs / 1000,
  }));
}

/** The part log's rows (table, event type, summed milliseconds) gathered by group. */
export function gatherPartWork(rows: readonly { table: string; event_type: string; ms: number | string }[]): PartWork {
  const work = Object.fromEntries(PART_GROUPS.map((group) => [group, { newPartMs: 0, mergeMs: 0 }])) as PartWork;
  for (const row of rows) {
    const entry = work[partGroup(row.table)];
    // 18.16 names the events NEW_PART and MERGE_PARTS, current releases NewPart and MergeParts.
    const event = row.event_type.replaceAll('_', '').toLowerCase();
    if (event === 'newpart') entry.newPartMs += Number(row.ms);
    else if (event === 'mergeparts') entry.mergeMs += Number(row.ms);
  }
  return work;
}

/** ClickHouse's clock now, as the part log writes its times. */
export async function clickhouseNow(clickhouse: ClickHouseClient): Promise<string> {
  const [row] = await (await clickhouse.query({ query: 'SELECT toString(now()) AS now', format: 'JSONEachRow' })).json<{ now: string }>();
  return row!.now;
}

/**
 * The part work on `database`'s tables from `from` to now (ClickHouse's clock);
 * undefined when ClickHouse keeps no part log.
 */
export async function partWork(clickhouse: ClickHouseClient, database: string, from: string): Promise<PartWork | undefined> {
  try {
    await clickhouse.command({ query: 'SYSTEM FLUSH LOGS' });
    const rows = await (
      await clickhouse.query({
        query: `SELECT table, toString(event_type) AS event_type, sum(duration_ms) AS ms
                FROM system.part_log
                WHERE database = '${database}' AND event_time >= toDateTime('${from}')
                GROUP BY table, event_type`,
        format: 'JSONEachRow',
      })
    ).json<{ table: string; event_type: string; ms: string }>();
    return gatherPartWork(rows);
  } catch {
    return undefined;
  }
}
