// One load unit: the decoded chunks of the partitions kafkajs handed over together
// (load-gatherer.ts), loaded as one: one Redis check, one ClickHouse load (erased
// users' records dropped, a row ClickHouse refuses found by halving and dead-lettered,
// records an unanswered insert stored recounted), one batch of dead letters, one
// Redis mark. Each chunk learns its outcome; consumer.ts commits the loaded ones in
// order. Every dependency call is retried (retry.ts) until it works or the chunks are
// given up (a rebalance, a stop).
import { isFenced, subjectKey } from '@otm/shared/rollups/fence';
import type { IncomingRecord } from '@otm/shared/kafka';
import type { Logger } from '@otm/shared/logger';
import { deadLetterReason, type DeadLetter, type DeadLetterCode } from './dead-letter.js';
import type { EncodedRow } from './encode-step.js';
import { loadableItems } from './loadable-items.js';
import type { ChunkOutcome } from './load-gatherer.js';
import { noneUnanswered, type IsolatedLoad, type Unanswered } from './load-step.js';
import type { IngesterMetrics } from './metrics.js';
import { Abandoned, retrying } from './retry.js';
import type { DeadLetterSink, Deduplicator, Erasures, EventStore } from './stage-ports.js';

/** What a load unit uses: the stages, and the retry's backoff. */
export interface LoadContext {
  deps: {
    dedupe: Deduplicator;
    store: EventStore;
    erasures: Erasures;
    deadLetters: DeadLetterSink;
    metrics: IngesterMetrics;
    logger: Logger;
  };
  options: { retryInitialMs: number; retryMaxMs: number };
}

/** A unit holding a row of an interval whose rollup rows are being rebuilt (an erasure, a re-costing) waits. */
class Fenced extends Error {
  constructor() {
    super('the rollup rows of a time in this unit are being rebuilt (an erasure or a re-costing); waiting');
  }
}

export interface Item {
  message: IncomingRecord;
  row: EncodedRow;
  decodedChunk: DecodedChunk;
}

/** One partition chunk, decoded, waiting to be loaded with the others of its unit. */
export interface DecodedChunk {
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

/**
 * Loads the decodedChunks of one unit together: one Redis check, one ClickHouse load, one
 * batch of dead letters, one Redis mark. A decodedChunk whose partition was lost (or the
 * consumer stopping) before the insert is left out and reported abandoned.
 */
export async function loadUnit(decodedChunks: DecodedChunk[], context: LoadContext): Promise<ChunkOutcome[]> {
  const { metrics, dedupe, store, erasures } = context.deps;
  const started = performance.now();
  const anyAlive = () => decodedChunks.some((decodedChunk) => decodedChunk.alive());
  const heartbeat = async () => {
    await Promise.all(decodedChunks.map((decodedChunk) => decodedChunk.heartbeat().catch(() => undefined)));
  };
  const retry = <T>(what: string, work: () => Promise<T>) => retrying(context, what, work, anyAlive, heartbeat);
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
      addDeadLetter(
        item.decodedChunk,
        item.message,
        'event_key_collision',
        deadLetterReason('event_key_collision', { eventKey: item.row.eventKey }),
        {
          'x-dlq-event-key': item.row.eventKey,
        },
      );
    }

    const checked = performance.now();
    // Inserts of this unit that ended without an answer: their records may be stored
    // but not counted by every rollup (rollups/repair.ts in the shared package).
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
      // (rollups/fence.ts in the shared package): an erased user's records received
      // before the erasure are dropped, never loaded nor dead-lettered.
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
      if (recount.length > 0) await recountRollups(context, recount, unanswered);
      erased = live.length - kept.length;
      alreadyLoaded = result.alreadyLoaded.length;
      refused = result.refused.map(({ item, code, message }) => ({
        item,
        reason: deadLetterReason('clickhouse_refused', { code, message }),
        headers: { 'x-dlq-clickhouse-code': String(code), 'x-dlq-clickhouse-message': message },
      }));
      return result.loaded;
    });
    for (const { item, reason, headers } of refused) addDeadLetter(item.decodedChunk, item.message, 'clickhouse_refused', reason, headers);
    const loadedParts = decodedChunks.filter((decodedChunk) => outcomes.get(decodedChunk) === 'loaded');
    const probes = loadedParts.flatMap((decodedChunk) => decodedChunk.probes);
    if (probes.length > 0) await retry('clickhouse (canary)', () => store.insertProbes(probes));

    const inserted = performance.now();
    const letters = loadedParts.flatMap((decodedChunk) => decodedChunk.letters);
    await retry('kafka (dead letters)', () => context.deps.deadLetters.send(letters));
    for (const sent of letters) {
      context.deps.logger.warn(
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
    context.deps.logger.debug(
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
 * Recounts the rollups of records an unanswered insert stored (rollups/repair.ts in
 * the shared package): under a fence of their days, each rollup group they fall in is
 * compared with usage_events and mended. Throws to be retried with the load (which
 * then finds them stored again).
 */
async function recountRollups(context: LoadContext, eventKeys: readonly string[], unanswered: Unanswered): Promise<void> {
  const started = performance.now();
  const outcome = await context.deps.store.recount(eventKeys, unanswered).catch((error: unknown) => {
    throw Object.assign(error as Error, { dependency: 'clickhouse (rollup recount)' });
  });
  unanswered.eventKeys.clear();
  unanswered.queryIds.clear();
  for (const table of outcome.tables) {
    if (table.appended > 0) context.deps.metrics.rollupRecounts.inc({ table: table.table, action: 'appended' }, table.appended);
    if (table.rebuilt > 0) context.deps.metrics.rollupRecounts.inc({ table: table.table, action: 'rebuilt' }, table.rebuilt);
  }
  context.deps.logger.warn(
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

/** The gateway's request id of a message (its `x-request-id` header), when it has one. */
export function requestIdOf(message: IncomingRecord): string | undefined {
  const header = message.headers?.['x-request-id'];
  const value = Array.isArray(header) ? header[0] : header;
  return value === undefined ? undefined : value.toString();
}

export function addDeadLetter(
  decodedChunk: DecodedChunk,
  message: IncomingRecord,
  code: DeadLetterCode,
  reason: string,
  headers?: DeadLetter['headers'],
): void {
  const requestId = requestIdOf(message);
  decodedChunk.letters.push({
    headers: requestId === undefined ? headers : { 'x-request-id': requestId, ...headers },
    topic: decodedChunk.topic,
    partition: decodedChunk.partition,
    offset: message.offset,
    key: message.key,
    value: message.value,
    code,
    reason,
  });
}
