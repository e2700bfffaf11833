// What a bench run needs free on the disk under the stack's folder, checked before the
// stack starts: a run short of it would fail an hour in, when ClickHouse's volume or
// Kafka's log fills the disk, and write no report (bench/analysis.md, "2026-12-06 (later morning)").
// Kafka keeps every section's topics until the run ends (scripts/bench.ts deletes them
// then), so their bytes add up; each section drops its ClickHouse databases when it ends,
// so ClickHouse needs only the most any one section holds (the analytics section's events,
// else the end-to-end ladder's records).
import fs from 'node:fs';

const GB = 1e9;

// Measured in a whole run on a fresh clone (2026-12-06: 3 runs per figure, the ladder up
// to 7,000 records/s; 61 GB more in use at its peak than at its start), each section's
// figure with a quarter more: a faster machine puts more records through the sections
// that run at their maximum or climb a ladder.

/** What each section leaves in Kafka's log until the run ends (the bench's records, about 1 KB each there). */
export const KAFKA_BYTES_BY_SECTION: Readonly<Record<string, number>> = {
  gateway: 0.9e9, // measured 0.65 GB
  batch: 2.4e9, // 1.9
  produce: 0.5e9, // 0.4
  ingester: 0.5e9, // 0.34
  lookup: 0,
  scaleOut: 0.1e9, // 0.06
  freshness: 0.7e9, // 0.52
  endToEnd: 2.8e9, // 2.24
  revocation: 0.1e9, // 0.02
  redaction: 0,
  hostile: 0.1e9, // 0.08
  codecs: 2.4e9, // 1.85
  analytics: 1.0e9, // 0.75: the pipeline ingesting while the requests are timed
  kafkaClients: 0.2e9, // 0.15
};

/** The most ClickHouse holds at once in each section but analytics (whose events count it). */
export const CLICKHOUSE_BYTES_BY_SECTION: Readonly<Record<string, number>> = {
  ingester: 1e9, // measured 0.1 GB
  lookup: 1e9, // 0.05
  freshness: 1e9, // 0.3
  endToEnd: 17e9, // 13.0: the ladder's records, their prompts among them, in one database
};

/**
 * ClickHouse's bytes at the most per generated analytics event: measured 522 at 100
 * million events (the volume with discard), when the erasure, the re-costing and the
 * removal had rewritten the parts they touch and the parts replaced were not yet deleted
 * (ClickHouse keeps them 8 minutes); not scaled, as the events' count is given.
 */
export const CLICKHOUSE_BYTES_PER_ANALYTICS_EVENT = 560;

/** Room left over besides what the sections write: the logs, the builds, the system's own. */
export const DISK_MARGIN_BYTES = 2 * GB;

export interface DiskNeed {
  /** What Kafka's log holds of the run's topics at the end of the run. */
  kafkaBytes: number;
  /** The most ClickHouse holds at once, in the section that holds most. */
  clickhouseBytes: number;
  /** Both, and the margin. */
  totalBytes: number;
}

/** Runs per figure in the run measured. */
const MEASURED_RUNS = 3;

/** The sections that measure each figure `--runs` times; the others run once. */
const REPEATED_SECTIONS = new Set([
  'gateway',
  'batch',
  'produce',
  'ingester',
  'freshness',
  'revocation',
  'redaction',
  'hostile',
  'kafkaClients',
]);

/**
 * What a `--quick` run writes of a full one's: its ladder's steps last 10 s against 60,
 * its loads 1.5 s against 10 (inferred from those, not measured).
 */
export const QUICK_SHARE = 1 / 6;

export interface RunShape {
  /** The analytics section's event count. */
  analyticsEvents: number;
  /** Runs per figure. */
  runs: number;
  quick: boolean;
}

/** What a run of `sections` needs. */
export function diskNeed(sections: readonly string[], shape: RunShape): DiskNeed {
  const share = shape.quick ? QUICK_SHARE : 1;
  const kafkaBytes = sections.reduce(
    (sum, name) => sum + (KAFKA_BYTES_BY_SECTION[name] ?? 0) * share * (REPEATED_SECTIONS.has(name) ? shape.runs / MEASURED_RUNS : 1),
    0,
  );
  const clickhouseBytes = Math.max(
    0,
    ...sections.map((name) =>
      name === 'analytics'
        ? shape.analyticsEvents * CLICKHOUSE_BYTES_PER_ANALYTICS_EVENT
        : (CLICKHOUSE_BYTES_BY_SECTION[name] ?? 0) * share,
    ),
  );
  return { kafkaBytes, clickhouseBytes, totalBytes: kafkaBytes + clickhouseBytes + DISK_MARGIN_BYTES };
}

/**
 * Why a run needing `need` cannot start with `freeBytes` free on the disk and ClickHouse's
 * volume of `volumeGiB` (0: none, its data on that disk); undefined when it can.
 */
export function diskShortfall(need: DiskNeed, freeBytes: number, volumeGiB: number): string | undefined {
  const gb = (bytes: number) => `${(bytes / GB).toFixed(1)} GB`;
  const remedy = 'leave out the analytics section (--only) or give it fewer events (BENCH_ANALYTICS_EVENTS)';
  if (volumeGiB > 0 && need.clickhouseBytes > volumeGiB * 1024 ** 3) {
    return (
      `ClickHouse would hold about ${gb(need.clickhouseBytes)} in this run and its volume holds ${volumeGiB} GiB: ` +
      `${remedy}, or give the volume more (OTM_STACK_CLICKHOUSE_VOLUME_GB, after stack down and with its image removed)`
    );
  }
  if (freeBytes < need.totalBytes) {
    return (
      `this run needs about ${gb(need.totalBytes)} free on the disk under the stack's folder and it has ${gb(freeBytes)}: ` +
      `${remedy}, or free the disk, then run again`
    );
  }
  return undefined;
}

/** The bytes free to this process on the filesystem holding `dir`. */
export function freeBytesUnder(dir: string): number {
  const stats = fs.statfsSync(dir);
  return stats.bavail * stats.bsize;
}
