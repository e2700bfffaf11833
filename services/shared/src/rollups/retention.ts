// Retention (docs/privacy.md): rows older than a table's retention are removed by
// dropping whole monthly partitions (usage_event_keys: daily ones), which ClickHouse
// 18.16 (no TTL) and current releases both do at once and without rewriting anything.
// A partition goes when its last day is older than the retention, so a row is kept at
// least its retention and at most a month (a day) more. Dropping a partition twice, or one already gone, changes
// nothing: every ingester may run this on its schedule.
import type { ClickHouseClient } from '../clickhouse.js';
import { formatDateTime } from '../clickhouse-values.js';
import { localTable, onCluster } from '../cluster-ddl.js';
import { mutate } from '../mutations.js';
import { positiveInt, nonNegativeInt } from '../config.js';
import { GUARDS_TABLE } from './guard-ledger.js';
import { SCALED_ROLLUPS } from './views.js';

/** Days each table keeps its rows; 0 keeps them for ever. */
export interface RetentionPolicy {
  /** usage_events: the metadata of every record. */
  eventsDays: number;
  /** usage_io: prompt and response text. */
  ioDays: number;
  /** The rollups (usage_rollup_minute, usage_errors_minute and those of migration 0008): the aggregates analytics read. */
  rollupsDays: number;
  /** canary_probes: the freshness canary's synthetic records. */
  canaryDays: number;
  /** usage_event_keys: the event keys the ingester looks up before inserting (migration 0012). */
  eventKeysDays: number;
}

export const retentionSpec = {
  RETENTION_EVENTS_DAYS: nonNegativeInt({
    default: 0,
    desc: 'Days usage_events keeps rows (whole months are dropped); 0 keeps them for ever',
  }),
  RETENTION_IO_DAYS: nonNegativeInt({
    default: 0,
    desc: 'Days usage_io keeps prompt and response text (whole months are dropped); 0 keeps it for ever',
  }),
  RETENTION_ROLLUPS_DAYS: nonNegativeInt({
    default: 0,
    desc: 'Days the rollup tables keep their rows (whole months are dropped); 0 keeps them for ever',
  }),
  RETENTION_CANARY_DAYS: nonNegativeInt({
    default: 7,
    desc: "Days canary_probes keeps the freshness canary's probes; 0 keeps them for ever",
  }),
  RETENTION_EVENT_KEYS_DAYS: nonNegativeInt({
    default: 10,
    desc: "Days usage_event_keys keeps the event keys the ingester's look-up reads (whole days are dropped); at least the topic's retention plus two days; 0 keeps them for ever",
  }),
  RETENTION_CHECK_INTERVAL_MS: positiveInt({
    default: 3_600_000,
    desc: 'How often an ingester applies the retention (first run a minute after start)',
  }),
};

export function retentionPolicyFrom(config: {
  RETENTION_EVENTS_DAYS: number;
  RETENTION_IO_DAYS: number;
  RETENTION_ROLLUPS_DAYS: number;
  RETENTION_CANARY_DAYS: number;
  RETENTION_EVENT_KEYS_DAYS: number;
}): RetentionPolicy {
  return {
    eventsDays: config.RETENTION_EVENTS_DAYS,
    ioDays: config.RETENTION_IO_DAYS,
    rollupsDays: config.RETENTION_ROLLUPS_DAYS,
    canaryDays: config.RETENTION_CANARY_DAYS,
    eventKeysDays: config.RETENTION_EVENT_KEYS_DAYS,
  };
}

/** The tables partitioned by day (a Date column) and the policy field that governs each. */
const DAILY_TABLES: Readonly<Record<string, keyof RetentionPolicy>> = {
  usage_event_keys: 'eventKeysDays',
};

/** The tables partitioned by month (toYYYYMM) and the policy field that governs each. */
const MONTHLY_TABLES: Readonly<Record<string, keyof RetentionPolicy>> = {
  usage_events: 'eventsDays',
  usage_io: 'ioDays',
  usage_rollup_minute: 'rollupsDays',
  usage_errors_minute: 'rollupsDays',
  // Migration 0008: a user's records as usage_events holds them.
  usage_events_by_user: 'eventsDays',
  // The rollups of migrations 0008 to 0011.
  ...Object.fromEntries(SCALED_ROLLUPS.map(({ table }) => [table, 'rollupsDays' as const])),
  // Migration 0015: the per-user weeks, each within one month (weeks.ts), dropped with its days.
  usage_rollup_user_by_week: 'rollupsDays',
};

