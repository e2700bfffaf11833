// The ingester's runner: it takes batches from the source (the Kafka seam), cuts them
// into chunks, has each chunk decoded (decode-chunk.ts: decode -> enrich -> encode),
// gathers chunks into load units (load-gatherer.ts) loaded by load-unit.ts (dedupe ->
// erasures -> load -> dead letters -> mark seen), and commits offsets in order. The
// steps are its callees; it holds only the Kafka side: batches, commits, the window of
// rows in flight, stopped partitions, the drain.
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
//
// The chunks of the partitions the source hands over together load as one unit (one
// insert per table, see load-gatherer.ts). eachBatch hands its chunks over and
// returns, so the next fetch overlaps the load; each chunk's offsets commit once its
// unit is loaded and marked, in order within its partition (commitInOrder()). A chunk
// fetched before the latest rebalance is never inserted: its partition may belong to
// another member by now.
import type { IncomingBatch, IncomingRecord, RecordSource, UndecodableBatch } from '@otm/shared/kafka';
import type { PlausibleBounds } from '@otm/schemas';
import type { Logger } from '@otm/shared/logger';
import { OrderedCommits, RowWindow } from '@otm/shared/ordered-commits';
import type { DecodedChunk } from './chunk.js';
import { decodeChunk } from './decode-chunk.js';
import { LoadGatherer } from './load-gatherer.js';
import { loadUnit } from './load-unit.js';
import type { IngesterMetrics } from './metrics.js';
import type { DeadLetterSink, Deduplicator, Erasures, EventStore, RecordDecoder } from './ports.js';
import type { PriceTable } from './prices.js';
import { Abandoned } from './retry.js';

export interface ConsumerOptions {
  topic: string;
  maxBatchRows: number;
  /** Rows decoded and not loaded yet, at most (the one unit loading and the next gathering); bounds memory. */
  maxPendingRows: number;
  /** Bytes of those rows' records as fetched, at most (none: no bound); bounds memory whatever the records' size. */
  maxPendingBytes?: number;
  /** Partition batches the source hands over at once; their chunks are loaded together. */
  partitionsConcurrently: number;
  /** How long a load unit waits for more partition chunks after its first. */
  gatherMs: number;
  /** The least time between the starts of two load units, unless the second is full, at its longest (0: none). */
  unitIntervalMs?: number;
  /** The shortest that interval falls to while loads are quick (load-gatherer.ts). */
  unitIntervalMinMs?: number;
  /** The share of the time the recent loads may take (0 < share ≤ 1; 0 or none: the interval stays unitIntervalMs). */
  unitLoadShare?: number;
  /** Rows a second at which the interval is unitIntervalMs whatever the load time (0 or none: the load time alone). */
  unitFullRate?: number;
  retryInitialMs: number;
  retryMaxMs: number;
  /** Tests only: throw a fatal error out of the first batch, as a bug would. */
  injectCrash?: boolean;
  /**
   * Tests only: a deliberately broken build that commits a chunk's offsets as soon as
   * it is taken, before its rows are inserted. A crash then loses what was taken and
   * not loaded; the chaos suite's self-test runs it to show the suite notices.
   */
  unsafeCommitBeforeLoad?: boolean;
  /** The freshness canary's API key id, when known: its records load into canary_probes, never usage_events. */
  canaryKeyId?: () => string | undefined;
}

export interface ConsumerDeps {
  /** The Kafka side (the seam's RecordSource: kafkajs in the service, in memory in unit tests). */
  source: RecordSource;
  decoder: RecordDecoder;
  dedupe: Deduplicator;
  store: EventStore;
  erasures: Erasures;
  deadLetters: DeadLetterSink;
  prices: PriceTable;
  /** What one call can plausibly report; beyond it a value is stored as null (enrich). Default: DEFAULT_PLAUSIBLE_BOUNDS. */
  plausible?: PlausibleBounds;
  metrics: IngesterMetrics;
  logger: Logger;
}

