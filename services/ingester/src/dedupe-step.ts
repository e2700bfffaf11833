// Dedupe on the scoped idempotency key (the record's event key) with Redis.
// `filterSeen` runs before the load; `markSeen` only after the rows are safely in
// ClickHouse: marking first would drop the record if we crashed before loading it
// and the batch were redelivered.
import type { Redis } from '@otm/shared/redis';

const MGET_KEYS = 1000;

export class DedupeStep {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly ttlSeconds: number,
  ) {}

  private key(eventKey: string): string {
    return `${this.prefix}seen:${eventKey}`;
  }

  /** Items whose key was not loaded before, first occurrence within the batch only. */
  async filterSeen<T>(items: readonly T[], keyOf: (item: T) => string): Promise<{ fresh: T[]; duplicates: number }> {
    const unique = new Map<string, T>();
    for (const item of items) if (!unique.has(keyOf(item))) unique.set(keyOf(item), item);
    if (unique.size === 0) return { fresh: [], duplicates: items.length };
    // One MGET per 1,000 keys: a command per key cost the ingester more CPU than Redis.
    const keys = [...unique.keys()].map((eventKey) => this.key(eventKey));
    const pipeline = this.redis.pipeline();
    for (let start = 0; start < keys.length; start += MGET_KEYS) pipeline.mget(keys.slice(start, start + MGET_KEYS));
    const values: unknown[] = [];
    for (const [error, chunk] of (await pipeline.exec()) ?? []) {
      if (error) throw error;
      values.push(...(chunk as unknown[]));
    }
    if (values.length !== keys.length) throw new Error(`redis answered ${values.length} of ${keys.length} keys`);
    const fresh: T[] = [];
    let index = 0;
    for (const item of unique.values()) if (values[index++] === null) fresh.push(item);
    return { fresh, duplicates: items.length - fresh.length };
  }

  async markSeen(eventKeys: readonly string[]): Promise<void> {
    if (eventKeys.length === 0) return;
    const pipeline = this.redis.pipeline();
    for (const eventKey of eventKeys) pipeline.set(this.key(eventKey), '1', 'EX', this.ttlSeconds);
    const results = (await pipeline.exec()) ?? [];
    const failed = results.find(([error]) => error);
    if (failed) throw failed[0];
  }
}
