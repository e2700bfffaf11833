import { describe, expect, it } from 'vitest';
import { buildQueuedRecordSchema, compileValidators } from '@otm/schemas';
import { GATEWAY_SILENCE_WARN_MS, GatewaySilence, probeRecord } from './canary.js';

describe('probeRecord', () => {
  it('is a valid usage record (the gateway must accept every probe)', () => {
    const { usageRecord } = compileValidators(buildQueuedRecordSchema());
    const record: unknown = JSON.parse(probeRecord(new Date()));
    expect(usageRecord(record), JSON.stringify(usageRecord.errors)).toBe(true);
  });
});

describe('GatewaySilence', () => {
  it('a gateway not answering yet (a start) is info; still not answering after a minute, a warning; an answer starts over', () => {
    let now = 0;
    const silence = new GatewaySilence(() => now);
    expect(silence.unanswered()).toBe('info');
    now += GATEWAY_SILENCE_WARN_MS - 1;
    expect(silence.unanswered()).toBe('info');
    now += 1;
    expect(silence.unanswered()).toBe('warn');
    silence.answered();
    now += 5000;
    expect(silence.unanswered()).toBe('info');
  });
});
