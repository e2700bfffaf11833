// Erasure of one user's data (docs/privacy.md), the part shared by the ingesters and
// the admin service's erasure job, in Redis:
//
//   <prefix>erasure:<environment>:<user id>  string: when the user was erased (epoch ms),
//                                             kept ERASURE_TOMBSTONE_DAYS (longer than
//                                             the topic's retention)
//   <prefix>erasure-fence                     set of fenced intervals (`<kind>:<from ms>:<to ms>:<owner>`)
//                                             of rollup rows being rebuilt: `errors` (the
//                                             errors rollup, by an erasure) or `all` (every
//                                             rollup, by a re-costing)
//   <prefix>rollup-day-watermark              string: every UTC day before it (epoch ms) is
//                                             handed to the job that builds the day rollups
//                                             (day-levels.ts); its copy in ClickHouse rules
//   <prefix>ingest-leases                     sorted set: one member per insert attempt of an
//                                             ingester while it runs, scored by when it
//                                             expires (LEASE_MS: a crashed one's ends too)
//
// An ingester takes a lease, then reads the tombstones, the day watermark and the fence,
// in one pipeline (Redis runs them in that order), and releases the lease after its
// insert. A unit holding a record of a day before the watermark marks that day before
// its insert (day-levels.ts), and so does a job for the days of an interval it fenced,
// before it lifts the fence. Records of
// an erased user received before the erasure are dropped, never loaded; a unit holding
// a row of a fenced interval (an error row, for an `errors` interval) waits. The erasure job writes the tombstone and the
// fence, then waits until every lease that existed at that moment is gone: after that,
// no insert can be running that read the tombstones before they existed, so the rows
// it deletes stay deleted and the rows it recounts are not counted twice.
//
// With a ledger (guard-ledger.ts), every tombstone and fence is written to ClickHouse as
// well, and a job waits for the leases of both: an ingester that cannot reach Redis
// takes its lease and reads there instead.
import { randomUUID } from 'node:crypto';
import { isCluster, type Redis } from '../redis.js';

/** An insert attempt holds its lease at most this long (a crashed ingester's lease expires). */
export const LEASE_MS = 60_000;

/** A fence holds at most this long, should its job die. */
export const FENCE_MS = 15 * 60_000;

/** The fence's copy in ClickHouse (guard-ledger.ts): what a job writes and waits for there. */
export interface FenceLedger {
  erase(subject: Subject, atMs: number, tombstoneSeconds: number): Promise<void>;
  /** Writes the tombstones it does not hold yet (each until `expiresMs`); how many it wrote. */
  copyTombstones(tombstones: readonly { subject: Subject; atMs: number; expiresMs: number }[]): Promise<number>;
  fence(held: readonly FenceInterval[]): Promise<void>;
  liftFence(held: readonly FenceInterval[]): Promise<void>;
  waitForInsertsInFlight(pollMs?: number): Promise<void>;
}

export interface Subject {
  environment: string;
  userId: string;
}

/** Rollup rows being rebuilt: of error records only (`errors`) or of every record (`all`), by event time. */
export interface FenceInterval {
  kind: 'errors' | 'all';
  fromMs: number;
  toMs: number;
  /**
   * Which fence() call holds it (set by fence()): two jobs fencing the same interval hold
   * two entries, and one lifting its own leaves the other's in place.
   */
  owner?: string;
}

const fenceEntry = (interval: FenceInterval) =>
  `${interval.kind}:${interval.fromMs}:${interval.toMs}${interval.owner === undefined ? '' : `:${interval.owner}`}`;

function parseFence(entry: string): FenceInterval | undefined {
  const [kind, from, to, owner] = entry.split(':');
  if ((kind !== 'errors' && kind !== 'all') || !from || !to) return undefined;
  return { kind, fromMs: Number(from), toMs: Number(to), ...(owner ? { owner } : {}) };
}

/** Whether a row (its event time, whether it is an error) falls in a fenced interval. */
export function isFenced(fence: readonly FenceInterval[], eventMs: number, isError: boolean): boolean {
  return fence.some((interval) => (interval.kind === 'all' || isError) && eventMs >= interval.fromMs && eventMs < interval.toMs);
}

