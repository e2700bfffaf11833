// The one intake: every record the gateway accepts, from the single, batch and OTLP
// routes, goes through accept(). It owns what makes a record accepted: the schema and
// bounds (record-intake.ts), one record per event key inside a request, the replay
// check against answers already given, the capture policy, and the enqueue (a record
// is accepted only once Kafka acknowledged it). It returns one result per item, in
// order; the routes only decode their body into items and turn the results into their
// own answer (202 / 207 / 400 / 503, or OTLP partial_success).
import { ServiceError, refuse } from '@otm/shared/errors';
import { encodeWireAll } from '@otm/shared/registry';
import { EventLoopTurn } from './event-loop-turn.js';
import { ProduceUnavailableError, type QueuedMessage } from './produce-batcher.js';
import {
  checkRecord,
  prepareRecord,
  previousAnswer,
  queuedJson,
  type CheckedRecord,
  type IntakeContext,
  type PreparedRecord,
  type Usage,
} from './record-intake.js';

/** One record as a route decoded it. */
export interface IntakeItem {
  /** The record as parsed, not yet validated; accept() lets go of it once it is checked (below). */
  record: unknown;
  /** The record's idempotency key (header, item member or span ids), if it has one. */
  idempotencyKey: string | undefined;
  /** The request id a new record gets. */
  requestId: string;
}

export type ItemResult =
  /** Queued and acknowledged, or a replay of a record accepted before (its first answer's id and time). */
  | { kind: 'accepted'; requestId: string; timestamp: string; usage: Usage; replay: boolean }
  /** Refused for what it holds (400, 422): the error says why. */
  | { kind: 'refused'; error: ServiceError }
  /** Valid, but the queue did not take it: the client retries. */
  | { kind: 'unavailable'; reason: string };

export interface IntakeDeps {
  batcher: { enqueue(message: QueuedMessage): Promise<void> };
  /** Called for each record answered from the replay memory. */
  onReplay?: () => void;
}

/**
 * Accepts `items` (or the refusal a route's decoding already made of one): one result
 * per entry, in order. Two items of one request with the same event key are one
 * record (the second answered as the first) when they are the same record, and the
 * second is refused (IdempotencyKeyReused) when they are not.
 *
 * It takes the items: each item's parsed record is let go of once checked, and a record
 * to queue once its message is written, so that a batch's parsed objects and their text
 * are not held while the request waits for Kafka's acknowledgement (about 10-20 MB less
 * of the gateway's peak RSS under load; bench/analysis.md). Replays and a request's
 * repeated items keep their checked record until the answer.
 */
export async function accept(
  items: readonly (IntakeItem | ServiceError)[],
  context: IntakeContext,
  deps: IntakeDeps,
): Promise<ItemResult[]> {
  const results: ItemResult[] = new Array(items.length);
  const checked: (CheckedRecord | undefined)[] = new Array(items.length);
  /** The indexes of the items to queue, in order. */
  const toQueue: number[] = [];
  // The first item holding each event key: a later item with the same key is the same
  // record (answered as the first) or a reused key.
  const firstWithKey = new Map<string, number>();
  const twins: [number, number][] = [];
  const turn = new EventLoopTurn();

  for (let index = 0; index < items.length; index++) {
    // A large request is checked in slices, so other requests are answered between them.
    await turn.yieldIfLong();
    const item = items[index]!;
    if (item instanceof ServiceError) {
      results[index] = { kind: 'refused', error: item };
      continue;
    }
    const body = item.record;
    item.record = undefined;
    try {
      const record = checkRecord(body, item.idempotencyKey, item.requestId, context);
      checked[index] = record;
      const first = firstWithKey.get(record.eventKey);
      if (first !== undefined) {
        if (checked[first]?.digest !== record.digest) throw reusedKey();
        twins.push([index, first]);
        continue;
      }
      if (item.idempotencyKey !== undefined) firstWithKey.set(record.eventKey, index);
      const previous = previousAnswer(record, context.replay);
      if (previous) {
        deps.onReplay?.();
        results[index] = {
          kind: 'accepted',
          requestId: previous.requestId,
          timestamp: previous.timestamp,
          usage: record.usage,
          replay: true,
        };
        continue;
      }
      toQueue.push(index);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      checked[index] = undefined;
      results[index] = { kind: 'refused', error };
    }
  }

  const { values, queued } = await writeMessages(toQueue, checked, context, turn);
  await Promise.all(
    toQueue.map((index, position) => {
      const record = queued[position]!;
      return deps.batcher.enqueue({ key: record.eventKey, value: values[position]!, requestId: record.requestId }).then(
        () => {
          results[index] = {
            kind: 'accepted',
            requestId: record.requestId,
            timestamp: context.receivedAtIso,
            usage: record.usage,
            replay: false,
          };
          if (record.idempotencyKey) {
            context.replay?.set(record.eventKey, { requestId: record.requestId, timestamp: context.receivedAtIso, digest: record.digest });
          }
        },
        (error: unknown) => {
          if (!(error instanceof ProduceUnavailableError)) throw error;
          results[index] = { kind: 'unavailable', reason: error.message };
        },
      );
    }),
  );
  for (const [index, first] of twins) results[index] = results[first]!;
  return results;
}

/** What the answer and the replay memory need of a queued record, once its message is written. */
type QueuedRecord = Pick<PreparedRecord, 'requestId' | 'eventKey' | 'idempotencyKey' | 'digest' | 'usage'>;

/**
 * Applies the capture policy (redaction) to the records to queue (`toQueue`, indexes
 * into `checked`), and writes every message value into one buffer (encodeWireAll). Each
 * checked record is let go of once prepared, and the records' text once written: what
 * comes back holds none of them.
 */
async function writeMessages(
  toQueue: readonly number[],
  checked: (CheckedRecord | undefined)[],
  context: IntakeContext,
  turn: EventLoopTurn,
): Promise<{ values: Buffer[]; queued: QueuedRecord[] }> {
  const pieces: string[][] = [];
  const queued: QueuedRecord[] = [];
  for (const index of toQueue) {
    await turn.yieldIfLong();
    const prepared = prepareRecord(checked[index]!, context);
    checked[index] = undefined;
    pieces.push(queuedJson(prepared, context));
    const { requestId, eventKey, idempotencyKey, digest, usage } = prepared;
    queued.push({ requestId, eventKey, idempotencyKey, digest, usage });
  }
  return { values: encodeWireAll(context.schemaId, pieces), queued };
}

/** The sum of the accepted results' token counts. */
export function acceptedUsage(results: readonly ItemResult[]): Usage {
  const total: Usage = { inputTokens: 0, outputTokens: 0, totalTokens: 0 };
  for (const result of results) {
    if (result.kind !== 'accepted') continue;
    total.inputTokens += result.usage.inputTokens;
    total.outputTokens += result.usage.outputTokens;
    total.totalTokens += result.usage.totalTokens;
  }
  return total;
}

function reusedKey(): ServiceError {
  return refuse('idempotencyKeyReusedInRequest');
}
