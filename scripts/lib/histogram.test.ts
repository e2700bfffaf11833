import { describe, expect, it } from 'vitest';
import { bucketsSince, histogramBuckets, histogramQuantile, metricValue } from './histogram.js';

const text = `# HELP otm_gateway_request_seconds Time from request to answer, by route
# TYPE otm_gateway_request_seconds histogram
otm_gateway_request_seconds_bucket{le="0.01",route="/v1/telemetry/usage"} 90
otm_gateway_request_seconds_bucket{le="0.025",route="/v1/telemetry/usage"} 98
otm_gateway_request_seconds_bucket{le="0.05",route="/v1/telemetry/usage"} 100
otm_gateway_request_seconds_bucket{le="+Inf",route="/v1/telemetry/usage"} 100
otm_gateway_request_seconds_sum{route="/v1/telemetry/usage"} 0.7
otm_gateway_request_seconds_count{route="/v1/telemetry/usage"} 100
otm_gateway_request_seconds_bucket{le="0.01",route="/health"} 5
otm_gateway_request_seconds_bucket{le="0.025",route="/health"} 5
otm_gateway_request_seconds_bucket{le="0.05",route="/health"} 5
otm_gateway_request_seconds_bucket{le="+Inf",route="/health"} 5
`;

describe('histogramBuckets', () => {
  it("reads one route's cumulative buckets in order of their bounds", () => {
    expect(histogramBuckets(text, 'otm_gateway_request_seconds', { route: '/v1/telemetry/usage' })).toEqual([
      [0.01, 90],
      [0.025, 98],
      [0.05, 100],
      [Infinity, 100],
    ]);
  });

  it('adds up the series when no label narrows them', () => {
    expect(histogramBuckets(text, 'otm_gateway_request_seconds')[0]).toEqual([0.01, 95]);
  });
});

describe('histogramQuantile', () => {
  const buckets = histogramBuckets(text, 'otm_gateway_request_seconds', { route: '/v1/telemetry/usage' });

  it('interpolates within the bucket the rank falls in, as Prometheus does', () => {
    expect(histogramQuantile(buckets, 0.5)).toBeCloseTo(0.01 * (50 / 90));
    expect(histogramQuantile(buckets, 0.94)).toBeCloseTo(0.01 + 0.015 * (4 / 8));
    expect(histogramQuantile(buckets, 0.99)).toBeCloseTo(0.025 + 0.025 * (1 / 2));
  });

  it('gives the largest finite bound past it, and NaN for an empty histogram', () => {
    expect(
      histogramQuantile(
        [
          [0.01, 1],
          [Infinity, 10],
        ],
        0.99,
      ),
    ).toBe(0.01);
    expect(
      histogramQuantile(
        [
          [0.01, 0],
          [Infinity, 0],
        ],
        0.99,
      ),
    ).toBeNaN();
  });

  it('reads what was counted between two readings', () => {
    const before: [number, number][] = [
      [0.01, 80],
      [0.025, 80],
      [0.05, 80],
      [Infinity, 80],
    ];
    expect(bucketsSince(buckets, before)).toEqual([
      [0.01, 10],
      [0.025, 18],
      [0.05, 20],
      [Infinity, 20],
    ]);
    expect(histogramQuantile(bucketsSince(buckets, before), 0.5)).toBeCloseTo(0.01);
  });
});

describe('metricValue', () => {
  const unlabelled = `# TYPE otm_ingester_batch_rows histogram
otm_ingester_batch_rows_bucket{le="+Inf"} 42
otm_ingester_batch_rows_sum 194520
otm_ingester_batch_rows_count 42
process_resident_memory_bytes 281018368
`;

  it('reads a series without labels, and NaN for one that is not there or has labels', () => {
    expect(metricValue(unlabelled, 'otm_ingester_batch_rows_count')).toBe(42);
    expect(metricValue(unlabelled, 'otm_ingester_batch_rows_sum')).toBe(194_520);
    expect(metricValue(unlabelled, 'process_resident_memory_bytes')).toBe(281_018_368);
    expect(metricValue(unlabelled, 'otm_ingester_pending_bytes')).toBeNaN();
    expect(metricValue(text, 'otm_gateway_request_seconds_count')).toBeNaN();
  });
});
