// Ordered commits for a consumer that loads chunks of a partition out of its fetch loop
// (the ingester hands a chunk over and fetches on while it loads). Nothing here knows
// Kafka's client or what a load is: the consumer gives each chunk's load as a promise
// and how to commit an offset.
//
//   OrderedCommits  commits a chunk's offset once its load succeeded and every earlier
//                   chunk of its partition (in the same generation) did too. After a
//                   chunk that did not load, nothing later of that partition commits in
//                   that generation: the group starts the next generation from the last
//                   commit, so the chunk is fetched again. A generation is bumped at
//                   every rebalance; a chunk of an older generation is never committed.
//                   A chunk whose next chunk of the partition has loaded as well leaves
//                   its commit to that one (a commit covers every offset before it), so a
//                   load unit commits each partition once, not each of its chunks.
//   RowWindow       bounds the rows taken and not yet loaded, in count and in bytes
//                   (backpressure): a fetch waits for room, heartbeating, and gives up
//                   when its batch is gone.

export interface OrderedCommitsDeps {
  /** Commits `offset` (the next one to read) of the partition. */
  commit(topic: string, partition: number, offset: string): Promise<void>;
  /** A load that failed: its chunk and every later one of the partition stay uncommitted this generation. */
  onLoadFailed(error: unknown, where: ChunkPlace): void;
  /** A commit refused (the rows are in; a later commit covers the offsets). */
  onCommitFailed(error: unknown, where: ChunkPlace): void;
}

export interface ChunkPlace {
  topic: string;
  partition: number;
  /** First and last offsets of the chunk. */
  first: string;
  last: string;
}

/** A tracked chunk, linked to the next one of its partition and generation. */
interface Link {
  /** Its load succeeded. */
  loaded: boolean;
  next?: Link;
}

/** Resolves once the microtasks queued before it have run (those of a whole load unit's outcomes). */
const afterMicrotasks = () => new Promise<void>((resolve) => setImmediate(resolve));

export class OrderedCommits {
  /** Bumped at every rebalance (`nextGeneration`). */
  private current = 0;
  /**
   * Per generation and partition, the latest chunk tracked: its chain settles true once
   * every chunk so far is loaded and committed; its link is where the next chunk links to.
   */
  private readonly chains = new Map<string, { chain: Promise<boolean>; link: Link }>();
  /** Every chain link not settled yet (what a graceful stop waits for). */
  private readonly inFlight = new Set<Promise<boolean>>();

  constructor(private readonly deps: OrderedCommitsDeps) {}

  get generation(): number {
    return this.current;
  }

  nextGeneration(): void {
    this.current++;
  }

  /** Chunks whose load or commit has not settled yet. */
  get pending(): number {
    return this.inFlight.size;
  }

  /**
   * Commits the chunk at `where` (taken in `generation`) once `loaded` resolves, behind
   * every earlier chunk of its partition; `settled` runs when its load settles, either way.
   */
  track(where: ChunkPlace, generation: number, loaded: Promise<unknown>, settled: () => void = () => {}): void {
    const key = `${generation}:${where.topic}:${where.partition}`;
    const latest = this.chains.get(key);
    const previous = latest?.chain ?? Promise.resolve(true);
    const link: Link = { loaded: false };
    if (latest) latest.link.next = link;
    loaded.then(
      () => (link.loaded = true),
      () => undefined,
    );
    const chain = previous.then(async (committable) => {
      try {
        await loaded;
      } catch (error) {
        this.deps.onLoadFailed(error, where);
        return false;
      } finally {
        settled();
      }
      if (!committable || generation !== this.current) return false;
      // The chunks of one load unit learn their outcome together: once those outcomes
      // have run, a next chunk already loaded commits past this one's offsets (its link
      // follows this one at once), and this commit would only cost the broker a request.
      await afterMicrotasks();
      if (link.next?.loaded) return true;
      try {
        await this.deps.commit(where.topic, where.partition, (BigInt(where.last) + 1n).toString());
      } catch (error) {
        this.deps.onCommitFailed(error, where);
      }
      return true;
    });
    this.chains.set(key, { chain, link });
    this.inFlight.add(chain);
    // A chain that ended false stays: nothing later of its partition may commit in this
    // generation. One that ended true is forgotten once it is the latest.
    void chain.then(
      (committable) => {
        this.inFlight.delete(chain);
        if (committable && this.chains.get(key)?.chain === chain) this.chains.delete(key);
      },
      () => this.inFlight.delete(chain),
    );
  }

