// The ingester's consumer: Kafka batch -> decode -> enrich -> gather into a load
// unit -> dedupe -> load -> dead letters -> mark seen -> commit offsets.
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
// The chunks of the partitions kafkajs hands over together load as one unit (one
// insert per table, see load-gatherer.ts). eachBatch hands its chunks over and
// returns, so the next fetch overlaps the load; each chunk's offsets commit once its
// unit is loaded and marked, in order within its partition (commitInOrder()). A chunk fetched
// before the latest rebalance is never inserted: its partition may belong to another
// member by now.
import { isFenced, subjectKey } from '@otm/shared/erasures';
import { undecodableBatch, type Consumer, type EachBatchPayload, type KafkaMessage, type UndecodableBatch } from '@otm/shared/kafka';
import type { QueuedUsageRecord } from '@otm/schemas';
import type { Logger } from '@otm/shared/logger';
import { enrich, rowText, type RowText } from './enrich-step.js';
import { formatDateTime } from '@otm/shared/clickhouse-values';
import type { DeadLetter } from './dead-letter.js';
import { noneUnanswered, type IsolatedLoad, type Unanswered } from './load-step.js';
import type { DeadLetterSink, Deduplicator, Erasures, EventStore, RecordDecoder } from './stage-ports.js';
import { failureReason } from './failure-reason.js';
import { LoadGatherer, type ChunkOutcome } from './load-gatherer.js';
import { OrderedCommits, RowWindow } from '@otm/shared/ordered-commits';
import type { PriceTable } from './prices.js';
import type { IngesterMetrics } from './metrics.js';

export interface ConsumerOptions {
  topic: string;
  maxBatchRows: number;
  /** Rows decoded and not loaded yet, at most (the one unit loading and the next gathering); bounds memory. */
  maxPendingRows: number;
  /** Partition batches kafkajs hands over at once; their chunks are loaded together. */
  partitionsConcurrently: number;
  /** How long a load unit waits for more partition chunks after its first. */
  gatherMs: number;
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
  consumer: Consumer;
  decoder: RecordDecoder;
  dedupe: Deduplicator;
  store: EventStore;
  erasures: Erasures;
  deadLetters: DeadLetterSink;
  prices: PriceTable;
  metrics: IngesterMetrics;
  logger: Logger;
}

const FULL_HINT =
  'Redis is at maxmemory with noeviction: nothing is lost (offsets stay uncommitted until the keys are marked); raise maxmemory or lower DEDUPE_TTL_SECONDS';

/** Thrown inside a retry loop when the batch must be given up (shutdown, rebalance). */
class Abandoned extends Error {}

/** A unit holding a row of an interval whose rollup rows are being rebuilt (an erasure, a re-costing) waits. */
class Fenced extends Error {
  constructor() {
    super('the rollup rows of a time in this unit are being rebuilt (an erasure or a re-costing); waiting');
  }
}

interface Item {
  message: KafkaMessage;
  row: RowText;
  decodedChunk: DecodedChunk;
}

/** One partition chunk, decoded, waiting to be loaded with the others of its unit. */
interface DecodedChunk {
  topic: string;
  partition: number;
  rows: number;
  items: Item[];
  letters: DeadLetter[];
  /** canary_probes rows (JSON lines) of the freshness canary's records in the chunk. */
  probes: string[];
  /** Kafka timestamp (ms) of the chunk's oldest message. */
  oldestMs: number;
  alive: () => boolean;
  heartbeat: () => Promise<void>;
}

export class UsageConsumer {
  private readonly gatherer: LoadGatherer<DecodedChunk>;
  /** Commits in order per partition and generation (bumped at every rebalance: chunks fetched under an older generation are not inserted). */
  private readonly commits: OrderedCommits;
  /** Rows decoded and handed to the gatherer, not loaded yet (bounded by maxPendingRows). */
  private readonly window: RowWindow;
  /** The chunks handed to the gatherer and not yet settled (for the age gauge). */
  private readonly pending = new Set<DecodedChunk>();
  /** An error out of our own code during a load: thrown from the next eachBatch, as it would have been inline. */
  private failure: Error | undefined;
  private draining = false;

