// The latency histograms of migration 0010 (docs/analytics-api.md, "Percentiles"): a
// value is counted in a fixed bucket, 25 per factor e, so a rollup's rows stop growing
// once its buckets are filled and rows merge by addition. Bucket 0 holds the records
// without a value, bucket 1 the zeros, bucket b >= 2 the values v with
// floor(ln(v) * 25) = b - 2, i.e. [e^((b-2)/25), e^((b-1)/25)).

/** Buckets per factor e: each bucket is e^(1/25), about 4.08 %, wide. */
export const BUCKETS_PER_E = 25;

/** The bucket of a value, as the migration's views compute it (`column`: a Nullable(UInt64) of milliseconds). */
export function bucketSql(column: string): string {
  return (
    `multiIf(isNull(${column}), toUInt16(0), assumeNotNull(${column}) = 0, toUInt16(1), ` +
    `toUInt16(2 + floor(log(toFloat64(greatest(assumeNotNull(${column}), 1))) * ${BUCKETS_PER_E})))`
  );
}

/**
 * The value a bucket stands for: 0 for the zeros; otherwise the harmonic middle of its
 * bounds, 2·lo·hi / (lo + hi), whose relative error to any value of the bucket is at most
 * (hi - lo) / (hi + lo) = tanh(1 / 50), just under 2 %. Null for bucket 0 (no value).
 */
export function bucketValue(bucket: number): number | null {
  if (!Number.isInteger(bucket) || bucket < 1) return null;
  if (bucket === 1) return 0;
  const lo = Math.exp((bucket - 2) / BUCKETS_PER_E);
  const hi = Math.exp((bucket - 1) / BUCKETS_PER_E);
  return (2 * lo * hi) / (lo + hi);
}

/** The largest relative error of bucketValue against a value of its bucket. */
export const BUCKET_RELATIVE_ERROR = Math.tanh(1 / (2 * BUCKETS_PER_E));
