// Dedupe on the scoped idempotency key (the record's event key) with Redis.
// `filterSeen` runs before the load; `markSeen` only after the rows are safely in
// ClickHouse: marking first would drop the record if we crashed before loading it
// and the batch were redelivered. The mark holds a digest of the record: the same key
// again with the same record is a duplicate (a retry), with another record a
// collision (docs/topic-contract.md, "Direct producers"), which is dead-lettered.
import { createHash } from 'node:crypto';
import { isCluster, type Redis } from '@otm/shared/redis';
import type { Deduplicator, SeenCheck, SeenMark } from './ports.js';

const MGET_KEYS = 1000;
const MARK_KEYS = 1000;

/**
 * On a Redis Cluster the marks spread over this many hash tags (`otm:seen:{17}:<key>`),
 * so the cluster's nodes share them, and one MGET or script call still names keys of
 * one slot: a unit's keys take at most this many calls, sent to each node together.
 */
export const CLUSTER_BUCKETS = 64;

/** SET key digest EX ttl for every key given: one command for a thousand keys instead of a thousand commands. */
const MARK_SEEN_SCRIPT = `for i = 1, #KEYS do redis.call('SET', KEYS[i], ARGV[i + 1], 'EX', ARGV[1]) end return #KEYS`;

/** What marks written before digests were kept hold: such a key is a duplicate, whatever the record. */
const DIGESTLESS_MARK = '1';

type MarkingRedis = Redis & { otmMarkSeen(keyCount: number, ...keysThenArgs: (string | number)[]): Promise<number> };

export class DedupeStep {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ttlSeconds: number,
  ) {
    // EVALSHA, falling back to EVAL when the server does not hold the script yet. The
    // keys of one call share a slot on a Redis Cluster (their bucket's hash tag).
    if (!('otmMarkSeen' in redis)) redis.defineCommand('otmMarkSeen', { lua: MARK_SEEN_SCRIPT });
    this.cluster = isCluster(redis);
  }

  private readonly cluster: boolean;

  /** The mark's key: under its bucket's hash tag on a cluster (`bucket` from groups()), plain on one server. */
  private key(eventKey: string, bucket?: number): string {
    return bucket === undefined ? `${this.prefix}seen:${eventKey}` : `${this.prefix}seen:{${bucket}}:${eventKey}`;
  }

  /**
   * `keys` (by their positions) in the groups one call may name: all of them on one
   * server; by bucket on a cluster, each key hashed once.
   */
  private groups(eventKeys: readonly string[]): { bucket?: number; positions: number[] }[] {
    if (!this.cluster) return [{ positions: eventKeys.map((_, index) => index) }];
    const byBucket = new Map<number, number[]>();
    eventKeys.forEach((eventKey, index) => {
      const bucket = bucketOf(eventKey);
      const group = byBucket.get(bucket);
      if (group) group.push(index);
      else byBucket.set(bucket, [index]);
    });
    return [...byBucket].map(([bucket, positions]) => ({ bucket, positions }));
  }

  /** Items whose key was not loaded before, first occurrence within the batch only; and those whose key was, with another record. */
  filterSeen<T>(items: readonly T[], keyOf: (item: T) => string, digestOf: (item: T) => string): Promise<SeenCheck<T>> {
    return checkSeen(items, keyOf, digestOf, (eventKeys) => this.marks(eventKeys));
  }

  /** The mark of each event key (its record's digest), null where there is none. */
  private async marks(eventKeys: readonly string[]): Promise<unknown[]> {
    if (this.cluster) return this.clusterMarks(eventKeys);
    // One MGET per 1,000 keys: a command per key cost the ingester more CPU than Redis.
    const keys = eventKeys.map((eventKey) => this.key(eventKey));
    const pipeline = this.redis.pipeline();
    for (let start = 0; start < keys.length; start += MGET_KEYS) pipeline.mget(keys.slice(start, start + MGET_KEYS));
    const values: unknown[] = [];
    for (const [error, chunk] of (await pipeline.exec()) ?? []) {
      if (error) throw error;
      values.push(...(chunk as unknown[]));
    }
    if (values.length !== keys.length) throw new Error(`redis answered ${values.length} of ${keys.length} keys`);
    return values;
  }

  /** On a cluster: one MGET per bucket, all at once, the answers put back in the keys' order. */
  private async clusterMarks(eventKeys: readonly string[]): Promise<unknown[]> {
    const values: unknown[] = new Array<unknown>(eventKeys.length);
    await Promise.all(
      this.groups(eventKeys).map(async ({ bucket, positions }) => {
        const answer = await this.redis.mget(positions.map((index) => this.key(eventKeys[index]!, bucket)));
        if (answer.length !== positions.length) throw new Error(`redis answered ${answer.length} of ${positions.length} keys`);
        positions.forEach((index, at) => (values[index] = answer[at]));
      }),
    );
    return values;
  }

  async markSeen(marks: readonly SeenMark[]): Promise<void> {
    // A pipeline of one SET per key cost the ingester about a fifth of its time per unit
    // (a command object each): a script marks a thousand keys per call (per bucket on a cluster).
    const redis = this.redis as MarkingRedis;
    const calls: Promise<number>[] = [];
    for (const { bucket, positions } of this.groups(marks.map((mark) => mark.eventKey))) {
      for (let start = 0; start < positions.length; start += MARK_KEYS) {
        const slice = positions.slice(start, start + MARK_KEYS).map((index) => marks[index]!);
        const keys = slice.map((mark) => this.key(mark.eventKey, bucket));
        calls.push(redis.otmMarkSeen(keys.length, ...keys, this.ttlSeconds, ...slice.map((mark) => mark.digest)));
      }
    }
    await Promise.all(calls);
  }
}

