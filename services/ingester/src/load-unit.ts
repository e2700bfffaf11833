// One load unit: the decoded chunks of the partitions the source handed over together
// (load-gatherer.ts), loaded as one: one Redis check, one ClickHouse load (erased
// users' records dropped, a row ClickHouse refuses found by halving, records an
// unanswered insert stored recounted), one batch of dead letters, one Redis mark.
// Every record of a chunk that loads ends with its outcome (chunk.ts); each chunk
// learns its own result, and consumer.ts commits the loaded ones in order. Every
// dependency call is retried (retry.ts) until it works or the chunks are given up
// (a rebalance, a stop).
import { isFenced, subjectKey } from '@otm/shared/rollups/fence';
import type { Logger } from '@otm/shared/logger';
import { deadLettersOf, settle, tally, type DecodedChunk, type Item } from './chunk.js';
import type { ChunkOutcome } from './load-gatherer.js';
import { loadableItems } from './loadable-items.js';
import type { IngesterMetrics } from './metrics.js';
import { deadLetter, type OutcomeKind } from './outcome.js';
import { noneUnanswered, type DeadLetterSink, type Deduplicator, type Erasures, type EventStore, type Unanswered } from './ports.js';
import { Abandoned, retrying } from './retry.js';

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

/** What the last insert attempt of a unit did with its items. */
interface Stored {
  /** The items Redis had not seen, first of each key, of chunks still loading. */
  candidates: Item[];
  /** Of those, the ones of erased users. */
  erased: Item[];
  loaded: Item[];
  refused: { item: Item; code: number; message: string }[];
  /** Event keys usage_events held already. */
  alreadyLoaded: Set<string>;
}

/**
 * Loads the chunks of one unit together. A chunk whose partition was lost (or the
 * consumer stopping) before the insert is left out and reported abandoned; the others
 * end with every record's outcome settled, or all with the error that stopped them.
 */
export async function loadUnit(chunks: DecodedChunk[], context: LoadContext): Promise<ChunkOutcome[]> {
  const { metrics, dedupe, store } = context.deps;
  const started = performance.now();
  const anyAlive = () => chunks.some((chunk) => chunk.alive());
  const heartbeat = async () => {
    await Promise.all(chunks.map((chunk) => chunk.heartbeat().catch(() => undefined)));
  };
  const retry = <T>(what: string, work: () => Promise<T>) => retrying(context, what, work, anyAlive, heartbeat);
  const abandoned = new Set<DecodedChunk>();
  try {
    const items = chunks.flatMap((chunk) => chunk.items);
    const seen = await retry('redis (dedupe check)', () =>
      dedupe.filterSeen(
        items,
        (item) => item.row.eventKey,
        (item) => item.row.digest,
      ),
    );
    const checked = performance.now();
    const collisions = new Set(seen.collisions);
    // Inserts of this unit that ended without an answer: their records may be stored
    // but not counted by every rollup (rollups/repair.ts in the shared package).
    const unanswered = noneUnanswered();
    const stored = await retry('clickhouse', async () => {
      // A consumer that lost a partition must not write what the new owner writes.
      for (const chunk of chunks) if (!chunk.alive()) abandoned.add(chunk);
      const candidates = loadableItems(
        items.filter((item) => !collisions.has(item)),
        seen.fresh,
        (item) => !abandoned.has(item.chunk),
        (item) => item.row.eventKey,
      );
      if (candidates.length === 0 && !anyAlive()) throw new Abandoned();
      return insertOnce(context, candidates, unanswered);
    });
    const loading = chunks.filter((chunk) => !abandoned.has(chunk));
    settleUnit(loading, collisions, stored);
    const counts = tally(loading);
    const probes = loading.flatMap((chunk) => chunk.probes);
    if (probes.length > 0) await retry('clickhouse (canary)', () => store.insertProbes(probes));

    const inserted = performance.now();
    const letters = await deadLettersOf(loading);
    await retry('kafka (dead letters)', () => context.deps.deadLetters.send(letters));
    for (const sent of letters) {
      context.deps.logger.warn(
        { requestId: sent.headers?.['x-request-id'], partition: sent.partition, offset: sent.offset, reason: sent.reason.slice(0, 300) },
        'dead-lettered',
      );
    }
    await retry('redis (mark seen)', () =>
      dedupe.markSeen(stored.loaded.map((item) => ({ eventKey: item.row.eventKey, digest: item.row.digest }))),
    );
    count(context, counts, letters.filter((letter) => letter.code === 'event_key_collision').length, stored);
    const done = performance.now();
    metrics.batchSeconds.observe((done - started) / 1000);
    context.deps.logger.debug(
      {
        chunks: chunks.length,
        rows: counts.loaded,
        ms: { dedupe: Math.round(checked - started), load: Math.round(inserted - checked), mark: Math.round(done - inserted) },
      },
      'unit loaded',
    );
  } catch (error) {
    // Given up before the rows were loaded and marked: nothing of this unit commits.
    return chunks.map(() => (error instanceof Error ? error : new Error(String(error))));
  }
  return chunks.map((chunk) => (abandoned.has(chunk) ? new Abandoned() : 'loaded'));
}

