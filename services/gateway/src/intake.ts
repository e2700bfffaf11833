// The one intake: every record the gateway accepts, from the single, batch and OTLP
// routes, goes through accept(). It owns what makes a record accepted: the schema and
// bounds (record-intake.ts), one record per event key inside a request, the replay
// check against answers already given, the capture policy, and the enqueue (a record
// is accepted only once Kafka acknowledged it). It returns one result per item, in
// order; the routes only decode their body into items and turn the results into their
// own answer (202 / 207 / 400 / 503, or OTLP partial_success).
import { ServiceError, refuse } from '@otm/shared/errors';
import { WireWriter } from '@otm/shared/registry';
import { EventLoopTurn } from './event-loop-turn.js';
import { ProduceUnavailableError, type QueueListener, type RecordQueue } from './produce-batcher.js';
import {
  checkRecord,
  prepareRecord,
  previousAnswer,
  queuedJson,
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
  batcher: RecordQueue;
  /** Called for each record answered from the replay memory. */
  onReplay?: () => void;
}

/** Every request's messages are written into the same slabs (a single record takes a few kilobytes of one). */
const writer = new WireWriter();

/**
 * An item for the intake: as a route decoded it, the refusal its decoding already made,
 * or one still to be decoded (a batch's deferred item: parsed when the intake reaches
 * it; it throws, out of accept(), a refusal of the whole request, before anything of the
 * request is queued).
 */
export type IntakeEntry = IntakeItem | ServiceError | (() => IntakeItem | ServiceError);

/**
 * Accepts `items`: one result per entry, in order. Two items of one request with the
 * same event key are one record (the second answered as the first) when they are the
 * same record, and the second is refused (IdempotencyKeyReused) when they are not.
 *
 * Each item's record is checked, prepared (its capture policy applied) and written into
 * its message as soon as it is reached, and let go of then: a request's parsed records
 * and their text are never alive together, and none is held while the request waits for
 * Kafka's acknowledgement, so V8's young collections copy a record or two per request
 * in flight instead of its every record (bench/analysis.md). Nothing is queued before
 * every item is read. Replays and a request's repeated items keep only their digest.
 */
export async function accept(items: readonly IntakeEntry[], context: IntakeContext, deps: IntakeDeps): Promise<ItemResult[]> {
  const results: ItemResult[] = new Array(items.length);
  /** The items to queue, in order (what each one's answer and the replay memory need), and their messages. */
  const toQueue: QueuedRecord[] = [];
  const values: Buffer[] = [];
  // The first item holding each event key, with its digest: a later item with the same
  // key is the same record (answered as the first) or a reused key.
  const firstWithKey = new Map<string, { index: number; digest: string | undefined }>();
  const twins: [number, number][] = [];
  const turn = new EventLoopTurn();

  for (let index = 0; index < items.length; index++) {
    // A large request is checked in slices, so other requests are answered between them.
    if (turn.long()) await turn.yield();
    const entry = items[index]!;
    const item = typeof entry === 'function' ? entry() : entry;
    if (item instanceof ServiceError) {
      results[index] = { kind: 'refused', error: item };
      continue;
    }
    const body = item.record;
    item.record = undefined;
    try {
      const record = checkRecord(body, item.idempotencyKey, item.requestId, context);
      const first = firstWithKey.get(record.eventKey);
      if (first !== undefined) {
        if (first.digest !== record.digest) throw reusedKey();
        twins.push([index, first.index]);
        continue;
      }
      // Without a digest until the replay check passes: a twin of a refused record is refused as a reused key.
      const mine: { index: number; digest: string | undefined } = { index, digest: undefined };
      if (item.idempotencyKey !== undefined) firstWithKey.set(record.eventKey, mine);
      const previous = previousAnswer(record, context.replay);
      mine.digest = record.digest;
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
      // Its text is a view of the intake's scratch until written (record-intake.ts): no wait between its check and here.
      const prepared = prepareRecord(record, context);
      const value = writer.write(context.schemaId, queuedJson(prepared, context));
      toQueue.push({
        index,
        requestId: prepared.requestId,
        eventKey: prepared.eventKey,
        idempotencyKey: prepared.idempotencyKey,
        digest: prepared.digest,
        usage: prepared.usage,
      });
      values.push(value);
    } catch (error) {
      if (!(error instanceof ServiceError)) throw error;
      results[index] = { kind: 'refused', error };
    }
  }

  if (toQueue.length > 0) {
    const answers = new QueueAnswers(results, toQueue, context);
    for (let slot = 0; slot < toQueue.length; slot++) {
      const record = toQueue[slot]!;
      deps.batcher.put({ key: record.eventKey, value: values[slot]!, requestId: record.requestId }, answers, slot);
    }
    values.length = 0;
    await answers.done;
  }
  for (const [index, first] of twins) results[index] = results[first]!;
  return results;
}

/** What the answer and the replay memory need of a queued record once its message is written, and where its result goes. */
interface QueuedRecord extends Pick<PreparedRecord, 'requestId' | 'eventKey' | 'idempotencyKey' | 'digest' | 'usage'> {
  index: number;
}

/**
 * Hears the queue's outcome of a request's records (one listener per request, not a
 * promise per record): each one's result, the replay memory of those acknowledged, and
 * `done` once every one has its outcome. A failure that is not the queue's refusal (a
 * fault of the gateway) rejects `done` at once, as it would have failed the request.
 */
class QueueAnswers implements QueueListener {
  readonly done: Promise<void>;
  private pending: number;
  private resolve!: () => void;
  private reject!: (error: Error) => void;

  constructor(
    private readonly results: ItemResult[],
    private readonly queued: readonly QueuedRecord[],
    private readonly context: IntakeContext,
  ) {
    this.pending = queued.length;
    this.done = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
  }

  settled(slot: number, error: Error | undefined): void {
    const record = this.queued[slot]!;
    if (error === undefined) {
      const { requestId, eventKey, idempotencyKey, digest, usage } = record;
      const timestamp = this.context.receivedAtIso;
      this.results[record.index] = { kind: 'accepted', requestId, timestamp, usage, replay: false };
      if (idempotencyKey) this.context.replay?.set(eventKey, { requestId, timestamp, digest });
    } else if (error instanceof ProduceUnavailableError) {
      this.results[record.index] = { kind: 'unavailable', reason: error.message };
    } else {
      this.reject(error);
    }
    if (--this.pending === 0) this.resolve();
  }
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