  constructor(
    private readonly deps: ConsumerDeps,
    private readonly options: ConsumerOptions,
  ) {
    this.window = new RowWindow(options.maxPendingRows);
    this.commits = new OrderedCommits({
      commit: (topic, partition, offset) => deps.consumer.commitOffsets([{ topic, partition, offset }]),
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
    this.gatherer = new LoadGatherer({ maxRows: options.maxBatchRows, lingerMs: options.gatherMs }, (decodedChunks) =>
      this.loadUnit(decodedChunks),
    );
  }

  async start(): Promise<void> {
    const { consumer } = this.deps;
    const bump = () => this.commits.nextGeneration();
    consumer.on(consumer.events.REBALANCING, bump);
    consumer.on(consumer.events.GROUP_JOIN, bump);
    await consumer.subscribe({ topic: this.options.topic, fromBeginning: true });
    await consumer.run({
      autoCommit: false,
      eachBatchAutoResolve: false,
      partitionsConsumedConcurrently: this.options.partitionsConcurrently,
      eachBatch: (payload) => this.eachBatch(payload),
    });
  }

  private async eachBatch(payload: EachBatchPayload): Promise<void> {
    if (this.options.injectCrash) throw new Error('injected fault: consumer-crash');
    if (this.failure) throw this.failure;
    const { batch, resolveOffset, heartbeat, isRunning, isStale } = payload;
    // A batch that could not be decoded arrives as one marker, last: what is before it
    // loads, the partition stops at it, and the other partitions go on.
    const stuck = batch.messages.findIndex((message) => undecodableBatch(message) !== undefined);
    const messages = stuck < 0 ? batch.messages : batch.messages.slice(0, stuck);
    const generation = this.commits.generation;
    const alive = () => isRunning() && !isStale() && generation === this.commits.generation;
    for (let start = 0; start < messages.length; start += this.options.maxBatchRows) {
      const chunk = messages.slice(start, start + this.options.maxBatchRows);
      // Bounded memory: wait while the rows decoded and not yet loaded fill the window.
      if (!(await this.window.waitForRoom(chunk.length, alive, heartbeat)) || this.draining) return;
      let decodedChunk: DecodedChunk;
      try {
        decodedChunk = await this.decode(batch.topic, batch.partition, chunk, alive, heartbeat);
      } catch (error) {
        if (error instanceof Abandoned) return; // not resolved: fetched again by whoever owns the partition
        throw error;
      }
      this.commitInOrder(decodedChunk, generation, chunk[0]!.offset, chunk[chunk.length - 1]!.offset);
      // Resolving lets kafkajs fetch on while the chunk loads; what is committed is
      // decided by commitInOrder(), only after the rows are in.
      resolveOffset(chunk[chunk.length - 1]!.offset);
    }
    if (stuck >= 0 && alive()) this.stopPartition(batch.topic, batch.partition, undecodableBatch(batch.messages[stuck]!)!);
    await heartbeat();
  }

  /**
   * Holds a partition at a record batch that cannot be decoded: paused, its offset not
   * resolved, so neither this ingester nor the next owner of the partition moves past
   * it until an operator skips it (npm run skip-batch, the runbook in operations.md).
   * Loading it again later (a codec added) is then the same fetch from the same offset.
   */
  private stopPartition(topic: string, partition: number, bad: UndecodableBatch): void {
    const { consumer, metrics, logger } = this.deps;
    consumer.pause([{ topic, partitions: [partition] }]);
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
   * partition commits in this generation (kafkajs starts the next generation from the
   * last commit, so the chunk is fetched again).
   */
  private commitInOrder(decodedChunk: DecodedChunk, generation: number, first: string, last: string): void {
    this.window.add(decodedChunk.rows);
    this.pending.add(decodedChunk);
    const loaded = this.gatherer.submit(decodedChunk);
    if (this.options.unsafeCommitBeforeLoad) {
      void this.deps.consumer
        .commitOffsets([{ topic: decodedChunk.topic, partition: decodedChunk.partition, offset: (BigInt(last) + 1n).toString() }])
        .catch(() => undefined);
    }
    this.commits.track({ topic: decodedChunk.topic, partition: decodedChunk.partition, first, last }, generation, loaded, () => {
      this.pending.delete(decodedChunk);
      this.window.release(decodedChunk.rows);
    });
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
    this.deps.consumer.pause([{ topic: this.options.topic }]);
    await this.commits.settle(timeoutMs);
  }

  /** Decode and enrich one chunk (CPU only, but the registry may need asking). */
  private async decode(
    topic: string,
    partition: number,
    chunk: KafkaMessage[],
    alive: () => boolean,
    heartbeat: () => Promise<void>,
  ): Promise<DecodedChunk> {
    const { decoder, prices } = this.deps;
    let oldestMs = Infinity;
    for (const message of chunk) oldestMs = Math.min(oldestMs, Number(message.timestamp));
    const decodedChunk: DecodedChunk = {
      topic,
      partition,
      rows: chunk.length,
      items: [],
      letters: [],
      probes: [],
      oldestMs,
      alive,
      heartbeat,
    };
    const canaryKeyId = this.options.canaryKeyId?.();
    for (const message of chunk) {
      const decoded = await this.retrying('schema registry', () => decoder.decode(message.value), alive, heartbeat);
      if (decoded.kind === 'deadLetter') {
        addDeadLetter(decodedChunk, message, decoded.reason);
        continue;
      }
      if (canaryKeyId !== undefined && decoded.value.meta.apiKeyId === canaryKeyId) {
        decodedChunk.probes.push(probeRow(decoded.value));
        continue;
      }
      // enrich is total by design (a value it cannot use becomes null and an anomaly);
      // this guard makes sure a record it still cannot handle is a dead letter, never a
      // throw out of the consumer loop.
      let row: RowText;
      try {
        row = rowText(enrich(decoded.value, prices));
      } catch (error) {
        addDeadLetter(decodedChunk, message, `enrich failed: ${(error as Error).message}`);
        continue;
      }
      decodedChunk.items.push({ message, row, decodedChunk });
    }
    return decodedChunk;
  }

  /**
   * Loads the decodedChunks of one unit together: one Redis check, one ClickHouse load, one
   * batch of dead letters, one Redis mark. A decodedChunk whose partition was lost (or the
   * consumer stopping) before the insert is left out and reported abandoned.
   */
  private async loadUnit(decodedChunks: DecodedChunk[]): Promise<ChunkOutcome[]> {
    const { metrics, dedupe, store, erasures } = this.deps;
    const started = performance.now();
    const anyAlive = () => decodedChunks.some((decodedChunk) => decodedChunk.alive());
    const heartbeat = async () => {
      await Promise.all(decodedChunks.map((decodedChunk) => decodedChunk.heartbeat().catch(() => undefined)));
    };
    const retry = <T>(what: string, work: () => Promise<T>) => this.retrying(what, work, anyAlive, heartbeat);
    const outcomes = new Map<DecodedChunk, 'loaded' | 'abandoned'>(decodedChunks.map((decodedChunk) => [decodedChunk, 'loaded']));
    try {
      const items = decodedChunks.flatMap((decodedChunk) => decodedChunk.items);
      const { fresh, duplicates, collisions } = await retry('redis (dedupe check)', () =>
        dedupe.filterSeen(
          items,
          (item) => item.row.eventKey,
          (item) => item.row.digest,
        ),
      );
      // The key was loaded with another record: never silently dropped as a duplicate.
      for (const item of collisions) {
        addDeadLetter(item.decodedChunk, item.message, `event key collision: ${item.row.eventKey} was loaded with a different record`, {
          'x-dlq-event-key': item.row.eventKey,
        });
      }

      const checked = performance.now();
      // Inserts of this unit that ended without an answer: their records may be stored
      // but not counted by every rollup (rollup-repair.ts).
      const unanswered = noneUnanswered();
      let alreadyLoaded = 0;
      let erased = 0;
      let refused: { item: Item; reason: string; headers: Record<string, string> }[] = [];
      const loaded = await retry('clickhouse', async () => {
        // A consumer that lost a partition must not write what the new owner writes.
        for (const decodedChunk of decodedChunks) if (!decodedChunk.alive()) outcomes.set(decodedChunk, 'abandoned');
        const live = loadableItems(
          items,
          fresh,
          (item) => outcomes.get(item.decodedChunk) === 'loaded',
          (item) => item.row.eventKey,
        );
        if (live.length === 0 && !anyAlive()) throw new Abandoned();
        // The insert attempt holds a lease while it checks the erasures and inserts
        // (erasures.ts): an erased user's records received before the erasure are
        // dropped, never loaded nor dead-lettered.
        const check = await erasures
          .beginInsert(live.map((item) => ({ environment: item.row.environment, userId: item.row.userId })))
          .catch((error: unknown) => {
            throw Object.assign(error as Error, { dependency: 'redis (erasure lease)' });
          });
        let result: IsolatedLoad<Item>;
        let kept: Item[];
        try {
          if (check.fenced.length > 0 && live.some((item) => isFenced(check.fenced, item.row.eventMs, item.row.isError))) {
            throw new Fenced();
          }
          kept =
            check.erasedAt.size === 0
              ? live
              : live.filter((item) => {
                  const erasedAt = check.erasedAt.get(subjectKey({ environment: item.row.environment, userId: item.row.userId }));
                  return erasedAt === undefined || item.row.receivedAtMs > erasedAt;
                });
          // A row ClickHouse refuses is found by halving and dead-lettered; the rest load.
          result = await store.load(kept, (item) => item.row, unanswered);
        } finally {
          await erasures.endInsert(check.lease).catch(() => undefined);
        }
        // Stored by an insert that ended without an answer: recounted before the unit goes on.
        const recount = result.alreadyLoaded.filter((eventKey) => unanswered.eventKeys.has(eventKey));
        if (recount.length > 0) await this.recount(recount, unanswered);
        erased = live.length - kept.length;
        alreadyLoaded = result.alreadyLoaded.length;
        refused = result.refused.map(({ item, code, message }) => ({
          item,
          reason: `clickhouse refused the row: code ${code}: ${message}`,
          headers: { 'x-dlq-clickhouse-code': String(code), 'x-dlq-clickhouse-message': message },
        }));
        return result.loaded;
      });
      for (const { item, reason, headers } of refused) addDeadLetter(item.decodedChunk, item.message, reason, headers);
      const loadedParts = decodedChunks.filter((decodedChunk) => outcomes.get(decodedChunk) === 'loaded');
      const probes = loadedParts.flatMap((decodedChunk) => decodedChunk.probes);
      if (probes.length > 0) await retry('clickhouse (canary)', () => store.insertProbes(probes));

      const inserted = performance.now();
      const letters = loadedParts.flatMap((decodedChunk) => decodedChunk.letters);
      await retry('kafka (dead letters)', () => this.deps.deadLetters.send(letters));
      for (const sent of letters) {
        this.deps.logger.warn(
          { requestId: sent.headers?.['x-request-id'], partition: sent.partition, offset: sent.offset, reason: sent.reason.slice(0, 300) },
          'dead-lettered',
        );
      }
      await retry('redis (mark seen)', () =>
        dedupe.markSeen(loaded.map((item) => ({ eventKey: item.row.eventKey, digest: item.row.digest }))),
      );

      metrics.rowsLoaded.inc(loaded.length);
      metrics.erasedDropped.inc(erased);
      metrics.duplicatesDropped.inc(duplicates + alreadyLoaded);
      metrics.deadLetters.inc(letters.length);
      metrics.keyCollisions.inc(collisions.length);
      metrics.unknownPrice.inc(loaded.filter((item) => !item.row.priceKnown).length);
      const done = performance.now();
      metrics.batchSeconds.observe((done - started) / 1000);
      metrics.batchRows.observe(loaded.length);
      this.deps.logger.debug(
        {
          decodedChunks: decodedChunks.length,
          rows: loaded.length,
          ms: { dedupe: Math.round(checked - started), load: Math.round(inserted - checked), mark: Math.round(done - inserted) },
        },
        'unit loaded',
      );
    } catch (error) {
      // Given up before the rows were loaded and marked: nothing of this unit commits.
      return decodedChunks.map(() => (error instanceof Error ? error : new Error(String(error))));
    }
    return decodedChunks.map((decodedChunk) => (outcomes.get(decodedChunk) === 'loaded' ? 'loaded' : new Abandoned()));
  }

  /**
   * Recounts the rollups of records an unanswered insert stored (rollup-repair.ts): under
   * a fence of their days, each rollup group they fall in is compared with usage_events
   * and mended. Throws to be retried with the load (which then finds them stored again).
   */
  private async recount(eventKeys: readonly string[], unanswered: Unanswered): Promise<void> {
    const started = performance.now();
    const outcome = await this.deps.store.recount(eventKeys, unanswered).catch((error: unknown) => {
      throw Object.assign(error as Error, { dependency: 'clickhouse (rollup recount)' });
    });
    unanswered.eventKeys.clear();
    unanswered.queryIds.clear();
    for (const table of outcome.tables) {
      if (table.appended > 0) this.deps.metrics.rollupRecounts.inc({ table: table.table, action: 'appended' }, table.appended);
      if (table.rebuilt > 0) this.deps.metrics.rollupRecounts.inc({ table: table.table, action: 'rebuilt' }, table.rebuilt);
    }
    this.deps.logger.warn(
      {
        records: eventKeys.length,
        stored: outcome.stored,
        copiedByUser: outcome.copied,
        mended: outcome.tables.filter((table) => table.appended + table.rebuilt > 0),
        ms: Math.round(performance.now() - started),
      },
      'rollups recounted for records an unanswered insert stored',
    );
  }

  /** Retries an infrastructure call with capped exponential backoff until it works or the batch is abandoned. */
  private async retrying<T>(what: string, work: () => Promise<T>, alive: () => boolean, heartbeat: () => Promise<void>): Promise<T> {
    let delay = this.options.retryInitialMs;
    for (let attempt = 1; ; attempt++) {
      try {
        return await work();
      } catch (error) {
        if (error instanceof Abandoned) throw error;
        const reason = failureReason(error);
        // A step of the work may name its own dependency (the erasure lease is Redis inside the insert's retry).
        const dependency = (error as { dependency?: string }).dependency ?? what;
        this.deps.metrics.retries.inc({ dependency, reason });
        if (attempt === 1 || attempt % 10 === 0) {
          this.deps.logger.warn(
            { dependency, reason, attempt, err: (error as Error).message, ...(reason === 'full' ? { hint: FULL_HINT } : {}) },
            'dependency failed; retrying',
          );
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

/**
 * The items a load unit inserts: one per event key that Redis has not seen, taken
 * from a decodedChunk still being loaded. A unit can hold the same records twice (a chunk
 * fetched before a rebalance, now given up, beside the same offsets fetched again
 * after it), and Redis's answer names the first occurrence: the one kept here is the
 * first occurrence among the live decodedChunks, so a given-up copy never stands in for the
 * copy that commits.
 */
export function loadableItems<T>(items: readonly T[], fresh: readonly T[], live: (item: T) => boolean, keyOf: (item: T) => string): T[] {
  const freshKeys = new Set(fresh.map(keyOf));
  const taken = new Set<string>();
  const loadable: T[] = [];
  for (const item of items) {
    const key = keyOf(item);
    if (!live(item) || !freshKeys.has(key) || taken.has(key)) continue;
    taken.add(key);
    loadable.push(item);
  }
  return loadable;
}

/** The canary_probes row of a canary record: its probe id is the idempotency key the canary sent. */
export function probeRow(queued: QueuedUsageRecord): string {
  const receivedMs = Date.parse(queued.meta.receivedAt);
  return JSON.stringify({
    probe_id: queued.meta.idempotencyKey ?? queued.meta.requestId,
    received_at_ms: Number.isFinite(receivedMs) && receivedMs > 0 ? receivedMs : 0,
    loaded_at: formatDateTime(Date.now()),
  });
}

/** The gateway's request id of a message (its `x-request-id` header), when it has one. */
export function requestIdOf(message: KafkaMessage): string | undefined {
  const header = message.headers?.['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value === undefined ? undefined : value.toString();
}

function addDeadLetter(decodedChunk: DecodedChunk, message: KafkaMessage, reason: string, headers?: DeadLetter['headers']): void {
  const requestId = requestIdOf(message);
  decodedChunk.letters.push({
    headers: requestId === undefined ? headers : { 'x-request-id': requestId, ...headers },
    topic: decodedChunk.topic,
    partition: decodedChunk.partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    reason,
  });
}
