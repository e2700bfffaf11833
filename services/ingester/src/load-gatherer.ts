// Gathers the partition chunks that kafkajs hands to eachBatch into load units, and
// loads one unit at a time while the next one gathers.
//
// - One unit, one insert per table: ClickHouse 18.16 pays per insert (a new part per
//   table and per materialized view), so a unit takes the chunks of every partition
//   that arrive together instead of one small insert per partition.
// - Pipelined: a chunk's submit() resolves as soon as its unit starts loading, so
//   kafkajs fetches and the ingester decodes the next chunks while ClickHouse works
//   on this unit. The unit commits its own offsets once loaded (see consumer.ts).
// - Bounded: while a unit loads, the next one only gathers; submit() does not
//   resolve until that unit starts, so at most two units are in memory.
//
// A unit starts when it holds `maxRows` rows, when every slot kafkajs runs at once
// is waiting in it (nobody else can join), or `lingerMs` after its first chunk,
// whichever comes first, and never before the previous unit is done.

export interface GathererOptions {
  maxRows: number;
  lingerMs: number;
  /** Partition batches kafkajs processes at once (partitionsConsumedConcurrently). */
  slots: number;
}

export class LoadGatherer<T extends { rows: number }> {
  private open: { part: T; accepted: () => void }[] = [];
  private openRows = 0;
  private lingerDone = false;
  private timer: NodeJS.Timeout | undefined;
  private loading: Promise<void> | undefined;
  private readonly idle = new Set<() => void>();

  constructor(
    private readonly options: GathererOptions,
    /** Loads one unit. Must not throw: a unit reports its own failures. */
    private readonly load: (parts: T[]) => Promise<void>,
  ) {}

  /** Resolves once the unit holding `part` has started loading. */
  submit(part: T): Promise<void> {
    return new Promise<void>((accepted) => {
      this.open.push({ part, accepted });
      this.openRows += part.rows;
      this.timer ??= setTimeout(() => {
        this.lingerDone = true;
        this.maybeStart();
      }, this.options.lingerMs);
      this.maybeStart();
    });
  }

  /** Resolves when nothing is gathering or loading. */
  whenIdle(): Promise<void> {
    if (this.open.length === 0 && !this.loading) return Promise.resolve();
    return new Promise((resolve) => this.idle.add(resolve));
  }

  private maybeStart(): void {
    if (this.loading || this.open.length === 0) return;
    const full = this.openRows >= this.options.maxRows || this.open.length >= this.options.slots;
    if (!full && !this.lingerDone) return;
    clearTimeout(this.timer);
    this.timer = undefined;
    this.lingerDone = false;
    const unit = this.open;
    this.open = [];
    this.openRows = 0;
    for (const waiting of unit) waiting.accepted();
    this.loading = this.load(unit.map((waiting) => waiting.part)).finally(() => {
      this.loading = undefined;
      // Chunks that gathered meanwhile have waited long enough.
      if (this.open.length > 0) this.lingerDone = true;
      this.maybeStart();
      if (this.open.length === 0 && !this.loading) {
        for (const resolve of this.idle) resolve();
        this.idle.clear();
      }
    });
  }
}