export interface Partition {
  table: string;
  /** The partition id: of toYYYYMM `202611`, of a day `20261127`. */
  partition: string;
}

const DAY_MS = 86_400_000;

/** The partitions whose every row is older than its table's retention at `now`. Pure. */
export function expiredPartitions(partitions: readonly Partition[], policy: RetentionPolicy, now: number): Partition[] {
  return partitions.filter(({ table, partition }) => {
    const monthly = MONTHLY_TABLES[table];
    const daily = DAILY_TABLES[table];
    const field = monthly ?? daily;
    if (!field || policy[field] === 0 || !(monthly ? /^\d{6}$/ : /^\d{8}$/).test(partition)) return false;
    const year = Number(partition.slice(0, 4));
    const month = Number(partition.slice(4, 6));
    // The first instant after the partition's last day (UTC), against the cut-off.
    const endsAt = monthly ? Date.UTC(year, month, 1) : Date.UTC(year, month - 1, Number(partition.slice(6, 8)) + 1);
    return endsAt <= now - policy[field] * DAY_MS;
  });
}

export interface RetentionOutcome {
  dropped: Partition[];
  /** Canary probes older than their retention are deleted (the table has no partitions). */
  canaryCutoff: string | null;
}

/**
 * Drops every expired partition of the current database (or lists them with `dryRun`).
 * In cluster mode (`cluster`: its name) the partitions are those of the replicated local
 * tables, dropped ON CLUSTER; the outcome names the tables as the services do.
 */
export async function applyRetention(
  clickhouse: ClickHouseClient,
  policy: RetentionPolicy,
  now = Date.now(),
  dryRun = false,
  cluster = '',
): Promise<RetentionOutcome> {
  const byLocal = new Map(
    [...Object.keys(MONTHLY_TABLES), ...Object.keys(DAILY_TABLES)].map((table) => [localTable(table, cluster), table]),
  );
  const result = await clickhouse.query({
    query: `SELECT DISTINCT table, partition_id AS partition FROM system.parts
            WHERE database = currentDatabase() AND active AND table IN (${[...byLocal.keys()].map((table) => `'${table}'`).join(', ')})
            ORDER BY table, partition`,
    // 18.16 has no query parameters; the table names are ours.
    format: 'JSONEachRow',
  });
  const found = (await result.json<Partition>()).map((part) => ({ ...part, table: byLocal.get(part.table) ?? part.table }));
  const expired = expiredPartitions(found, policy, now);
  if (!dryRun) {
    for (const { table, partition } of expired) {
      await clickhouse.command({
        query: `ALTER TABLE ${localTable(table, cluster)}${onCluster(cluster)} DROP PARTITION ID '${partition}'`,
      });
    }
  }
  let canaryCutoff: string | null = null;
  if (policy.canaryDays > 0) {
    canaryCutoff = formatDateTime(now - policy.canaryDays * DAY_MS);
    if (!dryRun) {
      if (await tableExists(clickhouse, 'canary_probes')) {
        await mutate(clickhouse, 'canary_probes', `DELETE WHERE loaded_at < toDateTime('${canaryCutoff}')`, undefined, cluster);
      }
    }
  }
  // The erasure fence's rows in ClickHouse (guard-ledger.ts) that no longer hold anything.
  if (!dryRun && (await tableExists(clickhouse, GUARDS_TABLE))) {
    await mutate(clickhouse, GUARDS_TABLE, `DELETE WHERE expires_ms < ${Math.floor(now)}`, undefined, cluster);
  }
  return { dropped: expired, canaryCutoff };
}

async function tableExists(clickhouse: ClickHouseClient, table: string): Promise<boolean> {
  const exists = await clickhouse.query({ query: `EXISTS TABLE ${table}`, format: 'TabSeparated' });
  return (await exists.text()).trim() === '1';
}
