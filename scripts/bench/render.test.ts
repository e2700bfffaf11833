import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { renderFromFiles, renderMarkdown, sectionMachines, type Output } from './render.js';
import { projectRoot as root } from '../lib/project-root.js';

describe('BENCHMARKS.md', () => {
  it('is what bench/results/latest.json gives (npm run bench:render)', () => {
    expect(fs.readFileSync(path.join(root, 'BENCHMARKS.md'), 'utf8')).toBe(renderFromFiles());
  });

  it('opens with the targets and links the history instead of holding it', () => {
    const report = renderFromFiles();
    const firstScreen = report.split('\n').slice(0, 60).join('\n');
    expect(firstScreen).toContain('Targets, as measured by this run:');
    expect(firstScreen).toContain('[bench/analysis.md](bench/analysis.md)');
    expect(report).not.toContain('## Reading the figures');
    expect(report.length).toBeLessThan(40_000);
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

describe('what two cores leave the gateway and the ingester', () => {
  const data = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as Output;
  const step = (offeredPerS: number, passed: boolean, kafka: number, redis: number, gateway: number, ingester: number) => ({
    offeredPerS,
    passed,
    cpuUsPerRecord: { kafka, redis, gateway, ingester },
  });
  const figures = {
    ...data,
    machine: { ...data.machine, cores: 2 },
    clickhouseCeiling: { ...data.clickhouseCeiling, cpuUsPerRow: 40 },
    batch: { ...data.batch, generatorCpuUsPerRecord: 30, baselineCpuUsPerRecord: 35 },
    ingester: { ...data.ingester, baselineCpuUsPerRecord: 20 },
    endToEnd: {
      ...data.endToEnd,
      steps: [step(1000, true, 60, 8, 150, 120), step(2000, true, 30, 12, 140, 100), step(3000, false, 25, 10, 145, 95)],
    },
  } as Output;

  it('subtracts the cheapest figure of each part from what the cores give, and compares the rest with the bare baselines', () => {
    const report = renderMarkdown(figures);
    // 2 cores at 12,000/s: 166.7 µs; less ClickHouse 40, Kafka 25 (its cheapest step, 3,000/s), Redis 8 (1,000/s), the generator 30.
    expect(report).toContain('| two cores at 12,000 records/s | 166.7 |');
    expect(report).toContain('| − Kafka, its cheapest step end to end (at 3,000/s) | 25.0 |');
    expect(report).toContain('| − Redis, its cheapest step end to end (at 1,000/s) | 8.0 |');
    expect(report).toContain('| **left for the gateway and the ingester together** | **63.7** |');
    expect(report).toMatch(/bare kafkajs consumer with JSON\.parse \(20\.0\) \| 55\.0 \|/);
    // The services as measured at the highest step that passed.
    expect(report).toContain('| the gateway and the ingester, end to end at 2,000/s | 240.0 (140.0 + 100.0) |');
  });

  it('is left out when a figure it needs was not measured', () => {
    const report = renderMarkdown({ ...figures, ingester: { ...data.ingester, baselineCpuUsPerRecord: undefined } } as Output);
    expect(report).not.toContain('What two cores leave');
  });
});
