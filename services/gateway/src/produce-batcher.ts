// Coalesces concurrent records into one Produce request so throughput does not
// collapse to one broker round trip per HTTP request. A caller's promise settles
// only when the batch holding its record is acknowledged by the broker (acks=all,
// idempotent producer): the gateway's 202 means "durably on the topic".
import type { RecordSender } from '@otm/shared/kafka';

export interface QueuedMessage {
  key: string;
  value: Buffer;
  /** The request id the gateway answered with: sent as the `x-request-id` header, for logs and dead letters downstream. */
  requestId?: string;
}

/**
 * Hears how each record it queued left the queue, once: `error` undefined when Kafka
 * acknowledged it, a ProduceUnavailableError when it was not taken or not acknowledged in
 * time. `slot` is the number the caller gave the record when it queued it.
 */
export interface QueueListener {
  settled(slot: number, error: Error | undefined): void;
}

/**
 * Where the intake queues records: each record's outcome is told to its listener, at once
 * when the queue does not take it, otherwise when its batch is acknowledged or given up.
 * One listener for a request's records, instead of a promise per record: a record
 * waiting for Kafka holds this one entry and nothing else (bench/analysis.md).
 */
export interface RecordQueue {
  put(message: QueuedMessage, listener: QueueListener, slot: number): void;
}

/** A RecordQueue over a function that queues one record and settles when it is acknowledged (a test's or a bench's queue). */
export function promiseQueue(enqueue: (message: QueuedMessage) => Promise<void>): RecordQueue {
  return {
    put(message, listener, slot) {
      enqueue(message).then(
        () => listener.settled(slot, undefined),
        (error: unknown) => listener.settled(slot, error instanceof Error ? error : new Error(String(error))),
      );
    },
  };
}

/** A record in the queue or in flight: its message, its deadline, and whom to tell. */
class Waiting {
  constructor(
    readonly key: string,
    readonly value: Buffer,
    readonly requestId: string | undefined,
    /** When the caller must have its answer (enqueue time + sendTimeoutMs). */
    readonly deadline: number,
    readonly listener: QueueListener,
    readonly slot: number,
  ) {}

  settle(error: Error | undefined): void {
    this.listener.settled(this.slot, error);
  }
}

export interface ProduceBatcherOptions {
  topic: string;
  /** Batches in flight at once, each on a producer of its own (an idempotent kafkajs producer allows one request in flight). */
  maxInFlightBatches?: number;
  lingerMs: number;
  maxBatchRecords: number;
  /** Bytes of record values per Produce request at most (a record larger than this travels alone). */
  maxBatchBytes: number;
  maxQueuedRecords: number;
  /** Bytes of record values waiting for a producer at most (the queue's memory); a record that would pass it gets 503 unless the queue is empty. */
  maxQueuedBytes?: number;
  sendTimeoutMs: number;
  /** Headers every message carries (the content type, the schema id); `x-request-id` is added per message. */
  headers?: Record<string, string>;
}

export interface ProduceBatcherEvents {
  onBatch?(records: number, durationMs: number, ok: boolean): void;
}

export class ProduceUnavailableError extends Error {}

export interface ProducerSlot {
  current(): Promise<RecordSender>;
  reset(): Promise<void>;
}

export class ProduceBatcher implements RecordQueue {
  private queue: Waiting[] = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private sweeper: NodeJS.Timeout | undefined;
  private inFlight = 0;
  private closed = false;
  private idle: (() => void)[] = [];

  /**
   * @param producers one handle per batch that may be in flight; each returns its
   * connected sender, and after a failed send the batcher resets that handle, so
   * an idempotent producer whose last request has an unknown outcome never reuses
   * its sequence numbers.
   */
  private readonly idleProducers: ProducerSlot[];

  constructor(
    producers: ProducerSlot | ProducerSlot[],
    private readonly options: ProduceBatcherOptions,
    private readonly events: ProduceBatcherEvents = {},
  ) {
    this.idleProducers = (Array.isArray(producers) ? producers : [producers]).slice(0, options.maxInFlightBatches ?? 1);
  }

  get depth(): number {
    return this.queue.length;
  }

