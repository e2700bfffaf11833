import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  earlierRuns,
  freshnessTarget,
  machineLimit,
  renderFromFiles,
  renderMarkdown,
  sectionDates,
  sectionMachines,
  type Output,
} from './render.js';
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

describe('sectionDates', () => {
  it("dates the sections of this run with its date and keeps the others' dates", () => {
    const before = { sectionDates: { gateway: '2026-11-28T10:00:00.000Z', ingester: '2026-11-27T09:00:00.000Z' } };
    expect(sectionDates(['gateway'], '2026-11-29T12:00:00.000Z', before)).toEqual({
      gateway: '2026-11-29T12:00:00.000Z',
      ingester: '2026-11-27T09:00:00.000Z',
    });
    expect(sectionDates(['batch'], '2026-11-29T12:00:00.000Z', {})).toEqual({ batch: '2026-11-29T12:00:00.000Z' });
  });

  it('names in a partial run the sections kept from earlier runs, newest first, and when each was measured', () => {
    const run = {
      sections: ['endToEnd'],
      sectionMachines: { endToEnd: 'AMD EPYC', gateway: 'AMD EPYC', batch: 'AMD EPYC', lookup: 'AMD EPYC' },
      sectionDates: { endToEnd: '2026-11-29T12:56:01.642Z', batch: '2026-11-28T00:24:14.312Z', gateway: '2026-11-29T12:01:39.323Z' },
    } as unknown as Output;
    expect(earlierRuns(run)).toBe(
      "\nKept from earlier runs: gateway (2026-11-29 12:01 UTC), batch (2026-11-28 00:24 UTC), lookup (date not recorded). A figure that sets two sections side by side (the machine's limit, a ratio between sections) joins their runs.",
    );
    expect(earlierRuns({ ...run, sections: 'all' } as Output)).toBe('');
    expect(earlierRuns({ ...run, sections: ['endToEnd', 'gateway', 'batch', 'lookup'] } as Output)).toBe('');
  });
});

/** A report's figures with the floors and the end-to-end steps set, for the two budget tables. */
const data = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as Output;
const step = (offeredPerS: number, passed: boolean, parts: Record<string, number>) => ({ offeredPerS, passed, cpuUsPerRecord: parts });
const figures = {
  ...data,
  machine: { ...data.machine, cores: 2 },
  clickhouseCeiling: { ...data.clickhouseCeiling, cpuUsPerRow: 40 },
  batch: { ...data.batch, generatorCpuUsPerRecord: 30, baselineCpuUsPerRecord: 35 },
  ingester: { ...data.ingester, baselineCpuUsPerRecord: 20 },
  endToEnd: {
    ...data.endToEnd,
    sustainedPerS: 2000,
    steps: [
      step(1000, true, { kafka: 60, redis: 8, gateway: 150, ingester: 120, clickhouse: 200 }),
      step(2000, true, { kafka: 30, redis: 12, gateway: 140, ingester: 100, clickhouse: 160 }),
      step(3000, false, { kafka: 25, redis: 10, gateway: 145, ingester: 95, clickhouse: 150 }),
    ],
  },
} as Output;

