// Loading while Redis is down (docs/ingester.md, "When Redis is down"). Redis holds
// the dedupe marks and the erasure fence; neither is needed to store each record once:
//
// - the dedupe check falls back to what the unit itself shows (a key repeated in it),
//   and ClickHouse's key look-up before every insert (key-lookup.ts) drops what was
//   stored before, as it already does after a crash; a collision (a key stored with
//   another record) is then dropped as a duplicate instead of dead-lettered;
// - the erasure lease, tombstones and fence are taken from their copy in ClickHouse
//   (guard-ledger.ts in the shared package), which every job writes and waits on too;
// - the marks of what was loaded wait in memory (INGEST_PENDING_MARKS_MAX at most) and
//   are written with the next unit's once Redis answers.
//
// Only a dependency that cannot be reached (refused, reset, timed out) is gone without;
// a Redis that answers with an error (full, a refused password) is retried as before.
import type { Logger } from '@otm/shared/logger';
import type { InsertCheck, Subject } from '@otm/shared/rollups/fence';
import { checkSeen } from './dedupe-step.js';
import { failureReason } from './failure-reason.js';
import type { IngesterMetrics } from './metrics.js';
import type { Deduplicator, Erasures, SeenCheck, SeenMark } from './ports.js';

/** After Redis failed, how long the ingester goes without it before asking it again. */
export const REDIS_PROBE_MS = 2000;

/** A lease taken from the ledger is named so, to be ended there. */
const LEDGER_LEASE = 'clickhouse:';

type Metrics = Pick<IngesterMetrics, 'redisDegraded' | 'degradedLoads' | 'pendingMarks' | 'droppedMarks'>;

/** Whether Redis is being gone without, shared by the dedupe step and the erasure lease. */
export class RedisOutage {
  private since: number | undefined;
  private probeAt = 0;

  constructor(
    private readonly metrics: Metrics,
    private readonly logger: Logger,
    private readonly now: () => number = Date.now,
  ) {}

  get degraded(): boolean {
    return this.since !== undefined;
  }

  /** Whether to ask Redis: always while it answers; once per REDIS_PROBE_MS while it does not. */
  shouldAsk(): boolean {
    return this.since === undefined || this.now() >= this.probeAt;
  }

  /** A Redis call failed: true when it is unreachable (go without it), false when the error must be retried. */
  failed(error: unknown, step: string): boolean {
    const reason = failureReason(error);
    if (reason !== 'unreachable' && reason !== 'timeout') return false;
    this.probeAt = this.now() + REDIS_PROBE_MS;
    if (this.since === undefined) {
      this.since = this.now();
      this.metrics.redisDegraded.set(1);
      this.logger.warn(
        { step, reason, err: (error as Error).message },
        "Redis unreachable: loading goes on without it (duplicates dropped by ClickHouse's key look-up, the erasure fence read from ClickHouse)",
      );
    }
    return true;
  }

  /** A Redis call worked. */
  answered(): void {
    if (this.since === undefined) return;
    this.logger.info({ withoutRedisMs: this.now() - this.since }, 'Redis answers again: dedupe and the erasure fence back on Redis');
    this.since = undefined;
    this.metrics.redisDegraded.set(0);
  }
}

/**
 * Marks of an outage written to Redis with each unit's own once it answers again, at
 * most: up to INGEST_PENDING_MARKS_MAX of them go over several units instead of one
 * pipeline. Until written, ClickHouse's event-key look-up (made for every unit) drops
 * their redeliveries.
 */
export const PENDING_MARKS_PER_WRITE = 10_000;

/** The dedupe step with Redis when it answers, without it when it cannot be reached. */
export class DedupeWithoutRedis implements Deduplicator {
  /** Event key to digest, oldest first: a key loaded again (a redelivery) is kept once. */
  private readonly pending = new Map<string, string>();

  constructor(
    private readonly redis: Deduplicator,
    private readonly outage: RedisOutage,
    private readonly metrics: Metrics,
    private readonly pendingMax: number,
  ) {}

