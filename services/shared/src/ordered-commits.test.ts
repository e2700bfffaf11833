// Ordered commits and the row window (ordered-commits.ts), with loads as promises the
// test settles by hand: commits follow the loads in order per partition, nothing
// commits behind a failed load or across a rebalance, and the window holds a fetch
// until rows are released.
import { describe, expect, it } from 'vitest';
import { OrderedCommits, RowWindow, coalescedCommits, type ChunkPlace, type PartitionOffset } from './ordered-commits.js';

function deferred() {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((yes, no) => {
    resolve = yes;
    reject = no;
  });
  promise.catch(() => undefined);
  return { promise, resolve, reject };
}

function commits() {
  const committed: string[] = [];
  const failed: string[] = [];
  const ordered = new OrderedCommits({
    commit: async (topic, partition, offset) => void committed.push(`${topic}/${partition}@${offset}`),
    onLoadFailed: (error, where) => void failed.push(`${where.partition}:${where.first}-${where.last} ${(error as Error).message}`),
    onCommitFailed: () => undefined,
  });
  return { ordered, committed, failed };
}

const place = (partition: number, first: number, last: number): ChunkPlace => ({
  topic: 't',
  partition,
  first: String(first),
  last: String(last),
});
// A turn of the event loop, then the check phase after it: a chain's commit waits for a
// setImmediate queued as its load resolves, so it has run by then, whichever of the timer
// and that setImmediate the loop reaches first (a timer alone is flaky on a busy machine).
const flush = () => new Promise((resolve) => setTimeout(() => setImmediate(resolve), 0));

describe('OrderedCommits', () => {
  it("commits a partition's chunks in order, whatever order their loads finish in", async () => {
    const { ordered, committed } = commits();
    const first = deferred();
    const second = deferred();
    const other = deferred();
    const settled: string[] = [];
    ordered.track(place(0, 0, 9), 0, first.promise, () => settled.push('first'));
    ordered.track(place(0, 10, 19), 0, second.promise, () => settled.push('second'));
    ordered.track(place(1, 0, 4), 0, other.promise);
    second.resolve();
    other.resolve();
    await flush();
    // The second chunk is loaded but waits behind the first; the other partition goes on.
    expect(committed).toEqual(['t/1@5']);
    expect(ordered.pending).toBe(2);
    first.resolve();
    await ordered.settle(1000);
    // The first leaves its commit to the second, loaded already: one commit covers both.
    expect(committed).toEqual(['t/1@5', 't/0@20']);
    expect(settled.sort()).toEqual(['first', 'second']);
    expect(ordered.pending).toBe(0);
  });

  it('commits each chunk whose next one has not loaded yet', async () => {
    const { ordered, committed } = commits();
    const first = deferred();
    const second = deferred();
    ordered.track(place(0, 0, 9), 0, first.promise);
    ordered.track(place(0, 10, 19), 0, second.promise);
    first.resolve();
    await flush();
    expect(committed).toEqual(['t/0@10']);
    second.resolve();
    await ordered.settle(1000);
    expect(committed).toEqual(['t/0@10', 't/0@20']);
  });

  it("commits a partition once for the chunks of one load unit, at the last one's offset", async () => {
    const { ordered, committed } = commits();
    const unit = Array.from({ length: 4 }, () => deferred());
    unit.forEach((load, index) => ordered.track(place(0, index * 10, index * 10 + 9), 0, load.promise));
    ordered.track(place(1, 0, 4), 0, unit[0]!.promise);
    // The unit's outcomes, in the order the gatherer gives them.
    unit.forEach((load) => load.resolve());
    await ordered.settle(1000);
    expect(committed.sort()).toEqual(['t/0@40', 't/1@5']);
  });

  it('a chunk loaded after one that did not commits nothing, even when it loaded with it', async () => {
    const { ordered, committed } = commits();
    const first = deferred();
    const second = deferred();
    ordered.track(place(0, 0, 9), 0, first.promise);
    ordered.track(place(0, 10, 19), 0, second.promise);
    second.resolve();
    first.reject(new Error('ClickHouse gone'));
    await ordered.settle(1000);
    expect(committed).toEqual([]);
  });

  it('commits nothing of a partition behind a chunk that did not load, in that generation', async () => {
    const { ordered, committed, failed } = commits();
    const broken = deferred();
    const after = deferred();
    ordered.track(place(0, 0, 9), 0, broken.promise);
    ordered.track(place(0, 10, 19), 0, after.promise);
    broken.reject(new Error('ClickHouse gone'));
    after.resolve();
    await ordered.settle(1000);
    expect(committed).toEqual([]);
    expect(failed).toEqual(['0:0-9 ClickHouse gone']);
    // A later chunk of the same generation still does not commit; after a rebalance the partition starts afresh.
    ordered.track(place(0, 20, 29), 0, Promise.resolve());
    await ordered.settle(1000);
    expect(committed).toEqual([]);
    ordered.nextGeneration();
    ordered.track(place(0, 0, 9), ordered.generation, Promise.resolve());
    await ordered.settle(1000);
    expect(committed).toEqual(['t/0@10']);
  });

  it('never commits a chunk taken before the latest rebalance', async () => {
    const { ordered, committed } = commits();
    const load = deferred();
    ordered.track(place(0, 0, 9), ordered.generation, load.promise);
    ordered.nextGeneration();
    load.resolve();
    await ordered.settle(1000);
    expect(committed).toEqual([]);
  });
});