/**
 * Tests only (INGEST_FAULT_INJECTION=skip-dedupe): `step` with every key unmarked, so a
 * redelivered record is loaded again (a deliberately broken build the chaos suite must
 * catch counting it twice). Repeats within one batch still collapse; marks are written.
 */
export function forgetfulDedupe(step: Deduplicator): Deduplicator {
  return {
    filterSeen: (items, keyOf, digestOf) => checkSeen(items, keyOf, digestOf, async (eventKeys) => eventKeys.map(() => null)),
    markSeen: (marks) => step.markSeen(marks),
  };
}

/** The bucket of an event key on a cluster: a stable hash of the key, 0 to CLUSTER_BUCKETS - 1. */
function bucketOf(eventKey: string): number {
  return createHash('md5').update(eventKey).digest().readUInt16BE(0) % CLUSTER_BUCKETS;
}

/**
 * Sorts a batch by what is known of its keys: the first record of each key not marked
 * is fresh; a repeat with the same digest (in the batch, or as marked) is a duplicate;
 * with another digest, a collision. `marksOf` answers the mark of each key once,
 * null when unmarked (Redis here, a map in the consumer's unit tests).
 */
export async function checkSeen<T>(
  items: readonly T[],
  keyOf: (item: T) => string,
  digestOf: (item: T) => string,
  marksOf: (eventKeys: readonly string[]) => Promise<readonly unknown[]>,
): Promise<SeenCheck<T>> {
  const unique = new Map<string, T>();
  const collisions: T[] = [];
  let duplicates = 0;
  for (const item of items) {
    const first = unique.get(keyOf(item));
    if (first === undefined) unique.set(keyOf(item), item);
    else if (digestOf(first) === digestOf(item)) duplicates++;
    else collisions.push(item);
  }
  if (unique.size === 0) return { fresh: [], duplicates, collisions };
  const marks = await marksOf([...unique.keys()]);
  const fresh: T[] = [];
  let index = 0;
  for (const item of unique.values()) {
    const mark = marks[index++];
    if (mark === null || mark === undefined) fresh.push(item);
    else if (mark === DIGESTLESS_MARK || mark === digestOf(item)) duplicates++;
    else collisions.push(item);
  }
  return { fresh, duplicates, collisions };
}
