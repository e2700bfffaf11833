// Which records of a load unit go to ClickHouse, once Redis has said which event keys it
// has not seen.

/**
 * The items a load unit inserts: one per event key that Redis has not seen, taken
 * from a decodedChunk still being loaded. A unit can hold the same records twice (a chunk
 * fetched before a rebalance, now given up, beside the same offsets fetched again
 * after it), and Redis's answer names the first occurrence: the one kept here is the
 * first occurrence among the live decodedChunks, so a given-up copy never stands in for the
 * copy that commits.
 */
export function loadableItems<T>(items: readonly T[], fresh: readonly T[], live: (item: T) => boolean, keyOf: (item: T) => string): T[] {
  const freshKeys = new Set(fresh.map(keyOf));
  const taken = new Set<string>();
  const loadable: T[] = [];
  for (const item of items) {
    const key = keyOf(item);
    if (!live(item) || !freshKeys.has(key) || taken.has(key)) continue;
    taken.add(key);
    loadable.push(item);
  }
  return loadable;
}
