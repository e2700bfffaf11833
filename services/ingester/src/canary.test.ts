import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, compileValidators } from '@otm/schemas';
import { probeRecord } from './canary.js';

describe('probeRecord', () => {
  it('is a valid usage record (the gateway must accept every probe)', () => {
    const { usageRecord } = compileValidators(buildQueuedRecordSchema());
    const record: unknown = JSON.parse(probeRecord(new Date()));
    expect(usageRecord(record), JSON.stringify(usageRecord.errors)).toBe(true);
  });
});