/** The day rollups built by a job (day-levels.ts), as the fence needs them. */
export interface DayLevelsLedger {
  /** Marks the UTC days of these instants (epoch ms) as changed after they were handed to the job. */
  markDays(instantsMs: Iterable<number>): Promise<void>;
  /** The watermark (epoch ms) as ClickHouse holds it; 0 before migration 0014. */
  watermarkMs(): Promise<number>;
}

/** The UTC days an interval touches, one instant of each (epoch ms). */
export function intervalDays(interval: Pick<FenceInterval, 'fromMs' | 'toMs'>): number[] {
  const day = 86_400_000;
  const days: number[] = [];
  for (let at = Math.floor(interval.fromMs / day) * day; at < interval.toMs; at += day) days.push(at);
  return days;
}

export interface InsertCheck {
  lease: string;
  /**
   * Every UTC day before it (epoch ms) is handed to the job that builds the day rollups: a
   * record of such a day marks it before the insert. 0 when no day is.
   */
  dayWatermarkMs: number;
  /** When each erased subject of the unit was erased (`environment\0userId` to epoch ms). */
  erasedAt: Map<string, number>;
  /** Intervals whose rollup rows are being rebuilt. */
  fenced: FenceInterval[];
}

export const subjectKey = (subject: Subject) => `${subject.environment}\u0000${subject.userId}`;

