import { describe, expect, it } from 'vitest';
import { benchRunOf, leftOverByEarlierRun } from './redis-sweep.js';

const startedMs = Date.UTC(2026, 11, 6, 0, 40, 57, 213);
const runId = `${startedMs.toString(36)}7612`;
const hour = 60 * 60 * 1000;

describe('benchRunOf', () => {
  it("reads the run id and its start from every section's prefix", () => {
    for (const key of [
      `bench-${runId}:apikeys`,
      `bench-${runId}-2:seen:key_a:b`,
      `bench-e2e-${runId}:seen:key_uh8v1AoSoFml:901c68cd`,
      `bench-fresh-${runId}-3500:seen:k`,
      `bench-analytics-${runId}:ingest:seen:k`,
      `bench-scale-${runId}-12-2:seen:k`,
      `bench-codec-lz4-${runId}:seen:k`,
    ]) {
      expect(benchRunOf(key), key).toEqual({ runId, startedMs });
    }
  });

  it("is undefined for keys that are not the bench's", () => {
    for (const key of [
      'gwc_mxb1032w_b9ad6d5c:apikeys',
      'bench:config',
      'bench-e2e-notarunid:seen',
      `other-${runId}:seen`,
      'bench-00000000abcd:x',
    ]) {
      expect(benchRunOf(key), key).toBeUndefined();
    }
  });
});

describe('leftOverByEarlierRun', () => {
  const earlier = `${(startedMs - 3 * hour).toString(36)}0a1b`;
  const recent = `${(startedMs - hour).toString(36)}0a1b`;

  it("picks the keys of runs that started longer ago than the bound, never this run's", () => {
    expect(leftOverByEarlierRun(`bench-e2e-${earlier}:seen:k`, runId, startedMs, 2 * hour)).toBe(true);
    expect(leftOverByEarlierRun(`bench-e2e-${recent}:seen:k`, runId, startedMs, 2 * hour)).toBe(false);
    expect(leftOverByEarlierRun(`bench-e2e-${runId}:seen:k`, runId, startedMs + 3 * hour, 2 * hour)).toBe(false);
    expect(leftOverByEarlierRun('gwc_mxb1032w_b9ad6d5c:apikeys', runId, startedMs, 2 * hour)).toBe(false);
  });
});