/**
 * One insert attempt: under an erasure lease (rollups/fence.ts in the shared package),
 * an erased user's records received before the erasure are dropped, the rest loaded
 * (a row ClickHouse refuses found by halving), and records an earlier unanswered
 * attempt stored are recounted before the unit goes on. Throws to be retried.
 */
async function insertOnce(context: LoadContext, candidates: Item[], unanswered: Unanswered): Promise<Stored> {
  const check = await context.deps.erasures
    .beginInsert(candidates.map((item) => ({ environment: item.row.environment, userId: item.row.userId })))
    .catch((error: unknown) => {
      // Named by the step that failed where it says (the lease taken from ClickHouse while Redis is down).
      throw Object.assign(error as Error, { dependency: (error as { dependency?: string }).dependency ?? 'redis (erasure lease)' });
    });
  try {
    if (check.fenced.length > 0 && candidates.some((item) => isFenced(check.fenced, item.row.eventMs, item.row.isError))) {
      throw new Fenced();
    }
    const erased: Item[] = [];
    const kept: Item[] = [];
    for (const item of candidates) {
      const erasedAt =
        check.erasedAt.size === 0
          ? undefined
          : check.erasedAt.get(subjectKey({ environment: item.row.environment, userId: item.row.userId }));
      (erasedAt !== undefined && item.row.receivedAtMs <= erasedAt ? erased : kept).push(item);
    }
    // Records of days the day rollups' job was handed: their days are marked before the insert.
    const watermark = check.dayWatermarkMs;
    if (watermark > 0) {
      let late: number[] | undefined;
      for (const item of kept) if (item.row.eventMs < watermark) (late ??= []).push(item.row.eventMs);
      if (late) await context.deps.erasures.markDays(late);
    }
    const result = await context.deps.store.load(kept, (item) => item.row, unanswered);
    // Stored by an insert that ended without an answer: recounted before the unit goes on.
    const recount = result.alreadyLoaded.filter((eventKey) => unanswered.eventKeys.has(eventKey));
    if (recount.length > 0) await recountRollups(context, recount, unanswered);
    return { candidates, erased, loaded: result.loaded, refused: result.refused, alreadyLoaded: new Set(result.alreadyLoaded) };
  } finally {
    await context.deps.erasures.endInsert(check.lease).catch(() => undefined);
  }
}

/** Every record of the loading chunks gets its outcome: those decode settled already, the rest from what the load did. */
function settleUnit(loading: readonly DecodedChunk[], collisions: ReadonlySet<Item>, stored: Stored): void {
  const candidates = new Set(stored.candidates);
  for (const chunk of loading) {
    for (const item of chunk.items) {
      if (collisions.has(item)) {
        const eventKey = item.row.eventKey;
        settle(chunk, item.index, deadLetter('event_key_collision', { eventKey }, { 'x-dlq-event-key': eventKey }));
      } else if (!candidates.has(item)) {
        settle(chunk, item.index, { kind: 'duplicate' }); // seen by Redis, or a repeat in the unit
      }
    }
  }
  for (const item of stored.erased) settle(item.chunk, item.index, { kind: 'erased' });
  for (const { item, code, message } of stored.refused) {
    const headers = { 'x-dlq-clickhouse-code': String(code), 'x-dlq-clickhouse-message': message };
    settle(item.chunk, item.index, deadLetter('clickhouse_refused', { code, message }, headers));
  }
  for (const item of stored.loaded) {
    settle(item.chunk, item.index, { kind: stored.alreadyLoaded.has(item.row.eventKey) ? 'duplicate' : 'loaded' });
  }
}

/** The unit's outcomes in the metrics, once it is loaded and marked. */
function count(context: LoadContext, counts: Record<OutcomeKind, number>, collisions: number, stored: Stored): void {
  const { metrics } = context.deps;
  for (const [outcome, records] of Object.entries(counts)) if (records > 0) metrics.records.inc({ outcome }, records);
  metrics.rowsLoaded.inc(counts.loaded);
  metrics.erasedDropped.inc(counts.erased);
  metrics.duplicatesDropped.inc(counts.duplicate);
  metrics.deadLetters.inc(counts.deadLetter);
  metrics.keyCollisions.inc(collisions);
  metrics.unknownPrice.inc(stored.loaded.filter((item) => !item.row.priceKnown && !stored.alreadyLoaded.has(item.row.eventKey)).length);
  metrics.batchRows.observe(counts.loaded);
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
