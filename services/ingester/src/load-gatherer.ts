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
// sooner than `minIntervalMs` after the unit ahead of it started: under live traffic
// units then follow at most that often and grow with the rate, instead of following
// back to back as small as one insert's time lets them be (each insert costs
// ClickHouse a fixed part per table, see above).
// A unit takes at most `maxRows` rows (and at least one chunk); the rest wait for the
// next. How many rows wait in all is bounded by the consumer (see consumer.ts).

export interface GathererOptions {
  maxRows: number;
  lingerMs: number;
  /** The least time from one unit's start to the next's, unless the next holds maxRows rows (0: none). */
  minIntervalMs?: number;
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
    const wait = this.lastStart + (this.options.minIntervalMs ?? 0) - performance.now();
    if (wait > 0 && this.openRows < this.options.maxRows && !this.hurried) {
      this.timer = setTimeout(() => this.close(), wait);
      return;
    }
    this.hurried = false;
    this.lastStart = performance.now();
    let rows = this.open[0]!.chunk.rows;
    let count = 1;
    while (count < this.open.length && rows + this.open[count]!.chunk.rows <= this.options.maxRows) rows += this.open[count++]!.chunk.rows;
    const unit = this.open.splice(0, count);
    this.openRows -= rows;
    this.loading = true;
    void this.load(unit.map((waiting) => waiting.chunk))
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
