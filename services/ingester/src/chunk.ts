// A chunk: the records of one partition the runner took together, as they go through
// the pipeline. Each record ends with exactly one outcome (outcome.ts), set here and
// nowhere else; the chunk's offsets commit only when every record has one (tally()).
// What leaves is read from the outcomes: the dead letters sent, the metrics counted.
import type { IncomingRecord } from '@otm/shared/kafka';
import { recoverable, type Recover } from '@otm/shared/kafka-codecs';
import { RECORD_OUTCOMES, type DeadLetter, type OutcomeKind, type RecordOutcome } from './outcome.js';
import type { EncodedRow } from './rows.js';

/**
 * A record as its chunk holds it until the unit is in: what its dead letter would need,
 * and nothing of the record batch it was read from. A key or a header read from a batch
 * is a slice of the whole decompressed batch and keeps every record of it alive; held
 * so, the records waiting to load took their size twice (bench/analysis.md). A record
 * to be loaded needs its value again only if it becomes a dead letter at load time
 * (ClickHouse refuses its row, or its event key collides), so its value is read again
 * from the compressed batch then (`recover`), where the codec allows.
 */
export interface HeldRecord {
  key: Buffer | null;
  /** The value as fetched; null when `recover` reads it again. */
  value: Buffer | null;
  recover?: Recover;
  /** The gateway's request id (its `x-request-id` header), when it has one. */
  requestId?: string;
  offset: string;
  timestamp: string;
}

/**
 * `message` as a chunk holds it: the key copied, the request id as text, and the value
 * read again when needed, unless `keepValue` (a dead letter already, sent with its unit)
 * or the codec cannot read it again (then it is kept as fetched).
 */
export function held(message: IncomingRecord, keepValue: boolean): HeldRecord {
  const requestId = requestIdOf(message);
  const recover = !keepValue && message.value ? recoverable(message.value) : undefined;
  return {
    key: message.key === null ? null : Buffer.from(message.key),
    value: recover ? null : message.value && keepValue ? Buffer.from(message.value) : message.value,
    ...(recover ? { recover } : {}),
    ...(requestId === undefined ? {} : { requestId }),
    offset: message.offset,
    timestamp: message.timestamp,
  };
}

/** A record decoded into its rows, waiting in its chunk for the load. */
export interface Item {
  message: HeldRecord;
  /** Its position in the chunk. */
  index: number;
  row: EncodedRow;
  chunk: DecodedChunk;
}

/** One partition chunk, decoded, waiting to be loaded with the others of its unit. */
export interface DecodedChunk {
  topic: string;
  partition: number;
  /** The chunk's records, in offset order, as held until the unit is in. */
  messages: readonly HeldRecord[];
  /** How many records the chunk holds (what the window and the gatherer count). */
  rows: number;
  /** The bytes of its records as fetched (what the window bounds beside the rows). */
  bytes: number;
  /** The records decoded into rows, to be loaded. */
  items: Item[];
  /** canary_probes rows (JSON lines) of the freshness canary's records in the chunk. */
  probes: string[];
  /** Each record's outcome, by position, once it has one. */
  outcomes: (RecordOutcome | undefined)[];
  /** Kafka timestamp (ms) of the chunk's oldest message. */
  oldestMs: number;
  alive: () => boolean;
  heartbeat: () => Promise<void>;
}

/** Records `outcome` as how the chunk's record at `index` leaves; a record has one outcome, and a second is a fault of the pipeline. */
export function settle(chunk: DecodedChunk, index: number, outcome: RecordOutcome): void {
  if (chunk.outcomes[index] !== undefined) {
    throw new Error(`offset ${chunk.messages[index]?.offset} of partition ${chunk.partition} was given a second outcome (${outcome.kind})`);
  }
  chunk.outcomes[index] = outcome;
}

/** How many records of `chunks` ended in each outcome; throws when one has none (it would be committed without leaving). */
export function tally(chunks: readonly DecodedChunk[]): Record<OutcomeKind, number> {
  const counts = Object.fromEntries(Object.keys(RECORD_OUTCOMES).map((kind) => [kind, 0])) as Record<OutcomeKind, number>;
  for (const chunk of chunks) {
    for (const [index, message] of chunk.messages.entries()) {
      const outcome = chunk.outcomes[index];
      if (outcome === undefined) throw new Error(`offset ${message.offset} of partition ${chunk.partition} has no outcome`);
      counts[outcome.kind]++;
    }
  }
  return counts;
}

/** The dead letters of `chunks`: each record whose outcome is `deadLetter`, unchanged, with its reason and origin. */
export async function deadLettersOf(chunks: readonly DecodedChunk[]): Promise<DeadLetter[]> {
  const letters: DeadLetter[] = [];
  // The values read again from one compressed batch share its decompression.
  const batches = new Map<Buffer, Promise<Buffer>>();
  for (const chunk of chunks) {
    for (const [index, message] of chunk.messages.entries()) {
      const outcome = chunk.outcomes[index];
      if (outcome?.kind !== 'deadLetter') continue;
      const { requestId } = message;
      letters.push({
        headers: requestId === undefined ? outcome.headers : { 'x-request-id': requestId, ...outcome.headers },
        topic: chunk.topic,
        partition: chunk.partition,
        offset: message.offset,
        key: message.key,
        value: message.value ?? (await message.recover?.(batches)) ?? null,
        code: outcome.code,
        reason: outcome.reason,
      });
    }
  }
  return letters;
}

/** The gateway's request id of a message (its `x-request-id` header), when it has one. */
export function requestIdOf(message: IncomingRecord): string | undefined {
  const header = message.headers?.['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value === undefined ? undefined : value.toString();
}
