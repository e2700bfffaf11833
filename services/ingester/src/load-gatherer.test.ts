// Pure gathering logic with a stand-in loader (no Kafka, Redis or ClickHouse): when a
// unit closes, that one unit loads at a time while the next gathers, and that each
// contributor learns its own outcome.
import { describe, expect, it } from 'vitest';
import { LoadGatherer, unitInterval, type ChunkOutcome } from './load-gatherer.js';

interface Part {
  name: string;
  rows: number;
}

function recordingLoader(outcome: (part: Part) => ChunkOutcome = () => 'loaded', ms = 5) {
  const units: string[][] = [];
  let loading = 0;
  let mostAtOnce = 0;
  const load = async (parts: Part[]) => {
    units.push(parts.map((part) => part.name));
    mostAtOnce = Math.max(mostAtOnce, ++loading);
    await new Promise((resolve) => setTimeout(resolve, ms));
    loading--;
    return parts.map(outcome);
  };
  return { units, load, mostAtOnce: () => mostAtOnce };
}

describe('LoadGatherer', () => {
  it('loads the chunks that arrive within the linger as one unit', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 20 }, loader.load);
    const started = performance.now();
    await Promise.all(['a', 'b', 'c'].map((name) => gatherer.submit({ name, rows: 10 })));
    expect(loader.units).toEqual([['a', 'b', 'c']]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(15);
  });

  it('closes a unit at maxRows without waiting for the linger', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 100, lingerMs: 10_000 }, loader.load);
    await Promise.all([gatherer.submit({ name: 'a', rows: 60 }), gatherer.submit({ name: 'b', rows: 60 })]);
    // a alone is under maxRows; a+b is over: the unit closes, taking what fits (a), and b follows at once.
    expect(loader.units).toEqual([['a'], ['b']]);
  });

  it('gathers the next unit while one loads, and loads it as soon as the first is in', async () => {
    const loader = recordingLoader(() => 'loaded', 30);
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 1 }, loader.load);
    const first = gatherer.submit({ name: 'a', rows: 1 });
    await new Promise((resolve) => setTimeout(resolve, 10)); // a is loading now
    const later = ['b', 'c', 'd'].map((name) => gatherer.submit({ name, rows: 1 }));
    await Promise.all([first, ...later]);
    expect(loader.units).toEqual([['a'], ['b', 'c', 'd']]);
    expect(loader.mostAtOnce()).toBe(1);
  });

  it('never puts more than maxRows in one unit; the rest loads next', async () => {
    const loader = recordingLoader(() => 'loaded', 20);
    const gatherer = new LoadGatherer<Part>({ maxRows: 10, lingerMs: 1 }, loader.load);
    const first = gatherer.submit({ name: 'a', rows: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const later = ['b', 'c', 'd'].map((name) => gatherer.submit({ name, rows: 4 }));
    await Promise.all([first, ...later]);
    expect(loader.units).toEqual([['a'], ['b', 'c'], ['d']]);
  });

  it('gives each contributor its own outcome: one part abandoned does not fail the others', async () => {
    const loader = recordingLoader((part) => (part.name === 'b' ? new Error('partition lost') : 'loaded'));
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 5 }, loader.load);
    const results = await Promise.allSettled(['a', 'b', 'c'].map((name) => gatherer.submit({ name, rows: 1 })));
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.message).toBe('partition lost');
  });

  it('rejects every contributor when the loader itself fails, and goes on loading later units', async () => {
    let calls = 0;
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 5 }, async (parts) => {
      if (calls++ === 0) throw new Error('boom');
      return parts.map(() => 'loaded' as const);
    });
    const results = await Promise.allSettled([gatherer.submit({ name: 'a', rows: 1 }), gatherer.submit({ name: 'b', rows: 1 })]);
    expect(results.every((result) => result.status === 'rejected')).toBe(true);
    await expect(gatherer.submit({ name: 'c', rows: 1 })).resolves.toBeUndefined();
  });
});

