// Which items a load unit inserts when the same records are in it twice: the copy of
// a part given up in a rebalance must never stand in for the live copy (found by the
// scale-out benchmark: a unit held a given-up chunk and the same offsets fetched
// again; Redis named the given-up copy as the first occurrence, the live copy was
// dropped as its duplicate and its offsets committed, and 344 records were lost).
import { describe, expect, it } from 'vitest';
import { loadableItems } from './loadable-items.js';

interface Item {
  key: string;
  part: 'old' | 'new';
}

const keyOf = (item: Item) => item.key;
const isLive = (item: Item) => item.part === 'new';

describe('loadableItems', () => {
  it('takes the live copy of a record whose first copy belongs to a given-up part', () => {
    const items: Item[] = [
      { key: 'a', part: 'old' },
      { key: 'b', part: 'old' },
      { key: 'a', part: 'new' },
      { key: 'b', part: 'new' },
    ];
    // What Redis's filter answers: the first occurrence of each unseen key.
    const fresh = [items[0]!, items[1]!];
    expect(loadableItems(items, fresh, isLive, keyOf)).toEqual([items[2], items[3]]);
  });

  it('keeps one item per key among live parts, and none Redis has seen', () => {
    const items: Item[] = [
      { key: 'a', part: 'new' },
      { key: 'a', part: 'new' },
      { key: 'seen', part: 'new' },
      { key: 'c', part: 'old' },
    ];
    const fresh = [items[0]!, items[3]!];
    expect(loadableItems(items, fresh, isLive, keyOf)).toEqual([items[0]]);
  });
});
