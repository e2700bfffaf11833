// The ingester's stages as the consumer loop sees them: small interfaces, so the loop
// runs the same against the real services (Redis, ClickHouse, the registry, Kafka) and
// against the in-memory stand-ins of its unit tests (consumer.test.ts).
import type { RollupFence } from '@otm/shared/rollups/fence';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { RecordSender } from '@otm/shared/kafka';
import type { QueuedUsageRecord } from '@otm/schemas';
import { decodeKnown, decodeStep, type SchemaCache } from './decode-step.js';
import type { SeenCheck, SeenMark } from './dedupe-step.js';
import { sendDeadLetters, type DeadLetter } from './dead-letter.js';
import type { EncodedRow } from './encode-step.js';
import { DEFAULT_KEY_LOOKUP, insertLines, loadIsolatingBadRows, type IsolatedLoad, type KeyLookup, type Unanswered } from './load-step.js';
import { recountRollups, type RecountOutcome, type RepairFence } from '@otm/shared/rollups/repair';
import type { StepOutcome } from './outcome.js';

/** Wire bytes to a validated queued record, or the reason it can never be one. Throws when the registry cannot be asked. */
export interface RecordDecoder {
  decode(value: Buffer | null): Promise<StepOutcome<QueuedUsageRecord>>;
  /** The same answer without waiting when it needs no I/O (the schema known already); undefined when it does. */
  decodeKnown?(value: Buffer | null): StepOutcome<QueuedUsageRecord> | undefined;
}

/** Which event keys were loaded before, and with which record (checked before a load, marked after it). */
export interface Deduplicator {
  filterSeen<T>(items: readonly T[], keyOf: (item: T) => string, digestOf: (item: T) => string): Promise<SeenCheck<T>>;
  markSeen(marks: readonly SeenMark[]): Promise<void>;
}

/**
 * Where rows are loaded. `load` stores each event key once, returns the rows refused for
 * their data; throws to be retried, noting in `unanswered` the inserts that ended without
 * an answer. `recount` recounts the rollups of stored records such an insert sent.
 */
export interface EventStore {
  load<T>(items: readonly T[], rowOf: (item: T) => EncodedRow, unanswered: Unanswered): Promise<IsolatedLoad<T>>;
  recount(eventKeys: readonly string[], unanswered: Unanswered): Promise<RecountOutcome>;
  /** The freshness canary's rows (canary_probes). */
  insertProbes(lines: readonly string[]): Promise<void>;
}

/** Erasures (services/shared/src/rollups/fence.ts): a lease per insert attempt, the tombstones and the fence. */
export type Erasures = Pick<RollupFence, 'beginInsert' | 'endInsert'>;

/** Where records that can never load go, with their reason. */
export interface DeadLetterSink {
  send(letters: readonly DeadLetter[]): Promise<void>;
}

export class RegistryDecoder implements RecordDecoder {
  constructor(private readonly schemas: SchemaCache) {}
  decode(value: Buffer | null) {
    return decodeStep(value, this.schemas);
  }
  decodeKnown(value: Buffer | null) {
    return decodeKnown(value, this.schemas);
  }
}

export class ClickHouseEventStore implements EventStore {
  constructor(
    private readonly clickhouse: ClickHouseClient,
    private readonly fence: RepairFence,
    private readonly cluster = '',
    private readonly lookup: KeyLookup = DEFAULT_KEY_LOOKUP,
  ) {}
  load<T>(items: readonly T[], rowOf: (item: T) => EncodedRow, unanswered: Unanswered) {
    return loadIsolatingBadRows(this.clickhouse, items, rowOf, unanswered, this.lookup);
  }
  recount(eventKeys: readonly string[], unanswered: Unanswered) {
    return recountRollups(this.clickhouse, this.fence, eventKeys, { unansweredQueryIds: [...unanswered.queryIds], cluster: this.cluster });
  }
  insertProbes(lines: readonly string[]) {
    return insertLines(this.clickhouse, 'canary_probes', lines);
  }
}

export class KafkaDeadLetters implements DeadLetterSink {
  constructor(
    private readonly sender: RecordSender,
    private readonly topic: string,
  ) {}
  send(letters: readonly DeadLetter[]) {
    return sendDeadLetters(this.sender, this.topic, letters);
  }
}
