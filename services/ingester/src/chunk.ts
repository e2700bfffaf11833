// A chunk: the records of one partition the runner took together, as they go through
// the pipeline. Each record ends with exactly one outcome (outcome.ts), set here and
// nowhere else; the chunk's offsets commit only when every record has one (tally()).
// What leaves is read from the outcomes: the dead letters sent, the metrics counted.
import type { IncomingRecord } from '@otm/shared/kafka';
import { RECORD_OUTCOMES, type DeadLetter, type OutcomeKind, type RecordOutcome } from './outcome.js';
import type { EncodedRow } from './rows.js';

/** A record decoded into its rows, waiting in its chunk for the load. */
export interface Item {
  message: IncomingRecord;
  /** Its position in the chunk. */
  index: number;
  row: EncodedRow;
  chunk: DecodedChunk;
}

/** One partition chunk, decoded, waiting to be loaded with the others of its unit. */
export interface DecodedChunk {
  topic: string;
  partition: number;
  /** The chunk's records, in offset order. */
  messages: readonly IncomingRecord[];
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
export function deadLettersOf(chunks: readonly DecodedChunk[]): DeadLetter[] {
  const letters: DeadLetter[] = [];
  for (const chunk of chunks) {
    for (const [index, message] of chunk.messages.entries()) {
      const outcome = chunk.outcomes[index];
      if (outcome?.kind !== 'deadLetter') continue;
      const requestId = requestIdOf(message);
      letters.push({
        headers: requestId === undefined ? outcome.headers : { 'x-request-id': requestId, ...outcome.headers },
        topic: chunk.topic,
        partition: chunk.partition,
        offset: message.offset,
        key: message.key,
        value: message.value,
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
