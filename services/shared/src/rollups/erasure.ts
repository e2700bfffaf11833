// Erasure of one user's data in one environment, on request (docs/privacy.md):
// `DELETE /v1/admin/users/{userId}/data?environment=…` starts a job whose state can be
// polled. The job, in order:
//
//   1. writes the audit entry (none written: 503, nothing happens);
//   2. writes the tombstone (ingesters drop the user's records received before it,
//      including those still in Kafka) and waits for every insert already running
//      (fence.ts: leases): from then on no row of the user can be added;
//   3. notes the user's error-rollup keys (minute, provider, model, code, message),
//      fences those minutes (ingesters hold an error row of a fenced minute: fence.ts)
//      and waits for the inserts running again;
//   4. deletes the user's usage_io rows, then usage_events rows and usage_rollup_minute
//      rows (keyed by user: exact), each a mutation waited for;
//   5. rebuilds the errors rollup for the noted keys from what usage_events holds
//      now (that rollup has no user column), then lifts the fence;
//   6. announces the erasure on the compacted erasure topic (erasure-announcements.ts),
//      so downstream consumers of the usage topic delete what they hold;
//   7. reports done and writes a second audit entry with the rows removed.
//
// Every step can run again: a failed job is retried by asking again.
import { randomUUID } from 'node:crypto';
import { type Environment, type ErasureAnnouncement } from '@otm/schemas';
import { AuditUnavailableError, type AuditLog } from '../audit.js';
import type { ClickHouseClient } from '../clickhouse.js';
import { sqlString } from '../clickhouse-values.js';
import type { RollupFence, FenceInterval } from './fence.js';
import type { Logger } from '../logger.js';
import type { Redis } from '../redis.js';
import { JobStore } from '../job-store.js';
import { mutate } from '../mutations.js';
import { USER_WEEKS, hasUserWeeks } from './day-levels.js';
import { SCALED_ROLLUPS, aggregateViews, derivedRollupSql, rebuildRollupSql, rollupsFinestFirst } from './views.js';
import { isBackfilled } from './backfill.js';

/**
 * The groups after the time column of each rollup without a user column, but the errors'
 * (erasure rebuilds their rows), with the expression each is computed from (a column of
 * the records, or a histogram's bucket).
 */
const SCALED_DIMENSIONS: Partial<Record<string, readonly { name: string; expression: string }[]>> = Object.fromEntries(
  aggregateViews()
    .filter(({ view }) => SCALED_ROLLUPS.some((rollup) => rollup.view === view && rollup.kind !== 'errors'))
    .map(({ table, groups }) => [table, groups.slice(1)] as const)
    .filter(([, groups]) => !groups.some((group) => group.name === 'user_id')),
);

/** A value of a rollup key as a literal: numbers (a histogram's bucket) bare, text quoted. */
const keyLiteral = (value: unknown) => (typeof value === 'number' ? String(value) : sqlString(String(value)));

export interface ErasureJob {
  id: string;
  environment: Environment;
  userId: string;
  state: 'running' | 'done' | 'failed';
  step: string;
  requestedAt: string;
  /** The tombstone's time: records of the user received at or before it are erased (and announced so). */
  erasedAt?: string;
  finishedAt?: string;
  /** Rows removed: usage_events, usage_io; error-rollup keys rebuilt. */
  removed?: { events: number; io: number; errorRollupKeys: number };
  error?: string;
}

export interface ErasureOptions {
  /** How long the tombstone lives: longer than the usage topic's retention. */
  tombstoneSeconds: number;
  /** How long a mutation may take before the job fails (it can be asked again). */
  mutationTimeoutMs: number;
  /** Cluster mode: the cluster's name ('' or absent for one server). */
  cluster?: string;
}

/**
 * One key of the errors rollup. Its message is cut at 200 bytes, which may split a UTF-8
 * character: it travels as hex (`error_message_hex`) so the DELETE matches its bytes
 * exactly (read back as text, the split character would come back as U+FFFD and match nothing).
 */
type ErrorKey = { minute: string; minute_ms: string; provider: string; model_id: string; error_code: string; error_message_hex: string };

export class ErasureJobs {
  constructor(
    redis: Redis,
    prefix: string,
    private readonly clickhouse: ClickHouseClient,
    private readonly erasures: RollupFence,
    private readonly audit: Pick<AuditLog, 'record'>,
    private readonly logger: Logger,
    private readonly options: ErasureOptions,
    private readonly announcer: { announce(announcement: ErasureAnnouncement): Promise<void> },
  ) {
    this.jobs = new JobStore(redis, prefix, 'erasure');
  }

  private readonly jobs: JobStore<ErasureJob>;

  async get(id: string): Promise<ErasureJob | null> {
    return this.jobs.get(id);
  }

  private save(job: ErasureJob): Promise<void> {
    return this.jobs.save(job);
  }

