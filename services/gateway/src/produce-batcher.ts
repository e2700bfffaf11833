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

interface Waiting extends QueuedMessage {
  /** When the caller must have its answer (enqueue time + sendTimeoutMs). */
  deadline: number;
  resolve(): void;
  reject(error: Error): void;
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

export class ProduceBatcher {
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

  enqueue(message: QueuedMessage): Promise<void> {
    if (this.closed) return Promise.reject(new ProduceUnavailableError('gateway is shutting down'));
    const overBytes = this.queue.length > 0 && this.queuedBytes + message.value.length > (this.options.maxQueuedBytes ?? Infinity);
    if (this.queue.length >= this.options.maxQueuedRecords || overBytes) {
      return Promise.reject(new ProduceUnavailableError('produce queue is full'));
    }
    return new Promise<void>((resolve, reject) => {
      this.queue.push({ ...message, deadline: Date.now() + this.options.sendTimeoutMs, resolve, reject });
      this.queuedBytes += message.value.length;
      this.sweeper ??= setInterval(() => this.sweep(), 100);
      if (this.idleProducers.length === 0) return; // flushed as soon as an in-flight batch completes
      if (this.queue.length >= this.options.maxBatchRecords) this.flushSoon(0);
      else this.flushSoon(this.options.lingerMs);
    });
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
      for (const waiting of expired) waiting.reject(error);
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
    let ok = false;
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
      ok = true;
      for (const waiting of batch) waiting.resolve();
    } catch (error) {
      const failure = new ProduceUnavailableError(`produce failed: ${(error as Error).message}`);
      for (const waiting of batch) waiting.reject(failure);
      // The outcome of the failed request is unknown (it may still be written):
      // start over with a new producer id rather than reuse its sequence numbers.
      await slot.reset().catch(() => undefined);
    } finally {
      this.events.onBatch?.(batch.length, performance.now() - started, ok);
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
