// Gathers decoded partition chunks into load units, so ClickHouse gets one large
// insert per table instead of one small insert per partition (ClickHouse 18.16 pays
// per insert: a new chunk per table and per materialized view, and the merges that
// follow). Each contributor learns its own chunk's outcome; nothing here touches
// Kafka, Redis or ClickHouse.
//
// One unit loads at a time, and the next gathers meanwhile (pipelining): while
// ClickHouse works on one insert, the consumer fetches and decodes the next chunks,
// so the ingester's CPU and ClickHouse's are busy at once instead of in turns. A unit
// closes and loads
//   - at once when the unit ahead of it finishes (it has been gathering all along),
//   - when it holds `maxRows` rows and nothing is loading,
//   - `lingerMs` after its first chunk arrived when nothing was loading (an idle
//     ingester waits that long for the other partitions of the same fetch);
// but, unless it holds `maxRows` rows or the consumer can hand over nothing more until
// a unit loads (`hurry()`: its window of pending rows is full, under a backlog), never
// sooner than the interval after the unit ahead of it started: under live traffic
// units then follow at most that often and grow with the rate, instead of following
// back to back as small as one insert's time lets them be (each insert costs
// ClickHouse a fixed part per table, see above).
//
// The interval follows the load: it is the recent units' load time divided by
// `loadShare` (a moving average, so one slow unit does not decide it), kept between
// `minIntervalMs` and `maxIntervalMs`. An insert's time is a fixed part plus a part per
// row, so while ClickHouse answers quickly (a moderate rate, a quiet machine) units
// follow every `minIntervalMs` and a record waits less for its unit; as the rate or the
// machine's load grows, each unit takes longer, the interval grows with it up to
// `maxIntervalMs`, and the inserts a second fall where the fixed part per insert costs
// the most. Without `loadShare` (0) the interval is `maxIntervalMs`.
//
// The load time alone says little of how busy the machine is: an insert of a few
// thousand rows takes ClickHouse about as long at half the pipeline's top rate as near
// it, so the share alone keeps units small and frequent up to the top, where each
// unit's fixed part costs the most. With `fullRate` the interval is also at least
// `maxIntervalMs` × the recent rows a second ÷ `fullRate` (a moving average of each
// unit's rows over the time since the unit before it started): it grows with the rate
// and reaches `maxIntervalMs` at `fullRate` rows a second, whatever the load time.
// A unit takes at most `maxRows` rows (and at least one chunk); the rest wait for the
// next. How many rows wait in all is bounded by the consumer (see consumer.ts).

export interface GathererOptions {
  maxRows: number;
  lingerMs: number;
  /** The longest interval: the least time from one unit's start to the next's, unless the next holds maxRows rows (0: none). */
  maxIntervalMs?: number;
  /** The shortest interval the load lets it fall to (at most maxIntervalMs). */
  minIntervalMs?: number;
  /** The share of the time the recent units' loads may take: the interval is their load time ÷ this (0 < share ≤ 1; 0: always maxIntervalMs). */
  loadShare?: number;
  /** Rows a second at which the interval is maxIntervalMs whatever the load time; below it, at least maxIntervalMs × the recent rows a second ÷ this (0 or none: the load time alone). */
  fullRate?: number;
}

/** How much of the moving averages of the units' load times and rates the newest unit makes. */
const LOAD_TIME_WEIGHT = 0.3;

/**
 * The least time from one unit's start to the next's: the recent load time ÷ the share,
 * and at least the longest interval × the recent rows a second ÷ the full rate, between
 * the shortest and the longest interval (the longest when there is no share, or before
 * any unit has loaded).
 */
export function unitInterval(options: GathererOptions, loadMs: number | undefined, rowsPerSecond = 0): number {
  const longest = options.maxIntervalMs ?? 0;
  const share = options.loadShare ?? 0;
  if (share <= 0 || loadMs === undefined) return longest;
  const shortest = Math.min(options.minIntervalMs ?? 0, longest);
  const fullRate = options.fullRate ?? 0;
  const byRate = fullRate > 0 ? (longest * rowsPerSecond) / fullRate : 0;
  return Math.min(longest, Math.max(shortest, loadMs / share, byRate));
}