export class RollupFence {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    /** The fence's copy in ClickHouse; null only where no ingester loads without Redis (a test's own prefix, the bench). */
    private readonly ledger: FenceLedger | null,
    /** The day rollups built by a job (migration 0014); null before it, and where no job builds them. */
    private readonly days: DayLevelsLedger | null = null,
  ) {}

  private get dayWatermarkKey(): string {
    return `${this.prefix}rollup-day-watermark`;
  }

  private tombstoneKey(subject: Subject): string {
    return `${this.prefix}erasure:${subject.environment}:${subject.userId}`;
  }

  private get leasesKey(): string {
    return `${this.prefix}ingest-leases`;
  }

  private get fenceKey(): string {
    return `${this.prefix}erasure-fence`;
  }

  /** Before an insert attempt: takes a lease and reads the tombstones of the unit's subjects and the fence. */
  async beginInsert(subjects: readonly Subject[]): Promise<InsertCheck> {
    const lease = randomUUID();
    const distinct = [...new Map(subjects.map((subject) => [subjectKey(subject), subject])).values()];
    const pipeline = this.redis.multi().zadd(this.leasesKey, Date.now() + LEASE_MS, lease);
    if (distinct.length > 0) pipeline.mget(distinct.map((subject) => this.tombstoneKey(subject)));
    pipeline.get(this.dayWatermarkKey);
    pipeline.smembers(this.fenceKey);
    const results = (await pipeline.exec()) ?? [];
    for (const [error] of results) if (error) throw error;
    const held = results.at(-2)![1] as string | null;
    // Not in Redis (before the job's first run, or lost): ClickHouse's copy, which the job writes first.
    // Without a ledger of days this fence's ingester marks none, so it reads no watermark.
    const dayWatermarkMs = !this.days ? 0 : held !== null ? Number(held) : await this.days.watermarkMs();
    const erasedAt = new Map<string, number>();
    if (distinct.length > 0) {
      const values = results[1]![1] as (string | null)[];
      distinct.forEach((subject, index) => {
        if (values[index] !== null && values[index] !== undefined) erasedAt.set(subjectKey(subject), Number(values[index]));
      });
    }
    const fenced = (results.at(-1)![1] as string[]).map(parseFence).filter((interval) => interval !== undefined);
    return { lease, dayWatermarkMs, erasedAt, fenced };
  }

  /** Marks the UTC days of these instants as changed after they were handed to the day rollups' job. */
  async markDays(instantsMs: Iterable<number>): Promise<void> {
    await this.days?.markDays(instantsMs);
  }

  /** The day rollups' watermark (epoch ms), for the ingesters' pipeline: written by the job after ClickHouse's copy. */
  async setDayWatermark(watermarkMs: number): Promise<void> {
    await this.redis.set(this.dayWatermarkKey, String(watermarkMs));
  }

  async endInsert(lease: string): Promise<void> {
    await this.redis.zrem(this.leasesKey, lease);
  }

  /**
   * Copies into the ledger the tombstones Redis holds and the ledger lacks: those written
   * before the ledger existed (migration 0013), which an ingester loading without Redis
   * would otherwise not know of. Each keeps its time to live. Scans the keys of this
   * prefix's tombstones (on every primary of a Redis Cluster); running it again copies
   * nothing. Returns how many it copied.
   */
  async copyTombstonesToLedger(): Promise<number> {
    if (!this.ledger) return 0;
    const head = `${this.prefix}erasure:`;
    let copied = 0;
    for (const node of isCluster(this.redis) ? this.redis.nodes('master') : [this.redis]) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${head}*`, 'COUNT', 1000);
        cursor = next;
        const found = await Promise.all(keys.map((key) => Promise.all([key, this.redis.get(key), this.redis.pttl(key)] as const)));
        const now = Date.now();
        const tombstones = found.flatMap(([key, value, ttl]) => {
          const rest = key.slice(head.length);
          const colon = rest.indexOf(':');
          const atMs = Number(value);
          if (colon <= 0 || value === null || !Number.isFinite(atMs) || ttl <= 0) return [];
          return [{ subject: { environment: rest.slice(0, colon), userId: rest.slice(colon + 1) }, atMs, expiresMs: now + ttl }];
        });
        if (tombstones.length > 0) copied += await this.ledger.copyTombstones(tombstones);
      } while (cursor !== '0');
    }
    return copied;
  }

  /** The tombstone of one user in one environment. */
  async erase(subject: Subject, atMs: number, tombstoneSeconds: number): Promise<void> {
    await this.redis.set(this.tombstoneKey(subject), String(atMs), 'EX', tombstoneSeconds);
    await this.ledger?.erase(subject, atMs, tombstoneSeconds);
  }

  /**
   * Fences intervals whose rollup rows are about to be rebuilt (for 15 minutes at most,
   * should the job die). Returns them as held by this call: lift those.
   */
  async fence(intervals: readonly FenceInterval[]): Promise<FenceInterval[]> {
    const owner = randomUUID();
    const held = intervals.map((interval) => ({ ...interval, owner }));
    if (held.length === 0) return held;
    const entries = held.map(fenceEntry);
    const results =
      (await this.redis
        .multi()
        .sadd(this.fenceKey, ...entries)
        .pexpire(this.fenceKey, FENCE_MS)
        .exec()) ?? [];
    for (const [error] of results) if (error) throw error;
    // Not held unless held in both: a fence left in Redis alone would stop those rows for 15 minutes.
    await this.ledger?.fence(held).catch(async (error: unknown) => {
      await this.redis.srem(this.fenceKey, ...entries).catch(() => undefined);
      throw error;
    });
    return held;
  }

  /**
   * Lifts intervals as fence() returned them (those of that call only). Their days are
   * marked first: the job rebuilt rollup rows of them, which the day rollups' job then
   * builds again (day-levels.ts).
   */
  async liftFence(intervals: readonly FenceInterval[]): Promise<void> {
    if (intervals.length === 0) return;
    await this.days?.markDays(intervals.flatMap(intervalDays));
    await this.redis.srem(this.fenceKey, ...intervals.map(fenceEntry));
    await this.ledger?.liftFence(intervals);
  }

  /** Waits until every insert lease that exists now, in Redis and in the ledger, has ended (or expired). */
  async waitForInsertsInFlight(pollMs = 50): Promise<void> {
    await Promise.all([this.waitForRedisLeases(pollMs), this.ledger?.waitForInsertsInFlight(pollMs)]);
  }

  private async waitForRedisLeases(pollMs: number): Promise<void> {
    // Leases of ingesters that died are dropped once their time is past.
    await this.redis.zremrangebyscore(this.leasesKey, '-inf', Date.now());
    const present = await this.redis.zrange(this.leasesKey, 0, -1, 'WITHSCORES');
    let remaining: { lease: string; expiresAt: number }[] = [];
    for (let i = 0; i < present.length; i += 2) remaining.push({ lease: present[i]!, expiresAt: Number(present[i + 1]) });
    while (remaining.length > 0) {
      const scores = await this.redis.zmscore(this.leasesKey, ...remaining.map((entry) => entry.lease));
      const now = Date.now();
      remaining = remaining.filter((entry, index) => scores[index] !== null && entry.expiresAt > now);
      if (remaining.length > 0) await new Promise((resolve) => setTimeout(resolve, pollMs));
    }
  }
}
