// A Prometheus histogram read from a service's /metrics text, and its quantiles as
// Prometheus' histogram_quantile() computes them (linear within the bucket the rank
// falls in). The benchmark reads the services' own histograms with it: what a service
// measured for itself beside what the load generator saw, and its single figures.

/** A series without labels from /metrics text (a gauge, a counter, a histogram's `_sum` or `_count`): NaN when it is not there. */
export function metricValue(text: string, name: string): number {
  return Number(new RegExp(`^${name} (\\S+)`, 'm').exec(text)?.[1] ?? NaN);
}

/** Cumulative counts by upper bound (`+Inf` last), for the series whose labels include `labels`. */
export function histogramBuckets(text: string, name: string, labels: Record<string, string> = {}): [number, number][] {
  const counts = new Map<number, number>();
  const line = new RegExp(`^${name}_bucket\\{([^}]*)\\} (\\S+)`, 'gm');
  for (const match of text.matchAll(line)) {
    const pairs = Object.fromEntries([...match[1]!.matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((pair) => [pair[1]!, pair[2]!]));
    if (!Object.entries(labels).every(([label, value]) => pairs[label] === value)) continue;
    const le = pairs.le === '+Inf' ? Infinity : Number(pairs.le);
    counts.set(le, (counts.get(le) ?? 0) + Number(match[2]));
  }
  return [...counts].sort(([a], [b]) => a - b);
}

/** What was counted between two readings of the same histogram. */
export function bucketsSince(after: [number, number][], before: [number, number][]): [number, number][] {
  const earlier = new Map(before);
  return after.map(([le, count]) => [le, count - (earlier.get(le) ?? 0)]);
}

/**
 * The q-quantile (0 < q < 1) of cumulative buckets: NaN when nothing was counted; the
 * largest finite bound when the rank falls past it (as Prometheus does).
 */
export function histogramQuantile(buckets: [number, number][], q: number): number {
  const total = buckets.at(-1)?.[1] ?? 0;
  if (total <= 0) return NaN;
  const rank = q * total;
  let lower = 0;
  let below = 0;
  for (const [le, count] of buckets) {
    if (count >= rank) {
      if (le === Infinity) return lower;
      return count === below ? le : lower + ((le - lower) * (rank - below)) / (count - below);
    }
    lower = le;
    below = count;
  }
  return lower;
}
