// The profiles' summaries (scripts/profile-summary.ts) and the allocation sampler the
// bench preloads into a service (scripts/allocation-sampler.mjs), on a real Node process.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { renderAllocationSummary, summariseAllocations, type HeapProfile } from './profile-summary.js';

const sampler = fileURLToPath(new URL('./allocation-sampler.mjs', import.meta.url));

const frame = (functionName: string, url: string, lineNumber = 0) => ({ functionName, url, lineNumber });

describe('summariseAllocations', () => {
  const profile: HeapProfile = {
    head: {
      callFrame: frame('(root)', ''),
      selfSize: 0,
      children: [
        {
          callFrame: frame('accept', 'file:///app/services/gateway/dist/intake.js', 26),
          selfSize: 3000,
          children: [
            {
              callFrame: frame('writeUnsignedVarInt', 'file:///app/node_modules/@platformatic/dynamic-buffer/dist/index.js', 386),
              selfSize: 5000,
            },
            { callFrame: frame('accept', 'file:///app/services/gateway/dist/intake.js', 26), selfSize: 1000 },
          ],
        },
        { callFrame: frame('(garbage collector)', ''), selfSize: 1000 },
      ],
    },
  };

  it('sums the bytes by area and by function, wherever the function appears in the tree', () => {
    const summary = summariseAllocations(profile);
    expect(summary.totalBytes).toBe(10_000);
    expect(summary.areas).toEqual([
      { area: '@platformatic/dynamic-buffer', bytes: 5000 },
      { area: 'services/gateway/dist/intake.js', bytes: 4000 },
      { area: 'garbage collector', bytes: 1000 },
    ]);
    expect(summary.self[0]).toEqual({ name: 'writeUnsignedVarInt (@platformatic/dynamic-buffer:387)', bytes: 5000 });
    expect(summary.self[1]).toEqual({ name: 'accept (services/gateway/dist/intake.js:27)', bytes: 4000 });
  });

  it('renders bytes per record beside each line', () => {
    const text = renderAllocationSummary(summariseAllocations(profile), 'Allocations', { count: 10, unit: 'records' });
    expect(text).toContain('0.0 MB as sampled');
    expect(text).toContain('1000 bytes per record');
    expect(text).toContain('| @platformatic/dynamic-buffer | 0.0 | 50.0 | 500 |');
  });
});

describe('the allocation sampler', () => {
  const run = (dir: string | undefined) =>
    execFileSync(
      process.execPath,
      [
        '--import',
        sampler,
        '-e',
        // 64 MB allocated in short-lived arrays by one named function; little of it alive at the end.
        'function churn() { let kept = 0; for (let i = 0; i < 4000; i++) { const a = new Array(2000).fill(i); kept += a.length; } return kept; } churn();',
      ],
      { env: { ...process.env, OTM_ALLOCATION_PROFILE_DIR: dir } },
    );

  it("writes a profile at the process's exit that counts what the collector freed", () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-alloc-'));
    try {
      run(dir);
      const files = fs.readdirSync(dir).filter((file) => file.endsWith('.heapprofile'));
      expect(files).toHaveLength(1);
      const summary = summariseAllocations(JSON.parse(fs.readFileSync(path.join(dir, files[0]!), 'utf8')) as HeapProfile);
      const churn = summary.self.find((line) => line.name.startsWith('churn '));
      // 4,000 arrays of 2,000 elements (8 bytes each at least): about 64 MB sampled, none of it alive at the end.
      expect(churn?.bytes).toBeGreaterThan(32e6);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('does nothing without a folder to write to', () => {
    expect(() => run(undefined)).not.toThrow();
  });
});