describe('what two cores leave the gateway and the ingester', () => {
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

describe("the machine's limit", () => {
  it('is the cores over the sum of the floors, each part beside what it took at the highest step that passed', () => {
    const limit = machineLimit(figures)!;
    // 40 ClickHouse + 35 Fastify + 20 consumer + 25 Kafka (cheapest) + 8 Redis (cheapest) + 30 generator = 158 µs.
    expect(limit.floorUs).toBe(158);
    expect(limit.limitPerS).toBeCloseTo(2e6 / 158, 6);
    expect(limit.atPerS).toBe(2000);
    expect(limit.parts.find((part) => part.part === 'ClickHouse')).toMatchObject({ floorUs: 40, measuredUs: 160 });
    const report = renderMarkdown(figures);
    expect(report).toContain(`| 2,000/s of 12,658/s: 0.16 | **not met** |`);
    expect(report).toContain(
      '| ClickHouse CPU per record end to end ≤ 2× its own insert of the same rows | 4.0× (160.0 / 40.0 µs) | **not met** |',
    );
    expect(report).toContain('2 cores ÷ 158.0 µs =\n**12,658 records/s**');
  });

  it('names the section and the time each floor was measured, beside the end-to-end one', () => {
    expect(machineLimit(figures)!.parts.map((part) => [part.part, part.section])).toEqual([
      ['ClickHouse', 'ingester'],
      ['gateway', 'batch'],
      ['ingester', 'ingester'],
      ['Kafka', 'endToEnd'],
      ['Redis', 'endToEnd'],
      ['load generator', 'batch'],
    ]);
    const dated = { ...figures, sectionDates: { batch: '2026-11-28T00:24:14.312Z', endToEnd: '2026-11-29T12:56:01.642Z' } } as Output;
    const report = renderMarkdown(dated);
    expect(report).toMatch(/\| gateway \| a bare Fastify\+TLS server taking the same batches \| batch, 2026-11-28 00:24 UTC \| 35\.0 \|/);
    expect(report).toMatch(/\| ClickHouse \| [^|]+ \| ingester \| 40\.0 \|/);
    expect(report).toContain("The end-to-end column is the endToEnd section's (2026-11-29 12:56 UTC)");
  });

  it('is not stated when a floor was not measured', () => {
    expect(machineLimit({ ...figures, batch: { ...figures.batch, generatorCpuUsPerRecord: undefined } } as Output)).toBeUndefined();
    expect(renderMarkdown({ ...figures, batch: { ...figures.batch, generatorCpuUsPerRecord: undefined } } as Output)).not.toContain(
      "The machine's limit",
    );
  });

  it('is not compared with the floors when the ladder ran with another capture policy', () => {
    const targetRow = (report: string, start: string) => report.split('\n').find((line) => line.startsWith(`| ${start}`))!;
    const full = renderMarkdown(figures);
    const metadataOnly = renderMarkdown({ ...figures, endToEnd: { ...figures.endToEnd, capture: 'metadata-only' } } as Output);
    for (const start of ['end to end ≥ 0.6', 'ClickHouse CPU per record end to end', 'gateway peak RSS', 'ingester peak RSS']) {
      expect(targetRow(full, start)).not.toContain('capture policy');
      expect(targetRow(full, start)).toMatch(/\*\*(not )?met\*\* \|$/);
      expect(targetRow(metadataOnly, start)).toContain('capture policy metadata-only: not the records the targets are set for');
      expect(targetRow(metadataOnly, start)).toMatch(/\| not measured \|$/);
    }
    expect(metadataOnly).toContain(
      "The ladder ran with keys of capture policy metadata-only (BENCH_E2E_CAPTURE): other records than the floors'.",
    );
    expect(full).not.toContain('The ladder ran with keys of capture policy');
  });
});

describe('freshnessTarget', () => {
  const measured = {
    p99MsAt2000: 700,
    achievedPerSecAt2000: 1990,
    p99MsAt3000: 950,
    achievedPerSecAt3000: 2980,
    p99MsAt5000: 2100,
    achievedPerSecAt5000: 4700,
  };

  it('reads the lowest measured rate held at half the sustained rate or more (95 % of it achieved)', () => {
    expect(freshnessTarget(measured, 6000)).toEqual([expect.any(String), '950 ms at 2,980/s achieved (half the sustained: 3,000/s)', true]);
    expect(freshnessTarget(measured, 3000)).toEqual([expect.any(String), '700 ms at 1,990/s achieved (half the sustained: 1,500/s)', true]);
    expect(freshnessTarget(measured, 8000)).toEqual([
      expect.any(String),
      '2,100 ms at 4,700/s achieved (half the sustained: 4,000/s)',
      false,
    ]);
  });

  it('is not met when no measured rate reached half the sustained rate', () => {
    expect(freshnessTarget(measured, 12_000)).toEqual([
      expect.any(String),
      '2,100 ms at 4,700/s achieved (half the sustained: 6,000/s)',
      false,
    ]);
  });

  it('says so when freshness or the sustained rate was not measured', () => {
    expect(freshnessTarget(undefined, 6000)[2]).toBeUndefined();
    expect(freshnessTarget(measured, undefined)[2]).toBeUndefined();
  });
});

describe('analytics while ingesting and the dashboard pages', () => {
  const data = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as Output;
  const analytics = (data as unknown as { analytics: Record<string, unknown> }).analytics;
  const atFull = analytics.atFull as { name: string }[];
  const name = atFull[0]!.name;

  it("says what ClickHouse did with the slowest request's time, loaded and at rest", () => {
    const report = renderMarkdown({
      ...data,
      analytics: {
        ...analytics,
        atFull: atFull.map((row) =>
          row.name === name ? { ...row, clickhouseP50Ms: 180, clickhouseCpuP50Ms: 330, clickhouseCpuWaitP50Ms: 20 } : row,
        ),
        atFullWhileIngesting: [{ name, p95Ms: 2500, clickhouseP50Ms: 1800, clickhouseCpuP50Ms: 350, clickhouseCpuWaitP50Ms: 2400 }],
      },
    } as unknown as Output);
    expect(report).toContain(
      "ClickHouse's p50 for it 1,800 ms (its CPU 350, waiting for a core 2,400), at rest 180 ms (its CPU 330, waiting for a core 20)",
    );
  });

  it('gives each page its median and every round, and the background work as they were timed', () => {
    const report = renderMarkdown({
      ...data,
      analytics: {
        ...analytics,
        pages: [{ page: 'overview', ms: 130, each: [1150, 130, 120], charts: 5, errors: 0 }],
        pagesBackground: { merges: 3, mutations: 1 },
        pagesBackgroundAfter: { merges: 0, mutations: 0 },
      },
    } as unknown as Output);
    expect(report).toContain('| overview | 130 ms (1,150, 130, 120) | 5 | 0 |');
    expect(report).toContain(
      'the median of 3 rounds, each in brackets; as they began ClickHouse was running 3 merges in that database, mutations not done: 1; as they ended 0 and 0',
    );
  });
});

describe('peak RSS under the end-to-end run', () => {
  it("judges the ladder's peak and shows each step's and drain's beside the passing steps' own", () => {
    const peak = (gateway: [number, number], ingester: [number, number]) => ({
      gateway: { step: gateway[0], drain: gateway[1] },
      ingester: { step: ingester[0], drain: ingester[1] },
    });
    const report = renderMarkdown({
      ...figures,
      endToEnd: {
        ...figures.endToEnd,
        gatewayRssMb: 270,
        ingesterRssMb: 350,
        gatewayPassedStepsRssMb: 250,
        ingesterPassedStepsRssMb: 300,
        steps: [
          { ...step(6000, true, {}), peakRssMb: peak([250, 240], [290, 300]) },
          { ...step(6500, false, {}), peakRssMb: peak([270, 255], [320, 350]) },
        ],
      },
    } as Output);
    expect(report).toContain(
      '| gateway peak RSS ≤ 256 MB under the end-to-end run | 270 MB over the ladder; the steps that passed and their drains: 250 MB | **not met** |',
    );
    expect(report).toContain(
      '| ingester peak RSS ≤ 320 MB under the end-to-end run | 350 MB over the ladder; the steps that passed and their drains: 300 MB | **not met** |',
    );
    expect(report).toMatch(/\| 6,500 \|.*\| 270 \/ 255 MB; 320 \/ 350 MB \| failed/);
  });
});