describe('coalescedCommits', () => {
  it('sends the commits of one turn as one request, the highest offset of each partition', async () => {
    const sent: PartitionOffset[][] = [];
    const commit = coalescedCommits(async (offsets) => void sent.push(offsets));
    await Promise.all([commit('t', 0, '10'), commit('t', 1, '5'), commit('t', 0, '20'), commit('t', 0, '15')]);
    expect(sent).toEqual([
      [
        { topic: 't', partition: 0, offset: '20' },
        { topic: 't', partition: 1, offset: '5' },
      ],
    ]);
    await commit('t', 1, '7');
    expect(sent).toHaveLength(2);
    expect(sent[1]).toEqual([{ topic: 't', partition: 1, offset: '7' }]);
  });

  it("settles every caller of a request with that request's outcome", async () => {
    let calls = 0;
    const commit = coalescedCommits(async () => {
      if (++calls === 1) throw new Error('not the coordinator');
    });
    const first = commit('t', 0, '10');
    const second = commit('t', 1, '3');
    await expect(first).rejects.toThrow('not the coordinator');
    await expect(second).rejects.toThrow('not the coordinator');
    await expect(commit('t', 0, '10')).resolves.toBeUndefined();
  });
});

describe('RowWindow', () => {
  const alive = () => true;
  const heartbeat = async () => undefined;

  it('holds a fetch until rows are released; a chunk larger than the window goes alone', async () => {
    const window = new RowWindow(100);
    expect(await window.take({ rows: 150, bytes: 0 }, alive, heartbeat)).toBe(true);
    let roomed = false;
    const waiting = window.take({ rows: 10, bytes: 0 }, alive, heartbeat).then((ok) => (roomed = ok));
    await flush();
    expect(roomed).toBe(false);
    window.release({ rows: 150, bytes: 0 });
    await waiting;
    expect(roomed).toBe(true);
    expect(window.rows).toBe(10);
  });

  it('holds a fetch while the bytes taken would pass their bound, with rows to spare', async () => {
    const window = new RowWindow(1_000, 1_000_000);
    await window.take({ rows: 3, bytes: 700_000 }, alive, heartbeat);
    expect(window.fits({ rows: 1, bytes: 300_000 })).toBe(true);
    expect(window.fits({ rows: 1, bytes: 300_001 })).toBe(false);
    let roomed = false;
    const waiting = window.take({ rows: 2, bytes: 600_000 }, alive, heartbeat).then((ok) => (roomed = ok));
    await flush();
    expect(roomed).toBe(false);
    window.release({ rows: 1, bytes: 200_000 });
    await flush();
    expect(roomed).toBe(false);
    window.release({ rows: 2, bytes: 500_000 });
    await waiting;
    expect(roomed).toBe(true);
    expect([window.rows, window.bytes]).toEqual([2, 600_000]);
    window.release({ rows: 2, bytes: 600_000 });
    // Nothing taken: a chunk past the bound goes, alone.
    expect(window.fits({ rows: 1, bytes: 5_000_000 })).toBe(true);
  });

  it('two fetches waiting together for the last room: one takes it, the other waits on', async () => {
    const window = new RowWindow(10, 1_000);
    await window.take({ rows: 1, bytes: 500 }, alive, heartbeat);
    await window.take({ rows: 1, bytes: 400 }, alive, heartbeat);
    const taken: string[] = [];
    const first = window.take({ rows: 1, bytes: 400 }, alive, heartbeat).then(() => taken.push('first'));
    const second = window.take({ rows: 1, bytes: 400 }, alive, heartbeat).then(() => taken.push('second'));
    await flush();
    expect(taken).toEqual([]);
    // Room for one of them (400 + 400 taken), not for both.
    window.release({ rows: 1, bytes: 500 });
    await first;
    await flush();
    expect(taken).toEqual(['first']);
    expect(window.bytes).toBe(800);
    window.release({ rows: 1, bytes: 400 });
    await second;
    expect(taken).toEqual(['first', 'second']);
  });

  it('gives up when the batch is no longer alive', async () => {
    const window = new RowWindow(10);
    await window.take({ rows: 10, bytes: 0 }, alive, heartbeat);
    let stillAlive = true;
    const waiting = window.take(
      { rows: 5, bytes: 0 },
      () => stillAlive,
      async () => undefined,
    );
    stillAlive = false;
    window.release({ rows: 0, bytes: 0 });
    expect(await waiting).toBe(false);
    expect(window.rows).toBe(10);
  });
});
