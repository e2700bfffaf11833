import { describe, expect, it } from 'vitest';
import { gatherPartWork, partGroup, partShares } from './part-work.js';

describe('partGroup', () => {
  it('names the tables of every record, the copy by user and the key index, and calls every other table a rollup', () => {
    expect(partGroup('usage_io')).toBe('usage_io');
    expect(partGroup('usage_events')).toBe('usage_events');
    expect(partGroup('usage_events_by_user')).toBe('usage_events_by_user');
    expect(partGroup('usage_event_keys')).toBe('usage_event_keys');
    expect(partGroup('usage_rollup_by_minute')).toBe('rollups');
    expect(partGroup('usage_latency_hist_env_by_day')).toBe('rollups');
    expect(partGroup('rollups')).toBe('rollups');
  });
});

describe('gatherPartWork', () => {
  it("sums new parts and merges by group, reading 18.16's event names and current releases' alike", () => {
    const work = gatherPartWork([
      { table: 'usage_io', event_type: 'NEW_PART', ms: '100' },
      { table: 'usage_io', event_type: 'MergeParts', ms: 250 },
      { table: 'usage_rollup_by_minute', event_type: 'NewPart', ms: '7' },
      { table: 'usage_errors_by_hour', event_type: 'MERGE_PARTS', ms: '5' },
      { table: 'usage_rollup_by_hour', event_type: 'MERGE_PARTS', ms: '6' },
      { table: 'usage_events', event_type: 'REMOVE_PART', ms: '9' },
    ]);
    expect(work.usage_io).toEqual({ newPartMs: 100, mergeMs: 250 });
    expect(work.rollups).toEqual({ newPartMs: 7, mergeMs: 11 });
    expect(work.usage_events).toEqual({ newPartMs: 0, mergeMs: 0 });
    expect(work.usage_event_keys).toEqual({ newPartMs: 0, mergeMs: 0 });
  });
});

describe('partShares', () => {
  it("gives each group its share of the step's part work and its seconds, a group the log did not name as none", () => {
    const shares = partShares({ usage_io: { newPartMs: 1000, mergeMs: 2000 }, rollups: { newPartMs: 500, mergeMs: 500 } });
    expect(shares.map(({ group }) => group)).toEqual(['usage_io', 'usage_events', 'usage_events_by_user', 'usage_event_keys', 'rollups']);
    expect(shares[0]).toEqual({ group: 'usage_io', share: 0.75, newPartS: 1, mergeS: 2 });
    expect(shares[1]).toEqual({ group: 'usage_events', share: 0, newPartS: 0, mergeS: 0 });
    expect(shares[4]).toEqual({ group: 'rollups', share: 0.25, newPartS: 0.5, mergeS: 0.5 });
  });
});