export class UsageConsumer {
  private readonly gatherer: LoadGatherer<DecodedChunk>;
  /** Commits in order per partition and generation (bumped at every rebalance: chunks fetched under an older generation are not inserted). */
  private readonly commits: OrderedCommits;
  /** Rows decoded and handed to the gatherer, not loaded yet (bounded by maxPendingRows and maxPendingBytes). */
  private readonly window: RowWindow;
  /** A partition's batch is cut into chunks of at most this many bytes (a chunk of one larger record goes alone). */
  private readonly maxChunkBytes: number;
  /** The chunks handed to the gatherer and not yet settled (for the age gauge). */
  private readonly pending = new Set<DecodedChunk>();
  /** An error out of our own code during a load: thrown from the next eachBatch, as it would have been inline. */
  private failure: Error | undefined;
  private draining = false;

  constructor(
    private readonly deps: ConsumerDeps,
    private readonly options: ConsumerOptions,
  ) {
    this.window = new RowWindow(options.maxPendingRows, options.maxPendingBytes ?? Infinity);
    // Half the window, so that the chunk loading leaves room for the next one.
    this.maxChunkBytes = (options.maxPendingBytes ?? Infinity) / 2;
    this.commits = new OrderedCommits({
      commit: (topic, partition, offset) => deps.source.commit(topic, partition, offset),
      onLoadFailed: (error, where) => {
        if (error instanceof Abandoned) return;
        this.failure ??= error instanceof Error ? error : new Error(String(error));
        deps.logger.error(
          { partition: where.partition, first: where.first, last: where.last, err: this.failure.message },
          'load failed; the consumer stops at its next batch',
        );
      },
      // The rows are in and marked; a later commit covers these offsets, and were there
      // none, the redelivered rows are known duplicates.
      onCommitFailed: (error, where) =>
        deps.logger.warn(
          { partition: where.partition, first: where.first, last: where.last, err: (error as Error).message },
          'offset commit failed',
        ),
    });
    this.gatherer = new LoadGatherer(
      {
        maxRows: options.maxBatchRows,
        lingerMs: options.gatherMs,
        maxIntervalMs: options.unitIntervalMs ?? 0,
        minIntervalMs: options.unitIntervalMinMs ?? 0,
        loadShare: options.unitLoadShare ?? 0,
        fullRate: options.unitFullRate ?? 0,
      },
      (decodedChunks) => loadUnit(decodedChunks, { deps: this.deps, options: this.options }),
    );
  }

  async start(): Promise<void> {
    await this.deps.source.run({
      topic: this.options.topic,
      partitionsConcurrently: this.options.partitionsConcurrently,
      onBatch: (batch) => this.eachBatch(batch),
      onAssignment: () => this.commits.nextGeneration(),
    });
  }

  private async eachBatch(batch: IncomingBatch): Promise<void> {
    if (this.options.injectCrash) throw new Error('injected fault: consumer-crash');
    if (this.failure) throw this.failure;
    const { records: messages, heartbeat, live } = batch;
    // A batch that could not be decoded ends the records (`undecodable`): what is before
    // it loads, the partition stops at it, and the other partitions go on.
    const generation = this.commits.generation;
    // Kept with each chunk until it loads, so it must not hold the batch (its records as
    // fetched): it holds the batch's own liveness function, which holds none of them.
    const alive = () => live() && generation === this.commits.generation;
    for (const { chunk, bytes } of chunksOf(messages, this.options.maxBatchRows, this.maxChunkBytes)) {
      const span = { rows: chunk.length, bytes };
      // Bounded memory: wait while the rows decoded and not yet loaded fill the window;
      // the unit gathering then goes as soon as it may (it cannot grow meanwhile).
      if (!this.window.fits(span)) this.gatherer.hurry();
      if (!(await this.window.take(span, alive, heartbeat))) return;
      if (this.draining) {
        this.window.release(span);
        return;
      }
      let decodedChunk: DecodedChunk;
      try {
        decodedChunk = await decodeChunk({ topic: batch.topic, partition: batch.partition, alive, heartbeat, bytes }, chunk, {
          deps: this.deps,
          options: this.options,
          canaryKeyId: this.options.canaryKeyId?.(),
        });
      } catch (error) {
        this.window.release(span);
        if (error instanceof Abandoned) return; // not resolved: fetched again by whoever owns the partition
        throw error;
      }
      this.commitInOrder(decodedChunk, generation, chunk[0]!.offset, chunk[chunk.length - 1]!.offset);
      // Releasing lets the client fetch on while the chunk loads; what is committed is
      // decided by commitInOrder(), only after the rows are in.
      batch.release(chunk[chunk.length - 1]!.offset);
    }
    if (batch.undecodable && alive()) this.stopPartition(batch.topic, batch.partition, batch.undecodable);
    await heartbeat();
  }

