// The histograms' buckets: the SQL the migration's views compute them with, and the value each stands for.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { migrationsDir } from '../migrate.js';
import { BUCKETS_PER_E, BUCKET_RELATIVE_ERROR, bucketSql, bucketValue } from './histogram.js';

/** The bucket of a value as the SQL computes it, in floating point as ClickHouse does. */
const bucketOf = (value: number) => (value === 0 ? 1 : 2 + Math.floor(Math.log(Math.max(value, 1)) * BUCKETS_PER_E));

describe('latency histograms', () => {
  it('are computed by every view of migration 0010 with bucketSql', () => {
    const text = fs.readFileSync(path.join(migrationsDir, '0010_latency_histograms.sql'), 'utf8');
    const views = text.split('CREATE MATERIALIZED VIEW').slice(1);
    expect(views).toHaveLength(12);
    for (const view of views) {
      const column = /usage_(latency|ttft)_hist/.exec(view)![1] === 'latency' ? 'latency_ms' : 'ttft_ms';
      expect(view).toContain(`${bucketSql(column)} AS bucket`);
    }
  });

  it('stand for a value within 2 % of every value they hold', () => {
    expect(BUCKET_RELATIVE_ERROR).toBeLessThan(0.02);
    expect(bucketValue(0)).toBeNull();
    expect(bucketValue(1)).toBe(0);
    for (const value of [1, 2, 3, 7, 10, 99, 100, 101, 250, 999, 1_000, 4_321, 20_000, 65_535, 3_600_000, 86_400_000]) {
      const stands = bucketValue(bucketOf(value))!;
      expect(Math.abs(stands - value) / value, `${value} → ${stands}`).toBeLessThanOrEqual(BUCKET_RELATIVE_ERROR + 1e-12);
    }
    // The bounds of a bucket are e^(1/25) apart.
    expect(bucketOf(Math.ceil(Math.exp(100 / BUCKETS_PER_E)))).toBe(102);
  });
});