  /** Queues one record; settles once its batch is acknowledged (rejects with ProduceUnavailableError otherwise). */
  enqueue(message: QueuedMessage): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.put(message, { settled: (_slot, error) => (error === undefined ? resolve() : reject(error)) }, 0);
    });
  }

  put(message: QueuedMessage, listener: QueueListener, slot: number): void {
    if (this.closed) return listener.settled(slot, new ProduceUnavailableError('gateway is shutting down'));
    const overBytes = this.queue.length > 0 && this.queuedBytes + message.value.length > (this.options.maxQueuedBytes ?? Infinity);
    if (this.queue.length >= this.options.maxQueuedRecords || overBytes) {
      return listener.settled(slot, new ProduceUnavailableError('produce queue is full'));
    }
    this.queue.push(new Waiting(message.key, message.value, message.requestId, Date.now() + this.options.sendTimeoutMs, listener, slot));
    this.queuedBytes += message.value.length;
    this.sweeper ??= setInterval(() => this.sweep(), 100);
    if (this.idleProducers.length === 0) return; // flushed as soon as an in-flight batch completes
    if (this.queue.length >= this.options.maxBatchRecords) this.flushSoon(0);
    else this.flushSoon(this.options.lingerMs);
  }

  private flushSoon(delayMs: number): void {
    if (this.timer && delayMs > 0) return;
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.flush();
    }, delayMs);
  }

  /**
   * Answers 503 to records still queued past their deadline (the broker is slow
   * or down) and takes them out of the queue, so they are never written after
   * their caller was told they were not accepted.
   */
  private sweep(): void {
    const now = Date.now();
    if (this.queue.length > 0 && this.queue[0]!.deadline <= now) {
      const expired = this.queue.filter((waiting) => waiting.deadline <= now);
      this.queue = this.queue.filter((waiting) => waiting.deadline > now);
      for (const waiting of expired) this.queuedBytes -= waiting.value.length;
      const error = new ProduceUnavailableError('no broker acknowledgement within the bound');
      for (const waiting of expired) waiting.settle(error);
    }
    if (this.queue.length === 0 && this.inFlight === 0) {
      clearInterval(this.sweeper);
      this.sweeper = undefined;
    }
  }

  private async flush(): Promise<void> {
    if (this.idleProducers.length === 0 || this.queue.length === 0) return;
    const slot = this.idleProducers.pop()!;
    this.inFlight++;
    const batch = this.takeBatch();
    if (this.queue.length > 0 && this.idleProducers.length > 0) this.flushSoon(0);
    const started = performance.now();
    // The batch may wait only as long as its most urgent record may.
    const timeoutMs = Math.max(50, Math.min(...batch.map((waiting) => waiting.deadline)) - Date.now());
    let failure: ProduceUnavailableError | undefined;
    try {
      // The bound covers connecting too: a broker that is down must not hold callers.
      await withTimeout(
        slot.current().then((sender) =>
          sender.send(
            this.options.topic,
            batch.map(({ key, value, requestId }) => {
              const headers = requestId ? { ...this.options.headers, 'x-request-id': requestId } : this.options.headers;
              return headers ? { key, value, headers } : { key, value };
            }),
          ),
        ),
        timeoutMs,
      );
    } catch (error) {
      failure = new ProduceUnavailableError(`produce failed: ${(error as Error).message}`);
    }
    try {
      for (const waiting of batch) waiting.settle(failure);
      // The outcome of a failed request is unknown (it may still be written): start
      // over with a new producer id rather than reuse its sequence numbers.
      if (failure) await slot.reset().catch(() => undefined);
    } finally {
      this.events.onBatch?.(batch.length, performance.now() - started, failure === undefined);
      this.inFlight--;
      this.idleProducers.push(slot);
    }
    if (this.queue.length > 0) this.flushSoon(0);
    else if (this.inFlight === 0) for (const resolve of this.idle.splice(0)) resolve();
  }

  private takeBatch(): Waiting[] {
    let bytes = 0;
    let count = 0;
    while (count < this.queue.length && count < this.options.maxBatchRecords) {
      bytes += this.queue[count]!.value.length;
      if (count > 0 && bytes > this.options.maxBatchBytes) break;
      count++;
    }
    const batch = this.queue.splice(0, count);
    for (const waiting of batch) this.queuedBytes -= waiting.value.length;
    return batch;
  }

  /** Stops intake and waits until every queued record has been answered. */
  async drain(): Promise<void> {
    this.closed = true;
    if (this.inFlight === 0 && this.queue.length === 0) return;
    await new Promise<void>((resolve) => this.idle.push(resolve));
  }
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no broker acknowledgement within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}
