import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, expect, it } from 'vitest';
import { peakRssMb, takePeakRssMb } from './peak-rss.js';

describe('takePeakRssMb', () => {
  it("reads a process's peak so far, then starts the next stretch from what it holds now", async () => {
    // A child that holds 200 MB, lets it go, and says so.
    const child = spawn(
      process.execPath,
      [
        '--expose-gc',
        '-e',
        "let b = Buffer.alloc(200e6, 1); b = null; globalThis.gc(); console.log('freed'); setInterval(() => {}, 1000);",
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    try {
      await once(child.stdout, 'data');
      const first = takePeakRssMb(child.pid);
      expect(first).toBeGreaterThan(190);
      const second = takePeakRssMb(child.pid);
      expect(second).toBeLessThan(first - 150);
      expect(peakRssMb(child.pid)).toBeLessThan(first - 150);
    } finally {
      child.kill();
    }
  });

  it('is NaN for a process that is not there', () => {
    expect(takePeakRssMb(undefined)).toBeNaN();
    expect(takePeakRssMb(2 ** 22 + 1)).toBeNaN();
  });
});
