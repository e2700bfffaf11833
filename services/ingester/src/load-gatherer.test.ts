// Pure gathering logic with a stand-in loader (no Kafka, Redis or ClickHouse): when a
// unit closes, and that each contributor learns its own outcome.
import { describe, expect, it } from 'vitest';
import { LoadGatherer, type PartOutcome } from './load-gatherer.js';

interface Part {
  name: string;
  rows: number;
}

function recordingLoader(outcome: (part: Part) => PartOutcome = () => 'loaded') {
  const units: string[][] = [];
  const load = async (parts: Part[]) => {
    units.push(parts.map((part) => part.name));
    await new Promise((resolve) => setTimeout(resolve, 5));
    return parts.map(outcome);
  };
  return { units, load };
}

describe('LoadGatherer', () => {
  it('loads the chunks that arrive together as one unit once every slot is waiting', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 10_000, slots: 3 }, loader.load);
    await Promise.all(['a', 'b', 'c'].map((name) => gatherer.submit({ name, rows: 10 })));
    expect(loader.units).toEqual([['a', 'b', 'c']]);
  });

  it('closes a unit at maxRows without waiting for the linger', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 100, lingerMs: 10_000, slots: 10 }, loader.load);
    await Promise.all([gatherer.submit({ name: 'a', rows: 60 }), gatherer.submit({ name: 'b', rows: 60 })]);
    expect(loader.units).toEqual([['a', 'b']]);
  });

  it('closes a unit after the linger when fewer chunks than slots arrive', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 20, slots: 6 }, loader.load);
    const started = performance.now();
    await Promise.all([gatherer.submit({ name: 'a', rows: 1 }), gatherer.submit({ name: 'b', rows: 1 })]);
    expect(loader.units).toEqual([['a', 'b']]);
    expect(performance.now() - started).toBeGreaterThanOrEqual(15);
  });

  it('counts the parts being loaded as taken slots, so a latecomer does not wait for the linger', async () => {
    const loader = recordingLoader();
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 10_000, slots: 2 }, loader.load);
    const first = gatherer.submit({ name: 'a', rows: 1 });
    const second = gatherer.submit({ name: 'b', rows: 1 });
    await Promise.all([first, second]);
    const third = gatherer.submit({ name: 'c', rows: 1 });
    const fourth = gatherer.submit({ name: 'd', rows: 1 });
    await Promise.all([third, fourth]);
    expect(loader.units).toEqual([
      ['a', 'b'],
      ['c', 'd'],
    ]);
  });

  it('gives each contributor its own outcome: one part abandoned does not fail the others', async () => {
    const loader = recordingLoader((part) => (part.name === 'b' ? new Error('partition lost') : 'loaded'));
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 10_000, slots: 3 }, loader.load);
    const results = await Promise.allSettled(['a', 'b', 'c'].map((name) => gatherer.submit({ name, rows: 1 })));
    expect(results.map((result) => result.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((results[1] as PromiseRejectedResult).reason.message).toBe('partition lost');
  });

  it('rejects every contributor when the loader itself fails', async () => {
    const gatherer = new LoadGatherer<Part>({ maxRows: 1000, lingerMs: 10_000, slots: 2 }, async () => {
      throw new Error('boom');
    });
    const results = await Promise.allSettled([gatherer.submit({ name: 'a', rows: 1 }), gatherer.submit({ name: 'b', rows: 1 })]);
    expect(results.every((result) => result.status === 'rejected')).toBe(true);
  });
});