  /** Writes the audit entry and the job, then runs it in the background. */
  async start(environment: Environment, userId: string, actor: string, requestId: string): Promise<ErasureJob> {
    const job: ErasureJob = {
      id: `erasure_${randomUUID()}`,
      environment,
      userId,
      state: 'running',
      step: 'started',
      requestedAt: new Date().toISOString(),
    };
    try {
      await this.audit.record({ actor, action: 'user.erase', target: `${environment}:${userId}`, details: { jobId: job.id }, requestId });
    } catch (error) {
      throw new AuditUnavailableError((error as Error).message);
    }
    await this.save(job);
    void this.run(job, actor, requestId);
    return job;
  }

  private async run(job: ErasureJob, actor: string, requestId: string): Promise<void> {
    const { environment, userId } = job;
    const user = `environment = ${sqlString(environment)} AND user_id = ${sqlString(userId)}`;
    let fence: FenceInterval[] = [];
    const step = async (name: string) => {
      job.step = name;
      await this.save(job);
    };
    try {
      await step('tombstone, and waiting for inserts in flight');
      const erasedAtMs = Date.now();
      await this.erasures.erase({ environment, userId }, erasedAtMs, this.options.tombstoneSeconds);
      const erasedAt = new Date(erasedAtMs).toISOString();
      job.erasedAt = erasedAt;
      await this.erasures.waitForInsertsInFlight();

      await step('noting and fencing the rollup keys');
      // The user's records are looked up in usage_events_by_user (ordered by user) once
      // it holds every record (the backfill of migration 0008 is done); before, in usage_events.
      const source = (await isBackfilled(this.clickhouse).catch(() => false)) ? 'usage_events_by_user' : 'usage_events';
      const errorKeys = await this.rows<ErrorKey>(
        `SELECT toString(m) AS minute, toString(toUInt64(m) * 1000) AS minute_ms, provider, model_id, error_code,
                hex(error_message) AS error_message_hex
         FROM ${source} WHERE ${user} AND status = 'error'
         GROUP BY toStartOfMinute(event_time) AS m, provider, model_id, ifNull(error_code, '') AS error_code,
                  substring(ifNull(error_message, ''), 1, 200) AS error_message`,
      );
      // The rows of the rollups without a user column that the user's records count in
      // (migrations 0008 and 0009): rebuilt below from what usage_events holds then.
      const rollupKeys = new Map<string, string[]>();
      for (const { table, seconds } of SCALED_ROLLUPS) {
        const dimensions = SCALED_DIMENSIONS[table];
        if (!dimensions) continue;
        const columns = dimensions.map(({ name, expression }) => (name === expression ? name : `${expression} AS ${name}`));
        const keys = await this.rows<Record<string, unknown>>(
          `SELECT DISTINCT toString(intDiv(toUInt32(event_time), ${seconds}) * ${seconds}) AS t, ${columns.join(', ')} FROM ${source} WHERE ${user}`,
        );
        rollupKeys.set(
          table,
          keys.map((row) => `(toDateTime(${Number(row.t)}), ${dimensions.map(({ name }) => keyLiteral(row[name])).join(', ')})`),
        );
      }
      const days = await this.rows<{ day: string }>(
        `SELECT DISTINCT toString(intDiv(toUInt32(event_time), 86400) * 86400000) AS day FROM ${source} WHERE ${user}`,
      );
      fence = [
        ...[...new Set(errorKeys.map((key) => Number(key.minute_ms)))].map((ms) => ({
          kind: 'errors' as const,
          fromMs: ms,
          toMs: ms + 60_000,
        })),
        // Every record of the user's days waits while the rollups without a user are rebuilt.
        ...days.map((row) => ({ kind: 'all' as const, fromMs: Number(row.day), toMs: Number(row.day) + 86_400_000 })),
      ];
      const [counts] = await this.rows<{ events: string; io: string }>(
        `SELECT (SELECT count() FROM ${source} WHERE ${user}) AS events,
                (SELECT count() FROM usage_io WHERE event_key IN (SELECT event_key FROM ${source} WHERE ${user})) AS io`,
      );
      fence = await this.erasures.fence(fence);
      await this.erasures.waitForInsertsInFlight();

      await step('deleting usage_io');
      await this.mutate('usage_io', `event_key IN (SELECT event_key FROM ${source} WHERE ${user})`);
      await step('deleting usage_events and the rollups keyed by user');
      // The per-user weeks (migration 0015) too: the fence lifted below marks the user's
      // days, so their weeks are read from the days until the job sums them again.
      const userTables = ['usage_events', 'usage_rollup_minute', 'usage_events_by_user', 'usage_rollup_user_by_day'];
      if (await hasUserWeeks(this.clickhouse)) userTables.push(USER_WEEKS);
      await Promise.all(userTables.map((table) => this.mutate(table, user)));

      await step('rebuilding the errors rollups');
      for (let start = 0; start < errorKeys.length; start += 500) {
        const chunk = errorKeys.slice(start, start + 500);
        const tuples = chunk
          .map(
            (k) =>
              `(toDateTime(${sqlString(k.minute)}), ${sqlString(environment)}, ${sqlString(k.provider)}, ${sqlString(k.model_id)}, ${sqlString(k.error_code)}, unhex(${sqlString(k.error_message_hex)}))`,
          )
          .join(', ');
        await this.mutate('usage_errors_minute', `(minute, environment, provider, model_id, error_code, error_message) IN (${tuples})`);
        // The view's own SELECT (migration 0002) over those keys, on what remains.
        await this.clickhouse.command({
          query: rebuildRollupSql(
            'usage_errors_minute_mv',
            `(toStartOfMinute(event_time), environment, provider, model_id, ifNull(error_code, ''), substring(ifNull(error_message, ''), 1, 200)) IN (${tuples})`,
          ),
        });
      }
      // The errors rollups per hour and per day (migrations 0008, 0009): their rows of the
      // user's errors, the days merged from the hours just rebuilt (derivedRollupSql).
      for (const rollup of rollupsFinestFirst().filter(({ kind }) => kind === 'errors')) {
        const { seconds } = rollup;
        const rows = [
          ...new Set(
            errorKeys.map(
              (k) =>
                `(toDateTime(${Math.floor(Number(k.minute_ms) / (seconds * 1000)) * seconds}), ${sqlString(environment)}, ${sqlString(k.provider)}, ${sqlString(k.model_id)}, ${sqlString(k.error_code)}, unhex(${sqlString(k.error_message_hex)}))`,
            ),
          ),
        ];
        await this.rebuildRows(rollup, rows);
      }

      await step('rebuilding the rollups without a user');
      // Finest first: a rollup that a finer one holds every group of is merged from that
      // one's rows just rebuilt (derivedRollupSql), not read again from usage_events,
      // whose every read is a scan of the whole table (it is ordered by event key).
      for (const rollup of rollupsFinestFirst()) {
        if (SCALED_DIMENSIONS[rollup.table]) await this.rebuildRows(rollup, rollupKeys.get(rollup.table) ?? []);
      }
      await this.erasures.liftFence(fence);

      await step('announcing on the erasure topic');
      await this.announcer.announce({ environment, userId, erasedAt, requestedAt: job.requestedAt, jobId: job.id });

      job.removed = { events: Number(counts!.events), io: Number(counts!.io), errorRollupKeys: errorKeys.length };
      job.state = 'done';
      job.step = 'done';
      job.finishedAt = new Date().toISOString();
      await this.save(job);
      await this.audit
        .record({
          actor,
          action: 'user.erase.done',
          target: `${environment}:${userId}`,
          details: { jobId: job.id, ...job.removed },
          requestId,
        })
        .catch((error: unknown) =>
          this.logger.error({ err: (error as Error).message, jobId: job.id }, 'erasure done; its audit entry failed'),
        );
      this.logger.info({ jobId: job.id, environment, removed: job.removed }, 'user data erased');
    } catch (error) {
      await this.erasures.liftFence(fence).catch(() => undefined);
      job.state = 'failed';
      job.error = (error as Error).message;
      job.finishedAt = new Date().toISOString();
      await this.save(job).catch(() => undefined);
      await this.audit
        .record({
          actor,
          action: 'user.erase.failed',
          target: `${environment}:${userId}`,
          details: { jobId: job.id, step: job.step, error: job.error },
          requestId,
        })
        .catch(() => undefined);
      this.logger.error({ jobId: job.id, step: job.step, err: job.error }, 'erasure failed; ask again to resume');
    }
  }

  private async rows<T>(query: string): Promise<T[]> {
    return (await this.clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
  }

  /**
   * Deletes a rollup's rows of `keys` (tuples of its time column and groups) and writes
   * them again: merged from the finer rollup just rebuilt (derivedRollupSql), or read
   * from usage_events through the view's own SELECT, its groups' expressions matching the keys.
   */
  private async rebuildRows(rollup: (typeof SCALED_ROLLUPS)[number], keys: readonly string[]): Promise<void> {
    const groups = aggregateViews().find(({ view }) => view === rollup.view)!.groups;
    for (let start = 0; start < keys.length; start += 500) {
      const tuples = keys.slice(start, start + 500).join(', ');
      await this.mutate(rollup.table, `(${groups.map(({ name }) => name).join(', ')}) IN (${tuples})`);
      await this.clickhouse.command({
        query:
          derivedRollupSql(rollup.view, tuples) ??
          rebuildRollupSql(rollup.view, `(${groups.map(({ expression }) => expression).join(', ')}) IN (${tuples})`),
      });
    }
  }

  private mutate(table: string, where: string): Promise<void> {
    return mutate(this.clickhouse, table, `DELETE WHERE ${where}`, this.options.mutationTimeoutMs, this.options.cluster);
  }
}