describe('LoadGatherer with a least interval between units', () => {
  it('starts the next unit no sooner than the interval after the one ahead, gathering what arrives meanwhile', async () => {
    const starts: number[] = [];
    const units: string[][] = [];
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 1, maxIntervalMs: 150 }, async (parts) => {
      starts.push(performance.now());
      units.push(parts.map((part) => part.name));
      await new Promise((resolve) => setTimeout(resolve, 10));
      return parts.map(() => 'loaded' as const);
    });
    const first = gatherer.submit({ name: 'a', rows: 1 });
    await new Promise((resolve) => setTimeout(resolve, 30)); // a is loaded by now
    const later: Promise<void>[] = [];
    for (const name of ['b', 'c', 'd']) {
      later.push(gatherer.submit({ name, rows: 1 }));
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    await Promise.all([first, ...later]);
    // Without the interval b would have loaded alone as soon as it came, c and d after it.
    expect(units).toEqual([['a'], ['b', 'c', 'd']]);
    expect(starts[1]! - starts[0]!).toBeGreaterThanOrEqual(145);
  });

  it('lets the next unit go at once when the contributor can hand over nothing more (hurry)', async () => {
    const units: string[][] = [];
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 1, maxIntervalMs: 10_000 }, async (parts) => {
      units.push(parts.map((part) => part.name));
      await new Promise((resolve) => setTimeout(resolve, 20));
      return parts.map(() => 'loaded' as const);
    });
    const started = performance.now();
    const first = gatherer.submit({ name: 'a', rows: 1 });
    await new Promise((resolve) => setTimeout(resolve, 5)); // a is loading
    const second = gatherer.submit({ name: 'b', rows: 1 });
    gatherer.hurry(); // while a loads: b goes as soon as a is in
    await Promise.all([first, second]);
    const third = gatherer.submit({ name: 'c', rows: 1 });
    gatherer.hurry(); // nothing loading: c goes now
    await third;
    expect(units).toEqual([['a'], ['b'], ['c']]);
    expect(performance.now() - started).toBeLessThan(5_000);
  });

  it('does not hold back a unit that is full', async () => {
    const units: string[][] = [];
    const gatherer = new LoadGatherer<Part>({ maxRows: 10, lingerMs: 1, maxIntervalMs: 10_000 }, async (parts) => {
      units.push(parts.map((part) => part.name));
      return parts.map(() => 'loaded' as const);
    });
    const started = performance.now();
    await gatherer.submit({ name: 'a', rows: 10 });
    await gatherer.submit({ name: 'b', rows: 10 });
    expect(units).toEqual([['a'], ['b']]);
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe('the interval between units, from the load time', () => {
  const options = { maxRows: 1000, lingerMs: 1, maxIntervalMs: 1000, minIntervalMs: 500, loadShare: 0.35 };

  it('is the load time divided by the share, between the shortest and the longest', () => {
    expect(unitInterval(options, 210)).toBeCloseTo(600);
    expect(unitInterval(options, 100)).toBe(500);
    expect(unitInterval(options, 400)).toBe(1000);
  });

  it('is the longest without a share, and before any unit has loaded', () => {
    expect(unitInterval({ ...options, loadShare: 0 }, 100)).toBe(1000);
    expect(unitInterval(options, undefined)).toBe(1000);
  });

  it('never falls below the longest when the shortest is set above it', () => {
    expect(unitInterval({ ...options, maxIntervalMs: 400 }, 10)).toBe(400);
  });

  it('with a full rate, is at least the longest × the rows a second ÷ the full rate, whatever the load time', () => {
    const withRate = { ...options, loadShare: 0.7, minIntervalMs: 250, fullRate: 6000 };
    // A quick load (210 ms ÷ 0.7 = 300 ms) at 3,000 rows a second: 1,000 × 3,000 ÷ 6,000.
    expect(unitInterval(withRate, 210, 3000)).toBeCloseTo(500);
    // At a low rate the load time decides, and the shortest under it.
    expect(unitInterval(withRate, 210, 600)).toBeCloseTo(300);
    expect(unitInterval(withRate, 70, 600)).toBe(250);
    // At the full rate and past it: the longest, however quick the load.
    expect(unitInterval(withRate, 70, 6000)).toBe(1000);
    expect(unitInterval(withRate, 70, 9000)).toBe(1000);
    // Without a full rate, the rate plays no part.
    expect(unitInterval({ ...withRate, fullRate: 0 }, 210, 9000)).toBeCloseTo(300);
  });
});

describe('LoadGatherer with an interval that follows the load', () => {
  async function startsWith(loadMs: number): Promise<number[]> {
    const starts: number[] = [];
    const gatherer = new LoadGatherer<Part>(
      { maxRows: 1000, lingerMs: 1, maxIntervalMs: 300, minIntervalMs: 60, loadShare: 0.5 },
      async (parts) => {
        starts.push(performance.now());
        await new Promise((resolve) => setTimeout(resolve, loadMs));
        return parts.map(() => 'loaded' as const);
      },
    );
    // A steady trickle: a chunk every 10 ms for 1.2 s.
    const outcomes: Promise<void>[] = [];
    for (let index = 0; index < 120; index++) {
      outcomes.push(gatherer.submit({ name: String(index), rows: 1 }));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await Promise.all(outcomes);
    return starts.slice(1).map((start, index) => start - starts[index]!);
  }

  it('reports the interval it keeps now: the longest before any unit has loaded, then from the load time', async () => {
    const gatherer = new LoadGatherer<Part>(
      { maxRows: 1000, lingerMs: 1, maxIntervalMs: 300, minIntervalMs: 60, loadShare: 0.5 },
      async (parts) => {
        await new Promise((resolve) => setTimeout(resolve, 50));
        return parts.map(() => 'loaded' as const);
      },
    );
    expect(gatherer.intervalMs()).toBe(300);
    await gatherer.submit({ name: 'a', rows: 1 });
    // One load of about 50 ms: 50 ÷ 0.5, about 100 ms.
    expect(gatherer.intervalMs()).toBeGreaterThanOrEqual(95);
    expect(gatherer.intervalMs()).toBeLessThan(200);
  });

  it('with a full rate, keeps units further apart as the rows a second grow, though the loads stay quick', async () => {
    // Quick loads (5 ms ÷ 0.5 = 10 ms) as above, with a full rate of 200 rows a second:
    // at a row every 10 ms (100 a second) the interval settles near 300 × 100 ÷ 200 =
    // 150 ms, where the load time alone kept it at the shortest, 60 ms.
    const starts: number[] = [];
    const gatherer = new LoadGatherer<Part>(
      { maxRows: 1000, lingerMs: 1, maxIntervalMs: 300, minIntervalMs: 60, loadShare: 0.5, fullRate: 200 },
      async (parts) => {
        starts.push(performance.now());
        await new Promise((resolve) => setTimeout(resolve, 5));
        return parts.map(() => 'loaded' as const);
      },
    );
    const outcomes: Promise<void>[] = [];
    const began = performance.now();
    for (let index = 0; index < 150; index++) {
      outcomes.push(gatherer.submit({ name: String(index), rows: 1 }));
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // A busy machine's timers run late: what the rule should give at the rate achieved.
    const rate = (150 * 1000) / (performance.now() - began);
    const expected = (300 * rate) / 200;
    await Promise.all(outcomes);
    expect(expected).toBeGreaterThan(100);
    const gaps = starts.slice(1).map((start, index) => start - starts[index]!);
    // The rate's moving average takes a few units to settle: the last gaps tell.
    const settled = gaps.slice(-4);
    expect(Math.min(...settled)).toBeGreaterThanOrEqual(0.75 * expected);
    expect(Math.max(...settled)).toBeLessThan(290);
    expect(gatherer.intervalMs()).toBeGreaterThanOrEqual(0.75 * expected);
  });

  it('lets units follow at the shortest interval while loads are quick, and at the longest while they are slow', async () => {
    const [quick, slow] = await Promise.all([startsWith(5), startsWith(200)]);
    // Quick loads (5 ms ÷ 0.5 = 10 ms): after the first unit, every 60 ms or so; the
    // fixed interval would have kept them 300 ms apart.
    expect(Math.max(...quick.slice(1))).toBeLessThan(200);
    expect(Math.min(...quick)).toBeGreaterThanOrEqual(55);
    // Slow loads (200 ms ÷ 0.5 = 400 ms): the longest, 300 ms.
    expect(Math.min(...slow)).toBeGreaterThanOrEqual(295);
  });
});

describe('LoadGatherer outcomes nobody awaits yet', () => {
  it('a part that fails before its contributor awaits it is not an unhandled rejection (it used to end the ingester)', async () => {
    // The consumer awaits a part's outcome only after the chunks ahead of it in the
    // same partition are committed; a commit stuck on a dead broker let a failed
    // unit's rejection go unhandled, and Node ended the process.
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const gatherer = new LoadGatherer<Part>({ maxRows: 10, lingerMs: 1 }, async (parts) => parts.map(() => new Error('abandoned')));
      const outcome = gatherer.submit({ name: 'a', rows: 1 });
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(unhandled).toEqual([]);
      await expect(outcome).rejects.toThrow('abandoned');
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});
