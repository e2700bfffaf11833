// The consumer loop (consumer.ts) on in-memory stages (stage-ports.ts): no Kafka, Redis,
// ClickHouse or registry, so the delivery guarantee can be checked case by case. An
// in-memory RecordSource (the Kafka seam's consumer side) hands batches over as a
// client would and records the offsets committed. The same cases run against the real services in
// ingester.integration.test.ts, ingester.faults.test.ts and the chaos suite.
import { describe, expect, it } from 'vitest';
import type { IncomingBatch, IncomingRecord, RecordSource } from '@otm/shared/kafka';
import { createLogger } from '@otm/shared/logger';
import { buildQueuedRecordSchema, compileValidators, type QueuedUsageRecord } from '@otm/schemas';
import { encodeWire, decodeWire } from '@otm/shared/registry';
import { queuedRecords, sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { UsageConsumer, chunksOf } from './consumer.js';
import { checkSeen } from './dedupe-step.js';
import { createIngesterMetrics } from './metrics.js';
import { RECORD_OUTCOMES, deadLetter, ok, type DeadLetter } from './outcome.js';
import { PriceTable } from './prices.js';
import type { DeadLetterSink, Deduplicator, Erasures, EventStore, IsolatedLoad, RecordDecoder, SeenMark, Unanswered } from './ports.js';
import type { EncodedRow } from './rows.js';
import { DedupeWithoutRedis, ErasuresWithoutRedis, REDIS_PROBE_MS, RedisOutage } from './without-redis.js';
import { subjectKey, type FenceInterval, type Subject } from '@otm/shared/rollups/fence';

const TOPIC = 'usage';
const validate = compileValidators(buildQueuedRecordSchema(), { maxLengths: false }).queuedRecord;

/** Decodes the wire format and validates with the real schema, as the registry decoder does for a known id. */
const decoder: RecordDecoder = {
  async decode(value) {
    const wire = decodeWire(value);
    if (!wire.ok) return deadLetter('no_wire_header', { detail: wire.reason });
    let document: unknown;
    try {
      document = JSON.parse(wire.json);
    } catch {
      return deadLetter('not_json', undefined);
    }
    return validate(document)
      ? ok(document as QueuedUsageRecord)
      : deadLetter('schema_mismatch', { schemaId: wire.schemaId, path: '/', message: 'does not match the schema' });
  },
};

class MemoryDeduplicator implements Deduplicator {
  /** Event key -> digest of the record loaded under it. */
  readonly seen = new Map<string, string>();
  /** While set, markSeen never finishes (a process about to crash). */
  hang = false;
  filterSeen<T>(items: readonly T[], keyOf: (item: T) => string, digestOf: (item: T) => string) {
    return checkSeen(items, keyOf, digestOf, async (eventKeys) => eventKeys.map((eventKey) => this.seen.get(eventKey) ?? null));
  }
  async markSeen(marks: readonly SeenMark[]) {
    if (this.hang) await new Promise(() => undefined);
    for (const mark of marks) this.seen.set(mark.eventKey, mark.digest);
  }
}

/**
 * usage_events as a map: every insert of an event key is counted, as the rollups would
 * count it. `unansweredInserts` makes the next loads store their rows, then fail before
 * the rollups count them (ClickHouse killed between usage_events and its views).
 */
class MemoryEventStore implements EventStore {
  readonly inserts = new Map<string, number>();
  /** What the rollups count per event key. */
  readonly counted = new Map<string, number>();
  readonly recounted: string[][] = [];
  readonly probes: string[] = [];
  unansweredInserts = 0;
  constructor(private readonly refuses: (row: EncodedRow) => boolean = () => false) {}
  async load<T>(items: readonly T[], rowOf: (item: T) => EncodedRow, unanswered: Unanswered): Promise<IsolatedLoad<T>> {
    const result: IsolatedLoad<T> = { loaded: [], refused: [], alreadyLoaded: [] };
    const fresh: string[] = [];
    for (const item of items) {
      const row = rowOf(item);
      if (this.refuses(row)) {
        result.refused.push({ item, code: 27, message: 'Cannot parse input' });
      } else if (this.inserts.has(row.eventKey)) {
        result.alreadyLoaded.push(row.eventKey);
        result.loaded.push(item);
      } else {
        this.inserts.set(row.eventKey, 1);
        fresh.push(row.eventKey);
        result.loaded.push(item);
      }
    }
    if (this.unansweredInserts > 0 && fresh.length > 0) {
      this.unansweredInserts--;
      unanswered.queryIds.add(`q${this.unansweredInserts}`);
      for (const eventKey of fresh) unanswered.eventKeys.add(eventKey);
      throw new Error('socket hang up');
    }
    for (const eventKey of fresh) this.counted.set(eventKey, (this.counted.get(eventKey) ?? 0) + 1);
    return result;
  }
  /** The rollup repair as its contract says: each stored key counted once afterwards, whatever it was. */
  async recount(eventKeys: readonly string[]) {
    this.recounted.push([...eventKeys]);
    for (const eventKey of eventKeys) if (this.inserts.has(eventKey)) this.counted.set(eventKey, 1);
    return { stored: eventKeys.length, copied: 0, tables: [] };
  }
  async insertProbes(lines: readonly string[]) {
    this.probes.push(...lines);
  }
  /** Event keys inserted more than once (must stay empty). */
  twice(): string[] {
    return [...this.inserts].filter(([, count]) => count > 1).map(([key]) => key);
  }
  /** Stored event keys the rollups do not count exactly once (must stay empty). */
  miscounted(): string[] {
    return [...this.inserts.keys()].filter((key) => this.counted.get(key) !== 1);
  }
}

/** The erasure protocol in memory: tombstones, the fence and the leases in flight. */
class MemoryErasures implements Erasures {
  readonly tombstones = new Map<string, number>();
  readonly fence: FenceInterval[] = [];
  readonly leases = new Set<string>();
  /** The day rollups' watermark the next units read, and the instants of the days they marked. */
  dayWatermarkMs = 0;
  readonly marked: number[] = [];
  private next = 0;
  async beginInsert(subjects: readonly Subject[]) {
    const lease = `lease-${this.next++}`;
    this.leases.add(lease);
    const erasedAt = new Map<string, number>();
    for (const subject of subjects) {
      const at = this.tombstones.get(subjectKey(subject));
      if (at !== undefined) erasedAt.set(subjectKey(subject), at);
    }
    return { lease, dayWatermarkMs: this.dayWatermarkMs, erasedAt, fenced: [...this.fence] };
  }
  async markDays(instantsMs: Iterable<number>) {
    this.marked.push(...instantsMs);
  }
  async endInsert(lease: string) {
    this.leases.delete(lease);
  }
}

class MemoryDeadLetters implements DeadLetterSink {
  readonly letters: DeadLetter[] = [];
  async send(letters: readonly DeadLetter[]) {
    this.letters.push(...letters);
  }
}

/** A RecordSource in memory: run() keeps the batch handler, commits are recorded per partition. */
class MemorySource implements RecordSource {
  readonly committed = new Map<number, bigint>();
  onBatch: ((batch: IncomingBatch) => Promise<void>) | undefined;
  async run(options: { onBatch: (batch: IncomingBatch) => Promise<void> }) {
    this.onBatch = options.onBatch;
  }
  async commit(_topic: string, partition: number, offset: string) {
    const at = BigInt(offset);
    if (at > (this.committed.get(partition) ?? 0n)) this.committed.set(partition, at);
  }
  pause() {}

  /** Hands one batch to the consumer, as a client does after a fetch. */
  async deliver(partition: number, records: IncomingRecord[]): Promise<void> {
    await this.onBatch!({
      topic: TOPIC,
      partition,
      records,
      undecodable: undefined,
      live: () => true,
      heartbeat: async () => undefined,
      release: () => undefined,
    });
  }
}

function messages(records: QueuedUsageRecord[], firstOffset = 0): IncomingRecord[] {
  return records.map(
    (record, index) =>
      ({
        key: Buffer.from(record.meta.eventKey),
        value: encodeWire(1, JSON.stringify(record)),
        offset: String(firstOffset + index),
        timestamp: String(Date.now()),
        headers: {},
      }) satisfies IncomingRecord,
  );
}

function pipeline(
  parts: {
    dedupe?: MemoryDeduplicator;
    store?: MemoryEventStore;
    erasures?: MemoryErasures;
    canaryKeyId?: string;
    /** Bytes of the records taken and not yet loaded, at most (default: no bound). */
    maxPendingBytes?: number;
    /** The stages the consumer is given in place of the in-memory Redis ones (the fallbacks of without-redis.ts). */
    wrap?: (redis: { dedupe: MemoryDeduplicator; erasures: MemoryErasures }) => { dedupe: Deduplicator; erasures: Erasures };
  } = {},
) {
  const consumer = new MemorySource();
  const erasures = parts.erasures ?? new MemoryErasures();
  const dedupe = parts.dedupe ?? new MemoryDeduplicator();
  const given = parts.wrap?.({ dedupe, erasures }) ?? { dedupe, erasures };
  const store = parts.store ?? new MemoryEventStore();
  const deadLetters = new MemoryDeadLetters();
  const metrics = createIngesterMetrics();
  const usage = new UsageConsumer(
    {
      source: consumer,
      decoder,
      dedupe: given.dedupe,
      store,
      erasures: given.erasures,
      deadLetters,
      prices: PriceTable.load(),
      metrics,
      logger: createLogger('ingester-test', 'silent'),
    },
    {
      topic: TOPIC,
      maxBatchRows: 500,
      maxPendingRows: 2000,
      maxPendingBytes: parts.maxPendingBytes,
      partitionsConcurrently: 1,
      gatherMs: 1,
      retryInitialMs: 1,
      retryMaxMs: 5,
      canaryKeyId: () => parts.canaryKeyId,
    },
  );
  return { consumer, dedupe, store, deadLetters, usage, erasures, metrics };
}

/** Waits until `check` holds (the loads run behind eachBatch). */
async function until(check: () => boolean, ms = 2000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met');
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

const sample = (count: number, prefix: string) =>
  queuedRecords(sampleUsageRecords(count, { seed: 3 }), { eventKey: (index) => `${prefix}-${index}` });

describe('UsageConsumer on in-memory stages', () => {
  it('loads every record of a batch once and commits past it', async () => {
    const { consumer, store, usage } = pipeline();
    await usage.start();
    await consumer.deliver(0, messages(sample(20, 'a')));
    await until(() => consumer.committed.get(0) === 20n);
    expect(store.inserts.size).toBe(20);
    expect(store.twice()).toEqual([]);
  });

  it('records of 100 KB: the records taken and not loaded stay within the byte bound, with rows to spare; each loads once', async () => {
    const bound = 1_000_000;
    const usage: { current?: UsageConsumer } = {};
    let most = 0;
    const watch = () => (most = Math.max(most, usage.current!.pendingRecords().bytes));
    class SlowStore extends MemoryEventStore {
      override async load<T>(items: readonly T[], rowOf: (item: T) => EncodedRow, unanswered: Unanswered) {
        watch();
        await new Promise((resolve) => setTimeout(resolve, 5));
        return super.load(items, rowOf, unanswered);
      }
    }
    const store = new SlowStore();
    const built = pipeline({ store, maxPendingBytes: bound });
    usage.current = built.usage;
    const large = sample(40, 'big').map((record) => ({
      ...record,
      record: { ...record.record, io: { prompt: 'p'.repeat(100_000), response: 'r' } },
    }));
    const batches = [messages(large.slice(0, 20) as QueuedUsageRecord[]), messages(large.slice(20) as QueuedUsageRecord[])];
    const fetched = batches.flat().reduce((sum, message) => sum + message.value!.length + message.key!.length, 0);
    expect(fetched).toBeGreaterThan(4 * bound);
    await built.usage.start();
    const polling = setInterval(watch, 1);
    try {
      // Two partitions' batches at once, as the client hands them over: each waits for room.
      await Promise.all([built.consumer.deliver(0, batches[0]!), built.consumer.deliver(1, batches[1]!)]);
      await until(() => built.consumer.committed.get(0) === 20n && built.consumer.committed.get(1) === 20n, 10_000);
    } finally {
      clearInterval(polling);
    }
    expect(store.inserts.size).toBe(40);
    expect(store.twice()).toEqual([]);
    expect(most).toBeGreaterThan(0);
    expect(most).toBeLessThanOrEqual(bound);
    expect(built.usage.pendingRecords()).toEqual({ rows: 0, bytes: 0 });
  });

  it('redelivery: the same batch again (a rebalance, a retried fetch) stores nothing twice and commits', async () => {
    const { consumer, store, dedupe, usage } = pipeline();
    await usage.start();
    const batch = messages(sample(20, 'r'));
    await consumer.deliver(0, batch);
    await until(() => consumer.committed.get(0) === 20n);
    await consumer.deliver(0, batch);
    await consumer.deliver(0, messages([...sample(5, 'r'), ...sample(5, 'r2')], 20));
    await until(() => consumer.committed.get(0) === 30n);
    expect(store.inserts.size).toBe(25);
    expect(store.twice()).toEqual([]);
    expect(dedupe.seen.size).toBe(25);
  });

  it('an event key loaded with another record (a direct producer reusing keys) is dead-lettered as a collision, in the batch and later', async () => {
    const { consumer, store, deadLetters, usage } = pipeline();
    await usage.start();
    const [first, second, third] = sample(3, 'k');
    const clash = (record: QueuedUsageRecord, eventKey: string) => ({
      ...record,
      meta: { ...record.meta, eventKey, idempotencyKey: eventKey },
    });
    // In one batch: k-0, then another record under k-0; later another record under k-1.
    await consumer.deliver(0, messages([first!, clash(second!, 'k-0'), third!]));
    await until(() => consumer.committed.get(0) === 3n);
    await consumer.deliver(0, messages([clash(second!, 'k-2'), first!], 3));
    await until(() => consumer.committed.get(0) === 5n);
    expect([...store.inserts.keys()].sort()).toEqual(['k-0', 'k-2']);
    expect(deadLetters.letters.map((letter) => [letter.offset, letter.code, letter.reason])).toEqual([
      ['1', 'event_key_collision', 'event key collision: k-0 was loaded with a different record'],
      ['3', 'event_key_collision', 'event key collision: k-2 was loaded with a different record'],
    ]);
  });

  it('a crash between the insert and the commit: the next consumer finds the rows stored and counts none twice', async () => {
    // The first process inserts, then hangs before marking the keys (and so before
    // committing); it dies there. The next one starts from the last commit with a
    // dedupe store that never heard of those keys.
    const store = new MemoryEventStore();
    const first = pipeline({ store, dedupe: Object.assign(new MemoryDeduplicator(), { hang: true }) });
    await first.usage.start();
    const batch = messages(sample(30, 'c'));
    await first.consumer.deliver(1, batch);
    await until(() => store.inserts.size === 30);
    expect(first.consumer.committed.get(1)).toBeUndefined();

    const second = pipeline({ store });
    await second.usage.start();
    await second.consumer.deliver(1, batch);
    await until(() => second.consumer.committed.get(1) === 30n);
    expect(store.inserts.size).toBe(30);
    expect(store.twice()).toEqual([]);
  });

  it('an insert that stored its rows but ended without an answer: the retry finds them stored and has exactly those recounted', async () => {
    const store = new MemoryEventStore();
    store.unansweredInserts = 1;
    const { consumer, usage } = pipeline({ store });
    await usage.start();
    await consumer.deliver(0, messages(sample(12, 'u')));
    await until(() => consumer.committed.get(0) === 12n);
    expect(store.recounted.map((keys) => keys.length)).toEqual([12]);
    expect(store.miscounted()).toEqual([]);
    expect(store.twice()).toEqual([]);
    // A replay the store simply holds (a consumer that never heard of the keys, no
    // unanswered insert) is not recounted.
    const next = pipeline({ store });
    await next.usage.start();
    await next.consumer.deliver(0, messages(sample(12, 'u')));
    await until(() => next.consumer.committed.get(0) === 12n);
    expect(store.recounted).toHaveLength(1);
    expect(store.miscounted()).toEqual([]);
  });

  it('poison records (bad wire bytes, not the schema, refused by the store) are dead-lettered with their reason; the rest load and the partition moves on', async () => {
    const poisoned = (row: EncodedRow) => row.eventKey === 'p-3';
    const { consumer, store, deadLetters, usage } = pipeline({ store: new MemoryEventStore(poisoned) });
    await usage.start();
    const batch = messages(sample(8, 'p'));
    batch[1] = { ...batch[1]!, value: Buffer.from('not the wire format') };
    batch[5] = { ...batch[5]!, value: encodeWire(1, JSON.stringify({ meta: { eventKey: 'p-5' }, record: {} })) };
    await consumer.deliver(2, batch);
    await until(() => consumer.committed.get(2) === 8n);
    expect([...store.inserts.keys()].sort()).toEqual(['p-0', 'p-2', 'p-4', 'p-6', 'p-7']);
    const reasons = Object.fromEntries(deadLetters.letters.map((letter) => [letter.offset, letter.reason]));
    expect(Object.keys(reasons).sort()).toEqual(['1', '3', '5']);
    expect(reasons['1']).toMatch(/magic byte|wire header/);
    expect(reasons['5']).toMatch(/schema/);
    expect(reasons['3']).toMatch(/clickhouse refused the row: code 27/);
    const codes = Object.fromEntries(deadLetters.letters.map((letter) => [letter.offset, letter.code]));
    expect(codes).toEqual({ '1': 'no_wire_header', '3': 'clickhouse_refused', '5': 'schema_mismatch' });
  });

  it("an erased user's records received before the erasure are dropped, later ones load; nothing is dead-lettered; leases end", async () => {
    const { consumer, store, deadLetters, usage, erasures } = pipeline();
    await usage.start();
    const records = sample(6, 'e');
    const receivedAt = Date.parse(records[0]!.meta.receivedAt);
    records.forEach((record, index) => {
      record.record.user.id = index % 2 === 0 ? 'erased-user' : 'kept-user';
      record.meta.environment = 'prod';
      record.meta.receivedAt = new Date(receivedAt + index * 1000).toISOString();
    });
    // Erased after the first three were received: records 0 and 2 go, record 4 (received later) loads.
    erasures.tombstones.set(subjectKey({ environment: 'prod', userId: 'erased-user' }), receivedAt + 2500);
    await consumer.deliver(0, messages(records));
    await until(() => consumer.committed.get(0) === 6n);
    expect([...store.inserts.keys()].sort()).toEqual(['e-1', 'e-3', 'e-4', 'e-5']);
    expect(deadLetters.letters).toEqual([]);
    expect(erasures.leases.size).toBe(0);
  });

  it('a unit with an error row of a fenced minute waits until the fence is lifted, then loads', async () => {
    const { consumer, store, usage, erasures } = pipeline();
    await usage.start();
    const records = sample(3, 'f');
    const failed = records[1]!.record;
    failed.request.status = 'error';
    failed.error = { code: 'rate_limited', message: 'slow down' };
    const eventMs = Date.parse(failed.timing?.startTime ?? records[1]!.meta.receivedAt);
    const minuteMs = Math.floor(eventMs / 60_000) * 60_000;
    erasures.fence.push({ kind: 'errors', fromMs: minuteMs, toMs: minuteMs + 60_000 });
    await consumer.deliver(0, messages(records));
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(store.inserts.size).toBe(0);
    expect(consumer.committed.get(0)).toBeUndefined();
    erasures.fence.length = 0;
    await until(() => consumer.committed.get(0) === 3n);
    expect(store.inserts.size).toBe(3);
  });

  it("records of a day handed to the day rollups' job mark their day before the insert; later ones mark nothing", async () => {
    const { consumer, store, usage, erasures } = pipeline();
    await usage.start();
    const records = sample(4, 'd');
    const day = 86_400_000;
    const eventMs = (index: number) => Date.parse(records[index]!.record.timing?.startTime ?? records[index]!.meta.receivedAt);
    // Two records a day before the rest: the watermark falls between them.
    for (const index of [0, 1]) {
      const shifted = new Date(eventMs(index) - day).toISOString();
      if (records[index]!.record.timing) records[index]!.record.timing.startTime = shifted;
      records[index]!.meta.receivedAt = shifted;
    }
    erasures.dayWatermarkMs = Math.floor(eventMs(2) / day) * day;
    await consumer.deliver(0, messages(records));
    await until(() => consumer.committed.get(0) === 4n);
    expect(store.inserts.size).toBe(4);
    expect(erasures.marked.map((at) => Math.floor(at / day) * day)).toEqual([erasures.dayWatermarkMs - day, erasures.dayWatermarkMs - day]);
  });

  it('every record leaves by exactly one outcome, and each outcome is reached: loaded, probe, duplicate, erased, dead letter', async () => {
    const refused = (row: EncodedRow) => row.eventKey === 'o-7';
    const { consumer, store, deadLetters, usage, erasures, metrics } = pipeline({
      store: new MemoryEventStore(refused),
      canaryKeyId: 'canary-key',
    });
    await usage.start();
    const records = sample(8, 'o');
    records[1]!.meta.apiKeyId = 'canary-key'; // the freshness canary's record
    records[2]!.meta.environment = 'prod';
    records[2]!.record.user.id = 'erased-user';
    erasures.tombstones.set(subjectKey({ environment: 'prod', userId: 'erased-user' }), Date.parse(records[2]!.meta.receivedAt) + 1000);
    const batch = messages([...records, records[0]!, records[3]!]); // offsets 8 and 9 repeat 0 and 3
    batch[4] = { ...batch[4]!, value: Buffer.from('not the wire format') };
    const clash = { ...records[5]!, meta: { ...records[5]!.meta, eventKey: 'o-6', idempotencyKey: 'o-6' } };
    batch[5] = { ...batch[5]!, value: encodeWire(1, JSON.stringify(clash)) }; // another record under o-6's key
    await consumer.deliver(0, batch);
    await until(() => consumer.committed.get(0) === 10n);

    const counted = Object.fromEntries((await metrics.records.get()).values.map((value) => [value.labels.outcome, value.value]));
    expect(counted).toEqual({ loaded: 3, probe: 1, duplicate: 2, erased: 1, deadLetter: 3 });
    expect(Object.keys(counted).sort()).toEqual(Object.keys(RECORD_OUTCOMES).sort());
    expect([...store.inserts.keys()].sort()).toEqual(['o-0', 'o-3', 'o-6']);
    expect(store.probes).toHaveLength(1);
    expect(deadLetters.letters.map((letter) => [letter.offset, letter.code])).toEqual([
      ['4', 'no_wire_header'],
      ['6', 'event_key_collision'], // o-6's own record, after another one under its key (offset 5) loaded
      ['7', 'clickhouse_refused'],
    ]);
    // The older counters read the same outcomes.
    expect((await metrics.rowsLoaded.get()).values[0]?.value).toBe(3);
    expect((await metrics.duplicatesDropped.get()).values[0]?.value).toBe(2);
    expect((await metrics.erasedDropped.get()).values[0]?.value).toBe(1);
    expect((await metrics.deadLetters.get()).values[0]?.value).toBe(3);
    expect((await metrics.keyCollisions.get()).values[0]?.value).toBe(1);
  });

  it('Redis unreachable: units load and commit without it (duplicates dropped by the store, tombstones and leases from the ledger); the marks are written once it answers', async () => {
    const ledger = new MemoryErasures();
    const outageMetrics = createIngesterMetrics();
    let clock = 0;
    const outage = new RedisOutage(outageMetrics, createLogger('ingester-test', 'silent'), () => clock);
    let redisDown = true;
    const refused = () => Promise.reject(Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }));
    const { consumer, store, usage, dedupe, erasures } = pipeline({
      wrap: (redis) => ({
        dedupe: new DedupeWithoutRedis(
          {
            filterSeen: (items, keyOf, digestOf) => (redisDown ? refused() : redis.dedupe.filterSeen(items, keyOf, digestOf)),
            markSeen: (marks) => (redisDown ? refused() : redis.dedupe.markSeen(marks)),
          },
          outage,
          outageMetrics,
          1000,
        ),
        erasures: new ErasuresWithoutRedis(
          {
            beginInsert: (subjects) => (redisDown ? refused() : redis.erasures.beginInsert(subjects)),
            endInsert: (lease) => redis.erasures.endInsert(lease),
            markDays: (instants) => redis.erasures.markDays(instants),
          },
          ledger,
          outage,
          outageMetrics,
        ),
      }),
    });
    await usage.start();
    const records = sample(10, 'w');
    for (const record of records) record.meta.environment = 'prod';
    records[3]!.record.user.id = 'erased-user';
    ledger.tombstones.set(subjectKey({ environment: 'prod', userId: 'erased-user' }), Date.parse(records[3]!.meta.receivedAt) + 1000);
    await consumer.deliver(0, messages(records));
    await until(() => consumer.committed.get(0) === 10n);
    // The same records again (a redelivery) while Redis is still down: the store's look-up drops them.
    await consumer.deliver(0, messages(records, 10));
    await until(() => consumer.committed.get(0) === 20n);
    expect(store.inserts.size).toBe(9);
    expect(store.inserts.has('w-3')).toBe(false);
    expect(store.twice()).toEqual([]);
    expect(ledger.leases.size).toBe(0);
    expect(erasures.leases.size).toBe(0);
    expect((await outageMetrics.redisDegraded.get()).values[0]?.value).toBe(1);
    expect((await outageMetrics.pendingMarks.get()).values[0]?.value).toBe(9);
    expect(dedupe.seen.size).toBe(0);

    // Redis back: the next unit asks it again and writes the marks kept meanwhile with its own.
    redisDown = false;
    clock += REDIS_PROBE_MS;
    await consumer.deliver(0, messages(sample(2, 'x'), 20));
    await until(() => consumer.committed.get(0) === 22n);
    expect(dedupe.seen.size).toBe(11);
    expect((await outageMetrics.redisDegraded.get()).values[0]?.value).toBe(0);
    expect((await outageMetrics.pendingMarks.get()).values[0]?.value).toBe(0);
  });
});

describe('chunksOf', () => {
  const sized = (...sizes: number[]): IncomingRecord[] =>
    sizes.map((size, index) => ({ key: null, value: Buffer.alloc(size), offset: String(index), timestamp: '0' }));
  const cut = (records: IncomingRecord[], maxRows: number, maxBytes: number) =>
    [...chunksOf(records, maxRows, maxBytes)].map(({ chunk, bytes }) => [chunk.map((record) => Number(record.offset)), bytes]);

  it("cuts a partition's records by count and by bytes, in order; a record past the bytes is a chunk of its own", () => {
    expect(cut(sized(1, 1, 1, 1, 1), 2, Infinity)).toEqual([
      [[0, 1], 2],
      [[2, 3], 2],
      [[4], 1],
    ]);
    expect(cut(sized(40, 50, 10, 200, 30, 30), 100, 100)).toEqual([
      [[0, 1, 2], 100],
      [[3], 200],
      [[4, 5], 60],
    ]);
    expect(cut([], 10, 10)).toEqual([]);
  });
});
