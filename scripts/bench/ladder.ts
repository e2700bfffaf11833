// The end-to-end ladder's narrowing (sections/end-to-end.ts): after the first step that
// fails, steps halve the gap between it and the last that passed.

/** The narrowing's resolution: its steps are multiples of this. */
export const NARROW_TO_PER_S = 250;

/**
 * The next rate to try between `passed` (the highest rate that passed, above 0) and
 * `failed` (the lowest that failed): their middle, rounded to NARROW_TO_PER_S; undefined
 * when no such rate lies strictly between them (the gap is narrowed enough).
 */
export function nextNarrowingRate(passed: number, failed: number): number | undefined {
  if (!(passed > 0) || !(failed > passed)) return undefined;
  const rate = Math.round((passed + failed) / 2 / NARROW_TO_PER_S) * NARROW_TO_PER_S;
  return rate > passed && rate < failed ? rate : undefined;
}
