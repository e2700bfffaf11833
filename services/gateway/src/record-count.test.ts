import { describe, expect, it } from 'vitest';
import { refuse } from '@otm/shared/errors';
import type { ItemResult } from './intake.js';
import { tallyResults } from './record-count.js';

const accepted = (replay: boolean): ItemResult => ({ kind: 'accepted', requestId: 'r', timestamp: 't', usage: {} as never, replay });

describe('tallyResults', () => {
  it('names every result once: queued now, replayed, refused, unavailable', () => {
    const results: ItemResult[] = [
      accepted(false),
      accepted(false),
      accepted(true),
      { kind: 'refused', error: refuse('batchEmpty', { errors: [] }) },
      { kind: 'unavailable', reason: 'broker away' },
    ];
    expect(tallyResults(results)).toEqual({ accepted: 2, replayed: 1, refused: 1, unavailable: 1 });
  });

  it('adds the records refused before the intake (OTLP spans that map to no record)', () => {
    expect(tallyResults([accepted(false)], 3)).toEqual({ accepted: 1, replayed: 0, refused: 3, unavailable: 0 });
  });
});