  /** Waits until every chunk tracked so far has settled, or `timeoutMs` passed. */
  async settle(timeoutMs: number): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.inFlight.size > 0 && Date.now() < deadline) {
      await Promise.race([Promise.allSettled([...this.inFlight]), new Promise((resolve) => setTimeout(resolve, 100))]);
    }
  }
}

/** A partition's next offset to read, as a commit carries it. */
export interface PartitionOffset {
  topic: string;
  partition: number;
  offset: string;
}

/**
 * A commit function that sends the commits asked for in one turn of the event loop as
 * one request, the highest offset of each partition: a load unit's partitions commit
 * together, and a commit costs the broker and the client about the same whether it
 * carries one partition or six (bench/analysis.md). Each caller's promise settles with
 * the request that carried its offset.
 */
export function coalescedCommits(send: (offsets: PartitionOffset[]) => Promise<void>): OrderedCommitsDeps['commit'] {
  let gathering: { offsets: Map<string, PartitionOffset>; sent: Promise<void> } | undefined;
  const gather = () => {
    const offsets = new Map<string, PartitionOffset>();
    const sent = new Promise<void>((resolve, reject) =>
      setImmediate(() => {
        gathering = undefined;
        send([...offsets.values()]).then(resolve, reject);
      }),
    );
    return { offsets, sent };
  };
  return (topic, partition, offset) => {
    const { offsets, sent } = (gathering ??= gather());
    const key = `${topic}:${partition}`;
    const known = offsets.get(key);
    if (!known || BigInt(offset) > BigInt(known.offset)) offsets.set(key, { topic, partition, offset });
    return sent;
  };
}

/** What a chunk holds: its records, and their bytes as fetched. */
export interface Span {
  rows: number;
  bytes: number;
}

/**
 * The records taken and not yet loaded, bounded in count and in bytes: records vary
 * from a few hundred bytes to a megabyte, so a bound in rows alone bounds nothing.
 */
export class RowWindow {
  private takenRows = 0;
  private takenBytes = 0;
  private waiters: (() => void)[] = [];

  constructor(
    private readonly maxRows: number,
    private readonly maxBytes = Infinity,
  ) {}

  /** Rows taken and not released yet. */
  get rows(): number {
    return this.takenRows;
  }

  /** Bytes of the rows taken and not released yet. */
  get bytes(): number {
    return this.takenBytes;
  }

  /**
   * Takes `span` once it fits (at once when nothing is taken: a chunk larger than the
   * window still goes, alone), heartbeating every second while it waits; false, taking
   * nothing, when `alive()` turned false meanwhile. Checked and taken in one step, so
   * two batches waiting together never both take the last room.
   */
  async take(span: Span, alive: () => boolean, heartbeat: () => Promise<void>): Promise<boolean> {
    while (!this.fits(span)) {
      if (!alive()) return false;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, 1000);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
      await heartbeat().catch(() => undefined);
    }
    if (!alive()) return false;
    this.takenRows += span.rows;
    this.takenBytes += span.bytes;
    return true;
  }

  /** Whether `span` more fits now (take would not wait). */
  fits(span: Span): boolean {
    if (this.takenRows === 0) return true;
    return this.takenRows + span.rows <= this.maxRows && this.takenBytes + span.bytes <= this.maxBytes;
  }

  release(span: Span): void {
    this.takenRows -= span.rows;
    this.takenBytes -= span.bytes;
    for (const wake of this.waiters.splice(0)) wake();
  }
}
