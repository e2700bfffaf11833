import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderFromFiles, renderMarkdown, sectionMachines, type Output } from './render.js';
import { projectRoot as root } from '../lib/project-root.js';

describe('BENCHMARKS.md', () => {
  it('is what bench/results/latest.json and bench/analysis.md give (npm run bench:render after editing the analysis)', () => {
    expect(fs.readFileSync(path.join(root, 'BENCHMARKS.md'), 'utf8')).toBe(renderFromFiles());
  });
});

describe('sectionMachines', () => {
  it('marks the sections of this run with its machine and keeps the others where they were measured', () => {
    const before = { sectionMachines: { gateway: 'AMD EPYC', ingester: 'AMD EPYC', analytics: 'AMD EPYC' } };
    expect(sectionMachines(['gateway', 'endToEnd'], 'Intel Xeon', before)).toEqual({
      gateway: 'Intel Xeon',
      endToEnd: 'Intel Xeon',
      ingester: 'AMD EPYC',
      analytics: 'AMD EPYC',
    });
    expect(sectionMachines(['batch'], 'Intel Xeon', {})).toEqual({ batch: 'Intel Xeon' });
  });

  it('names in the report the sections last measured on another machine', () => {
    const data = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as Output;
    const report = renderMarkdown({
      ...data,
      sectionMachines: { ...sectionMachines(['gateway'], data.machine.cpu, {}), lookup: 'Other CPU' },
    });
    expect(report).toMatch(/Sections measured on another machine \(Other CPU\): lookup/);
  });
});
