// The ingester's stages as its runner sees them: small interfaces, so the pipeline
// runs the same against the real services (adapters.ts: the registry, Redis,
// ClickHouse, Kafka) and against the in-memory stand-ins of its unit tests
// (consumer.test.ts). Types only, and the values they pass between them.
import type { RollupFence } from '@otm/shared/rollups/fence';
import type { RecountOutcome } from '@otm/shared/rollups/repair';
import type { QueuedUsageRecord } from '@otm/schemas';
import type { DeadLetter, StepOutcome } from './outcome.js';
import type { EncodedRow } from './rows.js';

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

/**
 * Erasures (services/shared/src/rollups/fence.ts): a lease per insert attempt, the
 * tombstones and the fence; and the marks of days handed to the day rollups' job that a
 * unit's late records change (services/shared/src/rollups/day-levels.ts).
 */
export type Erasures = Pick<RollupFence, 'beginInsert' | 'endInsert' | 'markDays'>;

/** Where records that can never load go, with their reason. */
export interface DeadLetterSink {
  send(letters: readonly DeadLetter[]): Promise<void>;
}

export interface SeenCheck<T> {
  /** Not loaded before: the first of each key in the batch. */
  fresh: T[];
  /** Loaded before with the same record, or repeated in the batch with the same record. */
  duplicates: number;
  /** The key was loaded (or comes earlier in the batch) with a different record. */
  collisions: T[];
}

export interface SeenMark {
  eventKey: string;
  digest: string;
}

/** Inserts that ended without an answer, noted across the attempts of one load unit. */
export interface Unanswered {
  /** Those into usage_events: their rollups are recounted (rollups/repair.ts). */
  queryIds: Set<string>;
  eventKeys: Set<string>;
  /** The event keys of those into usage_io. */
  ioEventKeys: Set<string>;
}

export const noneUnanswered = (): Unanswered => ({ queryIds: new Set(), eventKeys: new Set(), ioEventKeys: new Set() });

export interface RefusedRow<T> {
  item: T;
  /** ClickHouse's error code and message for this row alone. */
  code: number;
  message: string;
}

export interface IsolatedLoad<T> {
  loaded: T[];
  refused: RefusedRow<T>[];
  /** Event keys usage_events held already (a replay). */
  alreadyLoaded: string[];
}
