import { describe, expect, it } from 'vitest';
import { cpuUsPerRecordSent } from './per-record.js';

describe('cpuUsPerRecordSent', () => {
  it('divides the CPU read around a whole load by every record it sent, the warm-up included', () => {
    // 1.2 ms over 120 records (20 of them in the warm-up): 10 µs each, not 12.
    const load = { accepted: 100, sentTotal: 120 };
    expect(cpuUsPerRecordSent(0.0012, load)).toBeCloseTo(10, 9);
  });

  it('does not divide by zero when nothing was sent', () => {
    const load = { accepted: 0, sentTotal: 0 };
    expect(cpuUsPerRecordSent(0.5, load)).toBe(500_000);
  });
});
