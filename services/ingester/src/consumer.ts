// The ingester's consumer: Kafka batch -> decode -> enrich -> dedupe -> load ->
// dead letters -> mark seen -> commit offsets.
//
// Delivery guarantee (at-least-once delivery, exactly-once effect):
//   1. rows are inserted into ClickHouse,
//   2. then their event keys are marked seen in Redis,
//   3. then the Kafka offsets of exactly those messages are committed.
// A crash before 1 redelivers and nothing was written. A crash between 1 and 2
// redelivers rows that Redis does not know yet: the load step finds their event
// keys in ClickHouse and skips them (and were one to slip through, e.g. from a
// zombie consumer, ReplacingMergeTree collapses it and raw queries group by
// event_key). A crash between 2 and 3 redelivers rows Redis has seen: they are
// dropped. Nothing answered 202 is lost, nothing is counted twice.
import type { Consumer, EachBatchPayload, KafkaMessage, Producer } from '@otm/shared/kafka';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import type { Logger } from '@otm/shared/logger';
import { decodeStep, type SchemaCache } from './decode-step.js';
import type { DedupeStep } from './dedupe-step.js';
import { enrich, type EnrichedRecord } from './enrich-step.js';
import { isDataError, loadStep } from './load-step.js';
import { sendDeadLetters, type DeadLetter } from './dead-letter.js';
import type { PriceTable } from './prices.js';
import type { IngesterMetrics } from './metrics.js';

export interface ConsumerOptions {
  topic: string;
  dlqTopic: string;
  maxBatchRows: number;
  /** Partitions whose batches are processed at once (overlaps waiting on ClickHouse and Redis). */
  partitionsConcurrently: number;
  retryInitialMs: number;
  retryMaxMs: number;
}

export interface ConsumerDeps {
  consumer: Consumer;
  dlqProducer: Producer;
  schemas: SchemaCache;
  dedupe: DedupeStep;
  clickhouse: ClickHouseClient;
  prices: PriceTable;
  metrics: IngesterMetrics;
  logger: Logger;
}

/** Thrown inside a retry loop when the batch must be given up (shutdown, rebalance). */
class Abandoned extends Error {}

interface Item {
  message: KafkaMessage;
  record: EnrichedRecord;
}

export class UsageConsumer {
  constructor(
    private readonly deps: ConsumerDeps,
    private readonly options: ConsumerOptions,
  ) {}

  async start(): Promise<void> {
    const { consumer } = this.deps;
    await consumer.subscribe({ topic: this.options.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionsConcurrently,
      eachBatch: (payload) => this.eachBatch(payload),
    });
  }

  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    const { batch, resolveOffset, heartbeat, isRunning, isStale } = payload;
    const { messages } = batch;
    for (let start = 0; start < messages.length; start += this.options.maxBatchRows) {
      const chunk = messages.slice(start, start + this.options.maxBatchRows);
      const alive = () => isRunning() && !isStale();
      if (!alive()) return;
      try {
        await this.process(batch.topic, batch.partition, chunk, alive, heartbeat);
      } catch (error) {
        if (error instanceof Abandoned) return; // not committed: redelivered to whoever owns the partition next
        throw error;
      }
      const last = chunk[chunk.length - 1]!.offset;
      await this.deps.consumer.commitOffsets([{ topic: batch.topic, partition: batch.partition, offset: (BigInt(last) + 1n).toString() }]);
      resolveOffset(last);
      await heartbeat();
    }
  }

  private async process(
    topic: string,
    partition: number,
    chunk: KafkaMessage[],
    alive: () => boolean,
    heartbeat: () => Promise<void>,
  ): Promise<void> {
    const { metrics, schemas, dedupe, clickhouse, prices } = this.deps;
    const started = performance.now();
    const retry = <T>(what: string, work: () => Promise<T>) => this.retrying(what, work, alive, heartbeat);
    const letters: DeadLetter[] = [];
    const letter = (message: KafkaMessage, reason: string) =>
      letters.push({ topic, partition, offset: message.offset, key: message.key, value: message.value, reason });

    const items: Item[] = [];
    for (const message of chunk) {
      const decoded = await retry('schema registry', () => decodeStep(message.value, schemas));
      if (decoded.kind === 'deadLetter') letter(message, decoded.reason);
      else items.push({ message, record: enrich(decoded.value, prices) });
    }

    const { fresh, duplicates } = await retry('redis (dedupe check)', () =>
      dedupe.filterSeen(items, (item) => item.record.event.event_key),
    );

    let alreadyLoaded = 0;
    const loaded = await retry('clickhouse', async () => {
      // A consumer that lost its partitions must not write what the new owner writes.
      if (!alive()) throw new Abandoned();
      try {
        alreadyLoaded = await loadStep(
          clickhouse,
          fresh.map((item) => item.record),
        );
        return fresh;
      } catch (error) {
        if (!isDataError(error)) throw error;
        // ClickHouse rejected the data: load row by row so one bad row cannot block the rest.
        const good: Item[] = [];
        for (const item of fresh) {
          try {
            await loadStep(clickhouse, [item.record]);
            good.push(item);
          } catch (rowError) {
            if (!isDataError(rowError)) throw rowError;
            letter(item.message, `clickhouse rejected the row: ${(rowError as Error).message.slice(0, 300)}`);
          }
        }
        return good;
      }
    });

    await retry('kafka (dead letters)', () => sendDeadLetters(this.deps.dlqProducer, this.options.dlqTopic, letters));
    await retry('redis (mark seen)', () => dedupe.markSeen(loaded.map((item) => item.record.event.event_key)));

    metrics.rowsLoaded.inc(loaded.length);
    metrics.duplicatesDropped.inc(duplicates + alreadyLoaded);
    metrics.deadLetters.inc(letters.length);
    metrics.unknownPrice.inc(loaded.filter((item) => item.record.event.price_known === 0).length);
    metrics.batchSeconds.observe((performance.now() - started) / 1000);
  }

  /** Retries an infrastructure call with capped exponential backoff until it works or the batch is abandoned. */
  private async retrying<T>(what: string, work: () => Promise<T>, alive: () => boolean, heartbeat: () => Promise<void>): Promise<T> {
    let delay = this.options.retryInitialMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (error instanceof Abandoned) throw error;
        this.deps.metrics.retries.inc({ dependency: what });
        if (attempt === 1 || attempt % 10 === 0) {
          this.deps.logger.warn({ dependency: what, attempt, err: (error as Error).message }, 'dependency failed; retrying');
        }
      }
      const until = Date.now() + delay;
      while (Date.now() < until) {
        if (!alive()) throw new Abandoned();
        await new Promise((resolve) => setTimeout(resolve, Math.min(250, until - Date.now())));
      }
      await heartbeat().catch(() => undefined);
      if (!alive()) throw new Abandoned();
      delay = Math.min(delay * 2, this.options.retryMaxMs);
    }
  }
}
