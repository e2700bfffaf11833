// Which partitions retention drops, at the edges of a month.
import { describe, expect, it } from 'vitest';
import { expiredPartitions, type RetentionPolicy } from './retention.js';

const policy: RetentionPolicy = { eventsDays: 400, ioDays: 30, rollupsDays: 0, canaryDays: 7, eventKeysDays: 10 };
const parts = (table: string, ...partitions: string[]) => partitions.map((partition) => ({ table, partition }));

describe('expiredPartitions', () => {
  it('drops a month once its last day is older than the retention, and never a table kept for ever', () => {
    const now = Date.UTC(2026, 10, 23, 12); // 2026-11-23 12:00 UTC; 30 days back: 2026-10-24 12:00
    const all = [
      ...parts('usage_io', '202609', '202610', '202611'),
      ...parts('usage_events', '202409', '202410', '202509', '202510', '202611'),
      ...parts('usage_rollup_minute', '200001', '202611'),
      ...parts('canary_probes', 'all'),
      ...parts('usage_io', 'tuple()'),
    ];
    expect(expiredPartitions(all, policy, now)).toEqual([
      // October still holds rows from after the 24th: kept; September ended 2026-10-01.
      { table: 'usage_io', partition: '202609' },
      // 400 days back is 2025-10-19: September 2025 ended on 2025-10-01, October 2025 not yet.
      { table: 'usage_events', partition: '202409' },
      { table: 'usage_events', partition: '202410' },
      { table: 'usage_events', partition: '202509' },
    ]);
  });

  it('goes at the first instant the whole month is past the cut-off, not before', () => {
    const io = parts('usage_io', '202609');
    const endOfSeptemberPlus30 = Date.UTC(2026, 9, 1) + 30 * 86_400_000;
    expect(expiredPartitions(io, policy, endOfSeptemberPlus30 - 1)).toEqual([]);
    expect(expiredPartitions(io, policy, endOfSeptemberPlus30)).toEqual(io);
  });

  it('drops a day of event keys once it is older than their retention', () => {
    const now = Date.UTC(2026, 10, 23, 12); // 10 days back: 2026-11-13 12:00
    const keys = parts('usage_event_keys', '20261111', '20261112', '20261113', '20261123', '202611');
    expect(expiredPartitions(keys, policy, now)).toEqual(parts('usage_event_keys', '20261111', '20261112'));
    const endOf13th = Date.UTC(2026, 10, 14) + 10 * 86_400_000;
    expect(expiredPartitions(parts('usage_event_keys', '20261113'), policy, endOf13th - 1)).toEqual([]);
    expect(expiredPartitions(parts('usage_event_keys', '20261113'), policy, endOf13th)).toEqual(parts('usage_event_keys', '20261113'));
    expect(expiredPartitions(keys, { ...policy, eventKeysDays: 0 }, now)).toEqual([]);
  });
});
