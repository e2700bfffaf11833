// Removing records from history (docs/privacy.md, "Removing records"): a record that
// should never have been counted (a test record, a producer's bug) is deleted by event
// key or request id, and every rollup it was counted in is fixed. Erasure removes a
// user's records for privacy; this removes chosen records for correctness.
//
// removeRecords, in order:
//   1. finds the records (usage_events, by event key or request id); none: done (a second
//      run of the same removal finds nothing and changes nothing);
//   2. fences their UTC days (fence.ts) and waits for the inserts in flight: no record
//      can enter those days' rollup groups meanwhile;
//   3. notes, for every aggregating view, the groups the records fall in (repair.ts,
//      RollupGroups), while usage_events still holds them;
//   4. rebuilds each noted group from usage_events without the records;
//   5. deletes their usage_io and usage_events_by_user rows, then their usage_events
//      rows (until those are gone, a failed run finds the records and runs again);
//   6. checks each group of the rollups equals the raw rows; then lifts the fence.
// Their event keys stay in usage_event_keys (and Redis), so a replay of the topic finds
// them stored and does not bring them back. RemovalJobs runs it in the background, with
// the audit log, for the admin API.
import { randomUUID } from 'node:crypto';
import { AuditUnavailableError, type AuditLog } from '../audit.js';
import type { ClickHouseClient } from '../clickhouse.js';
import { sqlString } from '../clickhouse-values.js';
import type { Logger } from '../logger.js';
import { mutate } from '../mutations.js';
import type { Redis } from '../redis.js';
import { JobStore } from '../job-store.js';
import { isBackfilled } from './backfill.js';
import type { FenceInterval } from './fence.js';
import { LONG_QUERY, RollupGroups, chunked, type RepairFence } from './repair.js';
import { aggregateViews } from './views.js';

/** What to remove: event keys and request ids (either may be empty, not both). */
export interface RecordSelection {
  eventKeys?: readonly string[];
  requestIds?: readonly string[];
}

export interface RemovalOutcome {
  /** The records found and removed (each event key once). */
  records: number;
  /** Rows deleted from usage_events and usage_io. */
  removed: { events: number; io: number };
  /** Rollup groups rebuilt, per table. */
  tables: { table: string; groups: number }[];
}

export interface RemovalOptions {
  mutationTimeoutMs?: number;
  /** Cluster mode: the cluster's name ('' for one server). */
  cluster?: string;
}

const KEYS_PER_QUERY = 1000;
const DAY_S = 86_400;

export async function removeRecords(
  clickhouse: ClickHouseClient,
  fence: RepairFence,
  selection: RecordSelection,
  options: RemovalOptions = {},
): Promise<RemovalOutcome> {
  const rows = async <T>(query: string) =>
    (await clickhouse.query({ query, format: 'JSONEachRow', clickhouse_settings: LONG_QUERY })).json<T>();
  const outcome: RemovalOutcome = { records: 0, removed: { events: 0, io: 0 }, tables: [] };
  const conditions = [
    ...chunked([...new Set(selection.eventKeys ?? [])], KEYS_PER_QUERY).map((keys) => `event_key IN (${keys.map(sqlString).join(',')})`),
    ...chunked([...new Set(selection.requestIds ?? [])], KEYS_PER_QUERY).map((ids) => `request_id IN (${ids.map(sqlString).join(',')})`),
  ];
  const found = new Map<string, number>();
  for (const condition of conditions) {
    for (const row of await rows<{ event_key: string; day: number }>(
      `SELECT event_key, any(intDiv(toUInt32(event_time), ${DAY_S})) AS day FROM usage_events WHERE ${condition} GROUP BY event_key`,
    )) {
      found.set(row.event_key, Number(row.day));
    }
  }
  if (found.size === 0) return outcome;
  // Before the backfill of migration 0008 the API still reads the first minute rollup,
  // keyed by every dimension: removal fixes the rollups of 0008 on, so it waits for it.
  if (!(await isBackfilled(clickhouse))) throw new Error('the rollup backfill is not done yet: remove records once it is');

  const keyChunks = chunked([...found.keys()].map(sqlString), KEYS_PER_QUERY).map((literals) => literals.join(','));
  const days = [...new Set(found.values())];
  const fromS = Math.min(...days) * DAY_S;
  const toS = (Math.max(...days) + 1) * DAY_S;
  const range = `event_time >= toDateTime(${fromS}) AND event_time < toDateTime(${toS})`;
  const wanted: FenceInterval[] = days.map((day) => ({ kind: 'all', fromMs: day * DAY_S * 1000, toMs: (day + 1) * DAY_S * 1000 }));

  const intervals = await fence.fence(wanted);
  try {
    await fence.waitForInsertsInFlight();
    const noted: RollupGroups[] = [];
    for (const view of aggregateViews()) noted.push(await RollupGroups.note(clickhouse, view, keyChunks));
    // The rollups first, rebuilt from usage_events without the records; the records last,
    // usage_events' rows the very last: until they are gone a failed run finds them and
    // can run again, and once they are the rollups no longer count them.
    const without = `${range} AND event_key NOT IN (${keyChunks.join(',')})`;
    for (const groups of noted) {
      const ids = [...groups.groups.keys()];
      await groups.rebuild(ids, without, options);
      outcome.tables.push({ table: groups.view.table, groups: ids.length });
    }
    for (const keys of keyChunks) {
      const [counts] = await rows<{ events: string; io: string }>(
        `SELECT (SELECT count() FROM usage_events WHERE event_key IN (${keys})) AS events,
                (SELECT count() FROM usage_io WHERE event_key IN (${keys})) AS io`,
      );
      for (const table of ['usage_io', 'usage_events_by_user', 'usage_events']) {
        await mutate(clickhouse, table, `DELETE WHERE event_key IN (${keys})`, options.mutationTimeoutMs, options.cluster);
      }
      outcome.removed.events += Number(counts!.events);
      outcome.removed.io += Number(counts!.io);
    }
    for (const groups of noted) await groups.verify([...groups.groups.keys()], range, 'removing records');
  } finally {
    await fence.liftFence(intervals);
  }
  outcome.records = found.size;
  return outcome;
}