  async filterSeen<T>(items: readonly T[], keyOf: (item: T) => string, digestOf: (item: T) => string): Promise<SeenCheck<T>> {
    if (this.outage.shouldAsk()) {
      try {
        const seen = await this.redis.filterSeen(items, keyOf, digestOf);
        this.outage.answered();
        return seen;
      } catch (error) {
        if (!this.outage.failed(error, 'dedupe check')) throw error;
      }
    }
    this.metrics.degradedLoads.inc({ step: 'dedupe' });
    // Only the unit's own repeats are known: ClickHouse's look-up drops the rest.
    return checkSeen(items, keyOf, digestOf, async (eventKeys) => eventKeys.map(() => null));
  }

  async markSeen(marks: readonly SeenMark[]): Promise<void> {
    if (this.outage.shouldAsk()) {
      // The outage's marks go with the units' own, a slice at a time (the oldest first):
      // Redis is written a bounded pipeline per unit rather than the whole backlog in one.
      const backlog = this.pendingMarks(PENDING_MARKS_PER_WRITE);
      try {
        await this.redis.markSeen(backlog.length === 0 ? marks : [...backlog, ...marks]);
        this.outage.answered();
        // A key marked again meanwhile (another digest) stays for the next write.
        for (const mark of backlog) if (this.pending.get(mark.eventKey) === mark.digest) this.pending.delete(mark.eventKey);
        this.metrics.pendingMarks.set(this.pending.size);
        return;
      } catch (error) {
        if (!this.outage.failed(error, 'mark seen')) throw error;
      }
    }
    this.metrics.degradedLoads.inc({ step: 'mark' });
    for (const mark of marks) this.pending.set(mark.eventKey, mark.digest);
    for (const eventKey of this.pending.keys()) {
      if (this.pending.size <= this.pendingMax) break;
      this.pending.delete(eventKey);
      this.metrics.droppedMarks.inc();
    }
    this.metrics.pendingMarks.set(this.pending.size);
  }

  /** The oldest `count` marks kept. */
  private pendingMarks(count: number): SeenMark[] {
    const marks: SeenMark[] = [];
    for (const [eventKey, digest] of this.pending) {
      if (marks.length >= count) break;
      marks.push({ eventKey, digest });
    }
    return marks;
  }
}

/** The erasure lease on Redis when it answers, on the fence's copy in ClickHouse when it cannot be reached. */
export class ErasuresWithoutRedis implements Erasures {
  constructor(
    private readonly redis: Erasures,
    private readonly ledger: Erasures,
    private readonly outage: RedisOutage,
    private readonly metrics: Metrics,
  ) {}

  async beginInsert(subjects: readonly Subject[]): Promise<InsertCheck> {
    if (this.outage.shouldAsk()) {
      try {
        const check = await this.redis.beginInsert(subjects);
        this.outage.answered();
        return check;
      } catch (error) {
        if (!this.outage.failed(error, 'erasure lease')) throw error;
      }
    }
    this.metrics.degradedLoads.inc({ step: 'lease' });
    const check = await this.ledger.beginInsert(subjects).catch((error: unknown) => {
      throw Object.assign(error as Error, { dependency: 'clickhouse (erasure lease)' });
    });
    return { ...check, lease: `${LEDGER_LEASE}${check.lease}` };
  }

  /** Marks go to ClickHouse either way. */
  async markDays(instantsMs: Iterable<number>): Promise<void> {
    await this.ledger.markDays(instantsMs);
  }

  async endInsert(lease: string): Promise<void> {
    if (lease.startsWith(LEDGER_LEASE)) await this.ledger.endInsert(lease.slice(LEDGER_LEASE.length));
    else await this.redis.endInsert(lease);
  }
}

/**
 * The consumer's Redis stages: as they are, or (`enabled`) going on without Redis, with
 * the fence's copy in ClickHouse (`ledger`) for the lease.
 */
export function redisStages(
  redis: { dedupe: Deduplicator; erasures: Erasures },
  ledger: Erasures,
  options: { enabled: boolean; pendingMarksMax: number },
  metrics: Metrics,
  logger: Logger,
): { dedupe: Deduplicator; erasures: Erasures } {
  if (!options.enabled) return redis;
  const outage = new RedisOutage(metrics, logger);
  return {
    dedupe: new DedupeWithoutRedis(redis.dedupe, outage, metrics, options.pendingMarksMax),
    erasures: new ErasuresWithoutRedis(redis.erasures, ledger, outage, metrics),
  };
}
