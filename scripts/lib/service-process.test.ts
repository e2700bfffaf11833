import { describe, expect, it } from 'vitest';
import { withMemoryFlags } from './service-process.js';

describe('withMemoryFlags', () => {
  it("gives the ingester its V8 flags and glibc's fixed mmap threshold", () => {
    const env = withMemoryFlags('ingester', { PATH: '/bin' });
    expect(env.NODE_OPTIONS).toBe('--max-old-space-size=256 --max-semi-space-size=8');
    expect(env.MALLOC_MMAP_THRESHOLD_).toBe('1048576');
    expect(env.PATH).toBe('/bin');
  });

  it('leaves the allocator of the other services alone', () => {
    for (const entry of ['gateway', 'gateway-cluster', 'admin'] as const) {
      expect(withMemoryFlags(entry, {}).MALLOC_MMAP_THRESHOLD_).toBeUndefined();
    }
  });

  it('keeps what the environment sets already', () => {
    const env = withMemoryFlags('ingester', { NODE_OPTIONS: '--max-old-space-size=512', MALLOC_MMAP_THRESHOLD_: '131072' });
    expect(env.NODE_OPTIONS).toBe('--max-old-space-size=512 --max-semi-space-size=8');
    expect(env.MALLOC_MMAP_THRESHOLD_).toBe('131072');
  });
});
