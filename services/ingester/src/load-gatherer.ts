// Gathers the partition chunks that kafkajs hands to eachBatch at about the same
// time into one load unit, so ClickHouse gets one large insert per table instead of
// one small insert per partition (ClickHouse 18.16 pays per insert: a new part per
// table and per materialized view, and the merges that follow). Each contributor
// waits for the unit it joined and learns its own outcome; nothing here touches
// Kafka, Redis or ClickHouse.
//
// A unit closes and loads when it holds `maxRows` rows, when every slot kafkajs runs
// at once is waiting in it or in a unit being loaded (nobody else can join), or
// `lingerMs` after its first chunk arrived, whichever comes first.
//
// Measured and left out: loading one unit while the next gathers (pipelining). On
// two cores shared with ClickHouse it gained nothing measurable and held two units
// in memory (BENCHMARKS.md).

export interface GathererOptions {
  maxRows: number;
  lingerMs: number;
  /** Partition batches kafkajs processes at once (partitionsConsumedConcurrently). */
  slots: number;
}

/** What a load unit reports for each part: loaded, or an error (not loaded, not to be committed). */
export type PartOutcome = 'loaded' | Error;

interface Waiting<T> {
  part: T;
  resolve: () => void;
  reject: (error: unknown) => void;
}

export class LoadGatherer<T extends { rows: number }> {
  private open: Waiting<T>[] = [];
  private openRows = 0;
  private timer: NodeJS.Timeout | undefined;
  private loadingParts = 0;

  constructor(
    private readonly options: GathererOptions,
    /** Loads one unit; returns each part's outcome, in the order given. */
    private readonly load: (parts: T[]) => Promise<PartOutcome[]>,
  ) {}

  /** Resolves once the unit holding `part` is loaded; rejects with the part's error otherwise. */
  submit(part: T): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      this.open.push({ part, resolve, reject });
      this.openRows += part.rows;
      if (this.openRows >= this.options.maxRows || this.open.length + this.loadingParts >= this.options.slots) this.close();
      else this.timer ??= setTimeout(() => this.close(), this.options.lingerMs);
    });
  }

  private close(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const unit = this.open;
    if (unit.length === 0) return;
    this.open = [];
    this.openRows = 0;
    this.loadingParts += unit.length;
    void this.load(unit.map((waiting) => waiting.part))
      .then(
        (outcomes) =>
          unit.forEach((waiting, index) => {
            const outcome = outcomes[index] ?? new Error('the load unit reported no outcome for a part');
            if (outcome === 'loaded') waiting.resolve();
            else waiting.reject(outcome);
          }),
        (error: unknown) => unit.forEach((waiting) => waiting.reject(error)),
      )
      .finally(() => {
        this.loadingParts -= unit.length;
      });
  }
}