export interface RemovalJob {
  id: string;
  state: 'running' | 'done' | 'failed';
  eventKeys: string[];
  requestIds: string[];
  reason: string;
  requestedAt: string;
  finishedAt?: string;
  /** Records found and removed, rows deleted. */
  records?: number;
  removed?: RemovalOutcome['removed'];
  error?: string;
}

/** Removals run in the background for the admin API, each written to the audit log before and after. */
export class RemovalJobs {
  constructor(
    redis: Redis,
    prefix: string,
    private readonly clickhouse: ClickHouseClient,
    private readonly fence: RepairFence,
    private readonly audit: Pick<AuditLog, 'record'>,
    private readonly logger: Logger,
    private readonly options: RemovalOptions,
  ) {
    this.jobs = new JobStore(redis, prefix, 'removal');
  }

  private readonly jobs: JobStore<RemovalJob>;

  async get(id: string): Promise<RemovalJob | null> {
    return this.jobs.get(id);
  }

  private save(job: RemovalJob): Promise<void> {
    return this.jobs.save(job);
  }

  /** Writes the audit entry (none: AuditUnavailableError, nothing happens) and the job, then runs it. */
  async start(selection: RecordSelection, reason: string, actor: string, requestId: string): Promise<RemovalJob> {
    const job: RemovalJob = {
      id: `removal_${randomUUID()}`,
      state: 'running',
      eventKeys: [...(selection.eventKeys ?? [])],
      requestIds: [...(selection.requestIds ?? [])],
      reason,
      requestedAt: new Date().toISOString(),
    };
    const details = { jobId: job.id, eventKeys: job.eventKeys, requestIds: job.requestIds, reason };
    try {
      await this.audit.record({
        actor,
        action: 'records.remove',
        target: `${job.eventKeys.length + job.requestIds.length} ids`,
        details,
        requestId,
      });
    } catch (error) {
      throw new AuditUnavailableError((error as Error).message);
    }
    await this.save(job);
    void this.run(job, actor, requestId);
    return job;
  }

  private async run(job: RemovalJob, actor: string, requestId: string): Promise<void> {
    try {
      const outcome = await removeRecords(this.clickhouse, this.fence, job, this.options);
      Object.assign(job, { state: 'done', records: outcome.records, removed: outcome.removed, finishedAt: new Date().toISOString() });
      await this.save(job);
      await this.audit
        .record({
          actor,
          action: 'records.remove.done',
          target: job.id,
          details: { records: outcome.records, ...outcome.removed },
          requestId,
        })
        .catch((error: unknown) =>
          this.logger.error({ err: (error as Error).message, jobId: job.id }, 'removal done; its audit entry failed'),
        );
      this.logger.info({ jobId: job.id, records: outcome.records, removed: outcome.removed }, 'records removed');
    } catch (error) {
      Object.assign(job, { state: 'failed', error: (error as Error).message, finishedAt: new Date().toISOString() });
      await this.save(job).catch(() => undefined);
      await this.audit
        .record({ actor, action: 'records.remove.failed', target: job.id, details: { error: job.error }, requestId })
        .catch(() => undefined);
      this.logger.error({ jobId: job.id, err: job.error }, 'record removal failed; ask again to resume');
    }
  }
}