/** What a load unit reports for each chunk: loaded, or an error (not loaded, not to be committed). */
export type ChunkOutcome = 'loaded' | Error;

interface Waiting<T> {
  chunk: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class LoadGatherer<T extends { rows: number }> {
  private open: Waiting<T>[] = [];
  private openRows = 0;
  private timer: NodeJS.Timeout | undefined;
  private loading = false;
  /** When the last unit started loading (performance.now()). */
  private lastStart = Number.NEGATIVE_INFINITY;
  /** The consumer waits for a unit to load before it can hand over more: the interval does not hold the next one back. */
  private hurried = false;
  /** The moving average of the units' load times, ms (undefined before the first). */
  private loadMs: number | undefined;
  /** The moving average of the rows a second the units took (each unit's rows over the time since the unit before it started). */
  private rowsPerSecond = 0;

  constructor(
    private readonly options: GathererOptions,
    /** Loads one unit; returns each chunk's outcome, in the order given. */
    private readonly load: (chunks: T[]) => Promise<ChunkOutcome[]>,
  ) {}

  /**
   * Resolves once the unit holding `chunk` is loaded; rejects with the chunk's error
   * otherwise. The contributor may await it much later (the consumer awaits it behind
   * the commits of its partition's earlier chunks), so a rejection before then is
   * marked handled here: an unhandled rejection would end the process.
   */
  submit(chunk: T): Promise<void> {
    const outcome = new Promise<void>((resolve, reject) => {
      this.open.push({ chunk, resolve, reject });
      this.openRows += chunk.rows;
      if (this.loading) return; // loads as soon as the unit ahead of it is in
      if (this.openRows >= this.options.maxRows) this.close();
      else this.timer ??= setTimeout(() => this.close(), this.options.lingerMs);
    });
    outcome.catch(() => undefined);
    return outcome;
  }

  /** The least time from one unit's start to the next's now, ms. */
  intervalMs(): number {
    return unitInterval(this.options, this.loadMs, this.rowsPerSecond);
  }

  /**
   * The contributor can hand over nothing more until a unit loads (its window of
   * pending rows is full): the open unit goes as soon as nothing is loading, without
   * waiting for the interval; growing it further is not possible anyway.
   */
  hurry(): void {
    this.hurried = true;
    if (!this.loading) this.close();
  }

  private close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    if (this.loading || this.open.length === 0) return;
    const wait = this.lastStart + this.intervalMs() - performance.now();
    if (wait > 0 && this.openRows < this.options.maxRows && !this.hurried) {
      this.timer = setTimeout(() => this.close(), wait);
      return;
    }
    this.hurried = false;
    const now = performance.now();
    const since = now - this.lastStart;
    this.lastStart = now;
    let rows = this.open[0]!.chunk.rows;
    let count = 1;
    while (count < this.open.length && rows + this.open[count]!.chunk.rows <= this.options.maxRows) rows += this.open[count++]!.chunk.rows;
    // The first unit has no unit before it to time its rows from.
    if (Number.isFinite(since) && since > 0) {
      const rate = (rows * 1000) / since;
      this.rowsPerSecond += LOAD_TIME_WEIGHT * (rate - this.rowsPerSecond);
    }
    const unit = this.open.splice(0, count);
    this.openRows -= rows;
    this.loading = true;
    const started = this.lastStart;
    void this.load(unit.map((waiting) => waiting.chunk))
      .finally(() => {
        // Its load time, before its contributors learn the outcome.
        const ms = performance.now() - started;
        this.loadMs = this.loadMs === undefined ? ms : this.loadMs + LOAD_TIME_WEIGHT * (ms - this.loadMs);
      })
      .then(
        (outcomes) =>
          unit.forEach((waiting, index) => {
            const outcome = outcomes[index] ?? new Error('the load unit reported no outcome for a chunk');
            if (outcome === 'loaded') waiting.resolve();
            else waiting.reject(outcome);
          }),
        (error: unknown) => unit.forEach((waiting) => waiting.reject(error)),
      )
      .finally(() => {
        this.loading = false;
        this.close();
      });
  }
}
