import { describe, expect, it } from 'vitest';
import { nextNarrowingRate } from './ladder.js';

describe('nextNarrowingRate', () => {
  it('halves the gap between the last step that passed and the lowest that failed, to 250 records/s', () => {
    expect(nextNarrowingRate(4000, 5000)).toBe(4500);
    expect(nextNarrowingRate(4000, 4500)).toBe(4250);
    expect(nextNarrowingRate(4500, 5000)).toBe(4750);
    expect(nextNarrowingRate(3000, 5000)).toBe(4000);
    expect(nextNarrowingRate(8000, 10000)).toBe(9000);
  });

  it('stops once no multiple of 250 lies strictly between the two', () => {
    expect(nextNarrowingRate(4000, 4250)).toBeUndefined();
    expect(nextNarrowingRate(4250, 4500)).toBeUndefined();
  });

  it('does not narrow below a first step that failed, nor with the two the wrong way round', () => {
    expect(nextNarrowingRate(0, 1000)).toBeUndefined();
    expect(nextNarrowingRate(5000, 4000)).toBeUndefined();
    expect(nextNarrowingRate(4000, 4000)).toBeUndefined();
  });
});