  /**
   * Holds a partition at a record batch that cannot be decoded: paused, its offset not
   * resolved, so neither this ingester nor the next owner of the partition moves past
   * it until an operator skips it (npm run skip-batch, the runbook in operations.md).
   * Loading it again later (a codec added) is then the same fetch from the same offset.
   */
  private stopPartition(topic: string, partition: number, bad: UndecodableBatch): void {
    const { source, metrics, logger } = this.deps;
    source.pause(topic, [partition]);
    metrics.undecodableBatches.inc({ topic, partition: String(partition) });
    metrics.stoppedPartitions.set({ topic, partition: String(partition) }, 1);
    logger.error(
      { topic, partition, firstOffset: bad.firstOffset, lastOffset: bad.lastOffset, codec: bad.codec, reason: bad.reason },
      'a record batch cannot be decoded: its partition stops there, the others load on (runbook: "A batch that cannot be decoded")',
    );
  }

  /**
   * Hands a decoded chunk to the gatherer and commits its offsets once it is loaded,
   * behind every earlier chunk of its partition: a partition's commits follow its
   * loads in order, and after a chunk that was not loaded nothing later of that
   * partition commits in this generation (the next generation starts from the last
   * commit, so the chunk is fetched again).
   */
  private commitInOrder(decodedChunk: DecodedChunk, generation: number, first: string, last: string): void {
    this.pending.add(decodedChunk);
    const loaded = this.gatherer.submit(decodedChunk);
    if (this.options.unsafeCommitBeforeLoad) {
      void this.deps.source.commit(decodedChunk.topic, decodedChunk.partition, (BigInt(last) + 1n).toString()).catch(() => undefined);
    }
    this.commits.track({ topic: decodedChunk.topic, partition: decodedChunk.partition, first, last }, generation, loaded, () => {
      this.pending.delete(decodedChunk);
      this.window.release(decodedChunk);
    });
  }

  /** The least time between the starts of two load units now, ms (load-gatherer.ts). */
  unitIntervalMs(): number {
    return this.gatherer.intervalMs();
  }

  /** The records taken and not yet loaded: how many, and their bytes as fetched. */
  pendingRecords(): { rows: number; bytes: number } {
    return { rows: this.window.rows, bytes: this.window.bytes };
  }

  /** Kafka timestamp (ms) of the oldest message taken and not yet loaded; undefined when none waits. */
  oldestPendingMs(): number | undefined {
    let oldest: number | undefined;
    for (const decodedChunk of this.pending)
      if (Number.isFinite(decodedChunk.oldestMs)) oldest = Math.min(oldest ?? Infinity, decodedChunk.oldestMs);
    return oldest;
  }

  /**
   * Graceful stop: takes no new chunks and waits (up to `timeoutMs`) until the chunks
   * already taken are loaded and committed, so a planned restart redelivers nothing.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.draining = true;
    this.deps.source.pause(this.options.topic);
    await this.commits.settle(timeoutMs);
  }
}

/** A record's bytes as fetched: its value and key (what the window counts). */
function recordBytes(message: IncomingRecord): number {
  return (message.value?.length ?? 0) + (message.key?.length ?? 0);
}

/**
 * A partition's records cut into chunks of at most `maxRows` records and `maxBytes`
 * bytes, in order; a record larger than `maxBytes` is a chunk of its own.
 */
export function* chunksOf(
  messages: readonly IncomingRecord[],
  maxRows: number,
  maxBytes: number,
): Generator<{ chunk: readonly IncomingRecord[]; bytes: number }> {
  let start = 0;
  let bytes = 0;
  for (let index = 0; index < messages.length; index++) {
    const size = recordBytes(messages[index]!);
    if (index > start && (index - start === maxRows || bytes + size > maxBytes)) {
      yield { chunk: messages.slice(start, index), bytes };
      start = index;
      bytes = 0;
    }
    bytes += size;
  }
  if (start < messages.length) yield { chunk: messages.slice(start), bytes };
}
