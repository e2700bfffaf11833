// BENCHMARKS.md from the figures (bench/results/latest.json): the targets first, then
// every figure; the dated, hand-written readings of past runs are the history
// (bench/analysis.md), which the report links. Free of side effects, unlike the bench's
// context: `npm run bench:render` rewrites BENCHMARKS.md, and a unit test checks that
// the committed file is what the figures give.
import fs from 'node:fs';
import path from 'node:path';
import type { Figure } from './context.js';
import { projectRoot as root } from '../lib/project-root.js';
import { PART_GROUPS, partShares, type PartWork } from './part-work.js';

export interface Machine {
  cores: number;
  memoryGiB: number;
  cpu: string;
  node: string;
  kafka: string;
  clickhouse: string;
}
export type Output = { date: string; mode: string; runs: number; machine: Machine } & Record<string, any>;

/**
 * The CPU each section was last measured on: a partial run (--only) keeps the other
 * sections' figures, which may come from another machine (the report says which).
 */
export function sectionMachines(ran: readonly string[], cpu: string, before: Record<string, any>): Record<string, string> {
  return stamped(ran, cpu, before.sectionMachines);
}

/**
 * When each section was last measured (the run's date): a partial run keeps the other
 * sections' figures, and the report says from when.
 */
export function sectionDates(ran: readonly string[], date: string, before: Record<string, any>): Record<string, string> {
  return stamped(ran, date, before.sectionDates);
}

/** `kept` (a previous run's value per section) with the sections of this run given `value`. */
function stamped(ran: readonly string[], value: string, kept: Record<string, string> = {}): Record<string, string> {
  return { ...kept, ...Object.fromEntries(ran.map((name) => [name, value])) };
}

/** One part of the pipeline's work: its floor (the least CPU per record it can take) and what it took end to end. */
export interface LimitPart {
  part: string;
  floor: string;
  /** The bench section that measured the floor. */
  section: string;
  floorUs: number;
  measuredUs: number | undefined;
}

/**
 * The machine's limit for this pipeline's work, from the figures of one report: each
 * part's floor (ClickHouse's own insert of the same rows, Kafka's and Redis's cheapest
 * end-to-end step, the load generator, a bare Fastify+TLS server taking the same batches,
 * a bare kafkajs consumer with JSON.parse), and the cores divided by their sum. Beside
 * each floor, what the part took at the highest end-to-end step that passed. Undefined
 * when a figure is missing.
 */
export function machineLimit(
  data: Output,
): { parts: LimitPart[]; floorUs: number; limitPerS: number; sustainedPerS: number | undefined; atPerS: number } | undefined {
  const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  const e = (data.endToEnd ?? {}) as Record<string, any>;
  const steps = ((e.steps ?? []) as Record<string, any>[]).filter((step) => step.cpuUsPerRecord);
  const step = steps.findLast((s) => s.passed) ?? steps.at(-1);
  if (!step) return undefined;
  const cheapest = (key: string) => {
    const values = steps.map((s) => num(s.cpuUsPerRecord[key])).filter((value) => value !== undefined);
    return values.length > 0 ? Math.min(...values) : undefined;
  };
  const at = (key: string) => num(step.cpuUsPerRecord[key]);
  const c = (data.clickhouseCeiling ?? {}) as Record<string, any>;
  const b = (data.batch ?? {}) as Record<string, any>;
  const i = (data.ingester ?? {}) as Record<string, any>;
  const candidates = [
    [
      'ClickHouse',
      `its own insert of the same rows (RowBinary, in batches of ${Number(c.batchRows ?? 20_000).toLocaleString('en-US')} rows, its views and merges included)`,
      'ingester',
      num(c.cpuUsPerRow),
      at('clickhouse'),
    ],
    ['gateway', 'a bare Fastify+TLS server taking the same batches', 'batch', num(b.baselineCpuUsPerRecord), at('gateway')],
    ['ingester', 'a bare kafkajs consumer with JSON.parse', 'ingester', num(i.baselineCpuUsPerRecord), at('ingester')],
    ['Kafka', 'its cheapest end-to-end step', 'endToEnd', cheapest('kafka'), at('kafka')],
    ['Redis', 'its cheapest end-to-end step', 'endToEnd', cheapest('redis'), at('redis')],
    ['load generator', 'the SDK batching, compressing and sending', 'batch', num(b.generatorCpuUsPerRecord), undefined],
  ] as const;
  if (candidates.some(([, , , floorUs]) => floorUs === undefined)) return undefined;
  const parts = candidates.map(([part, floor, section, floorUs, measuredUs]) => ({ part, floor, section, floorUs: floorUs!, measuredUs }));
  const floorUs = parts.reduce((sum, part) => sum + part.floorUs, 0);
  return {
    parts,
    floorUs,
    limitPerS: (data.machine.cores * 1e6) / floorUs,
    sustainedPerS: num(e.sustainedPerS),
    atPerS: Number(step.offeredPerS),
  };
}

export function renderMarkdown(data: Output): string {
  const f = fmt;
  const range = (fig: unknown, digits = 0) => {
    const x = fig as Figure | undefined;
    return x ? `${f(x.median, digits)} (${f(x.min, digits)}–${f(x.max, digits)})` : 'n/a';
  };
  const g = data.gateway as Record<string, any>;
  const b = (data.batch ?? {}) as Record<string, any>;
  const p = data.produce as Record<string, any>;
  const i = data.ingester as Record<string, any>;
  const c = (data.clickhouseCeiling ?? {}) as Record<string, any>;
  const cj = (data.clickhouseCeilingJson ?? {}) as Record<string, any>;
  const lk = (data.lookup ?? {}) as Record<string, any>;
  const fr = data.freshness as Record<string, any>;
  const r = data.revocation as Record<string, any>;
  const m = data.memory as Record<string, any>;
  const rd = (data.redaction ?? {}) as Record<string, any>;
  const e = (data.endToEnd ?? {}) as Record<string, any>;
  const so = (data.scaleOut ?? {}) as Record<string, any>;
  const steps = (e.steps ?? []) as Record<string, any>[];
  const codecRows = (((data.codecs ?? {}) as Record<string, any>).rows ?? []) as Record<string, any>[];
  const codecTable = codecRows
    .map(
      (row) =>
        `| ${row.codec} | ${f(row.gatewayRecordsPerS)} | ${f(row.gatewayCpuUsPerRecord)} µs | ${f(row.brokerBytesPerRecord)} B | ${f(row.ingesterRowsPerS)} | ${f(row.ingesterCpuUsPerRecord)} µs |`,
    )
    .join('\n');
  const h = (data.hostile ?? {}) as Record<string, any>;
  const hostileRows = ((h.shapes ?? []) as Record<string, any>[])
    .map(
      (row) =>
        `| ${row.shape} | ${f(row.wireBytes)} B | ${row.attack.statuses.join(', ')} | ${f(row.attack.cpuMsPerRequest, 2)} ms | ${f(row.attack.peakRssMb)} MB | ${f(row.attack.probeMaxMs)} ms | ${f(row.normalWireBytes)} B: ${f(row.normal.cpuMsPerRequest, 2)} ms, ${f(row.normal.peakRssMb)} MB, probe ${f(row.normal.probeMaxMs)} ms |`,
    )
    .join('\n');
  // RSS, and of it the V8 heap in use and the memory outside it (Buffers), read from the service's metrics.
  const memoryText = (memory: Record<string, number> | undefined) =>
    memory ? `${f(memory.rssMb)} MB (heap ${f(memory.heapUsedMb)}, external ${f(memory.externalMb)})` : 'not measured';
  // Each service's peak RSS (VmHWM) in the step, then in its drain.
  const peakText = (peak: Record<string, Record<string, number>> | undefined) =>
    peak
      ? `${f(peak.gateway?.step)} / ${f(peak.gateway?.drain)} MB; ${f(peak.ingester?.step)} / ${f(peak.ingester?.drain)} MB`
      : 'not measured';
  const ladder = steps
    .map(
      (step) =>
        `| ${f(step.offeredPerS)} | ${f(step.achievedPerS)} | ${f(step.accepted)} | ${f(step.lost)} | ${f(step.duplicates)} | ${f(step.maxLag)} / ${f(step.maxLagSecondHalf)} | ${f(step.drainSeconds, 1)} s | ${memoryText(step.gatewayMemory)} | ${memoryText(step.ingesterMemory)} | ${peakText(step.peakRssMb)} | ${step.passed ? 'passed' : `failed: ${step.limitedBy}`} |`,
    )
    .join('\n');
  // Each step's CPU per record, process by process, and how busy the machine was.
  const cpuColumns = ['gateway', 'ingester', 'clickhouse', 'kafka', 'redis', 'registry', 'steal', 'rest', 'machine'];
  const cpuLadder = steps
    .filter((step) => step.cpuUsPerRecord)
    .map(
      (step) =>
        `| ${f(step.offeredPerS)} | ${cpuColumns.map((name) => f(step.cpuUsPerRecord[name])).join(' | ')} | ${f(step.machineBusyShare * 100)} % |`,
    )
    .join('\n');
  // The same steps' CPU of the gateway, the ingester and ClickHouse by what their threads did.
  const threadLadder = steps
    .filter((step) => step.threadUsPerRecord)
    .map((step) => {
      const { gateway = {}, ingester = {}, clickhouse = {} } = step.threadUsPerRecord as Record<string, Record<string, number>>;
      return `| ${f(step.offeredPerS)} | ${f(gateway.main)} | ${f(gateway.v8)} | ${f(gateway.pool)} | ${f(gateway.other)} | ${f(ingester.main)} | ${f(ingester.v8)} | ${f(ingester.pool)} | ${f(ingester.other)} | ${f(clickhouse.merges)} | ${f(clickhouse.queries)} |`;
    })
    .join('\n');
  // The same steps' part work in ClickHouse by table: the share of its threads' time, and the seconds new parts + merges.
  const partLadder = steps
    .filter((step) => step.clickhouseParts)
    .map((step) => {
      const cells = partShares(step.clickhouseParts as Partial<PartWork>).map(
        ({ share, newPartS, mergeS }) => `${f(share * 100)} % (${f(newPartS, 1)} + ${f(mergeS, 1)} s)`,
      );
      return `| ${f(step.offeredPerS)} | ${cells.join(' | ')} |`;
    })
    .join('\n');
  const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  // What two cores leave the gateway and the ingester at the target rate, once the parts
  // they cannot do without have taken theirs (each as measured in this report), beside
  // what the bare baselines of the two take doing none of the pipeline's work.
  const floor = (() => {
    const target = 12_000;
    const budget = (data.machine.cores * 1e6) / target;
    // The highest step that passed (the last measured if none did).
    const measured = steps.filter((s) => s.cpuUsPerRecord);
    const step = measured.findLast((s) => s.passed) ?? measured.at(-1);
    // A process's cheapest step of the end-to-end run (its cost per record falls as the rate rises).
    const cheapest = (name: string, key: string): readonly [string, unknown] => {
      const least = steps
        .filter((s) => num(s.cpuUsPerRecord?.[key]) !== undefined)
        .sort((x, y) => x.cpuUsPerRecord[key] - y.cpuUsPerRecord[key])[0];
      return [`${name}, its cheapest step end to end (at ${f(least?.offeredPerS)}/s)`, least?.cpuUsPerRecord?.[key]];
    };
    const parts = [
      [
        `ClickHouse: its own insert of the same rows (the ceiling above: ${c.format ?? 'RowBinary'}, batches of ${f(c.batchRows)} rows, its merges included; no look-ups)`,
        c.cpuUsPerRow,
      ],
      cheapest('Kafka', 'kafka'),
      cheapest('Redis', 'redis'),
      ["the load generator (the SDK batching, compressing and sending; the batch section's bare runs)", b.generatorCpuUsPerRecord],
    ] as const;
    if (
      !step ||
      parts.some(([, value]) => num(value) === undefined) ||
      num(b.baselineCpuUsPerRecord) === undefined ||
      num(i.baselineCpuUsPerRecord) === undefined
    )
      return '';
    const left = budget - parts.reduce((sum, [, value]) => sum + Number(value), 0);
    const bare = Number(b.baselineCpuUsPerRecord) + Number(i.baselineCpuUsPerRecord);
    return `
What two cores leave the gateway and the ingester at ${f(target)} records/s (µs of CPU per
record; the parts they cannot do without as measured in this report, each at its cheapest:
ClickHouse's insert in its largest batches, without the look-ups; the hypervisor's steal
not counted), beside what the bare baselines take doing none of the pipeline's work:

| part | µs per record |
| --- | --- |
| two cores at ${f(target)} records/s | ${f(budget, 1)} |
${parts.map(([name, value]) => `| − ${name} | ${f(value, 1)} |`).join('\n')}
| **left for the gateway and the ingester together** | **${f(left, 1)}** |
| the bare Fastify+TLS server taking the same batches (${f(b.baselineCpuUsPerRecord, 1)}) and the bare kafkajs consumer with JSON.parse (${f(i.baselineCpuUsPerRecord, 1)}) | ${f(bare, 1)} |
| the gateway and the ingester, end to end at ${f(step.offeredPerS)}/s | ${f(Number(step.cpuUsPerRecord.gateway) + Number(step.cpuUsPerRecord.ingester), 1)} (${f(step.cpuUsPerRecord.gateway, 1)} + ${f(step.cpuUsPerRecord.ingester, 1)}) |
`;
  })();
  const met = (ok: boolean | undefined) => (ok === undefined ? 'not measured' : ok ? '**met**' : '**not met**');
  const check = (value: unknown, test: (x: number) => boolean) => (num(value) === undefined ? undefined : test(num(value)!));
  const an = (data.analytics ?? {}) as Record<string, any>;
  const atFirst = new Map(((an.atFirst ?? []) as Record<string, any>[]).map((row) => [row.name, row]));
  const atFull = (an.atFull ?? []) as Record<string, any>[];
  const ratiosOf = (key: 'p50Ms' | 'p95Ms') =>
    atFull.map((row) => row[key] / (atFirst.get(row.name)?.[key] ?? NaN)).filter(Number.isFinite);
  const ratios = ratiosOf('p50Ms');
  // The largest p95 ratio, shown beside the target with ClickHouse's own p95 at each size:
  // in a request of 10-20 ms the fourth slowest of 60 answers is a pause outside the query
  // as often as the query.
  const worstP95Ratio = atFull
    .map((row) => ({ row, small: atFirst.get(row.name), ratio: row.p95Ms / (atFirst.get(row.name)?.p95Ms ?? NaN) }))
    .filter(({ ratio }) => Number.isFinite(ratio))
    .sort((a, b) => b.ratio - a.ratio)[0];
  const mb = (bytes: unknown) => f(Number(bytes) / 1_048_576, 1);
  const kc = (data.kafkaClients ?? {}) as Record<string, any>;
  const clientRows = ((kc.rows ?? []) as Record<string, any>[])
    .map(
      (row) =>
        `| ${row.client} | ${range(row.produce1PerS)} | ${range(row.produce1CpuUs, 1)} µs | ${range(row.produce3PerS)} | ${range(row.produce3CpuUs, 1)} µs | ${range(row.consumePerS)} | ${range(row.consumeCpuUs, 1)} µs |`,
    )
    .join('\n');
  const analyticsRows = atFull
    .map((row) => {
      const small = atFirst.get(row.name) ?? {};
      return `| ${row.name} | ${f(small.firstMs)}; ${f(small.p50Ms)} / ${f(small.p95Ms)} ms | ${f(small.rowsRead)} | ${f(row.firstMs)}; ${f(row.p50Ms)} / ${f(row.p95Ms)} ms | ${f(row.rowsRead)} | ${mb(row.bytesRead)} MB | ${f(small.clickhouseP50Ms)} / ${f(row.clickhouseP50Ms)} ms | ${f(row.p50Ms / small.p50Ms, 2)} / ${f(row.p95Ms / small.p95Ms, 2)} |${row.status === 200 ? '' : ` answered ${row.status}`}`;
    })
    .join('\n');
  const tableRows = ((an.tables ?? []) as Record<string, any>[])
    .map((row) => `| ${row.table} | ${f(row.rows)} | ${mb(row.bytes)} MB |`)
    .join('\n');
  const pageRows = ((an.pages ?? []) as Record<string, any>[])
    .map(
      (row) =>
        `| ${row.page} | ${f(row.ms)} ms${Array.isArray(row.each) ? ` (${(row.each as number[]).map((ms) => f(ms)).join(', ')})` : ''} | ${f(row.charts)} | ${f(row.errors)} |`,
    )
    .join('\n');
  const worstP95 = atFull.length ? Math.max(...atFull.map((row) => row.p95Ms)) : undefined;
  // The same requests timed again while a pipeline loaded records into the full size.
  type Answered = { name: string; p95Ms: number; clickhouseP50Ms?: number; clickhouseCpuP50Ms?: number; clickhouseCpuWaitP50Ms?: number };
  const worstWhileIngesting = ((an.atFullWhileIngesting ?? []) as Answered[]).reduce<Answered | undefined>(
    (worst, row) => (worst === undefined || row.p95Ms > worst.p95Ms ? row : worst),
    undefined,
  );
  // What ClickHouse did with that request's time, loaded and at rest: computing, or waiting for a core.
  const atRest = worstWhileIngesting && (atFull as Answered[]).find((row) => row.name === worstWhileIngesting.name);
  const clickhouseTime = (row: Answered | undefined) =>
    `${f(row?.clickhouseP50Ms)} ms (its CPU ${f(row?.clickhouseCpuP50Ms)}, waiting for a core ${f(row?.clickhouseCpuWaitP50Ms)})`;
  const whileIngestingCause =
    worstWhileIngesting?.clickhouseCpuWaitP50Ms === undefined
      ? ''
      : `; ClickHouse's p50 for it ${clickhouseTime(worstWhileIngesting)}, at rest ${clickhouseTime(atRest)}`;
  const limit = machineLimit(data);
  // Where each floor was measured: its section, and when (a partial run keeps the others' figures).
  const dateOf = (section: string) => ((data.sectionDates ?? {}) as Record<string, string>)[section]?.slice(0, 16).replace('T', ' ');
  const measuredIn = (section: string) => (dateOf(section) ? `${section}, ${dateOf(section)} UTC` : section);
  // A ladder run with another capture policy (BENCH_E2E_CAPTURE) ran other records than
  // the floors and the targets are set for: its figures are shown, not checked.
  const fullCapture = e.capture === undefined || e.capture === 'full';
  // The peak over the steps that passed and their drains, beside the ladder's (runs before it was read: nothing).
  const passedStepsRss = (mb: number | undefined) => (mb ? `; the steps that passed and their drains: ${f(mb)} MB` : '');
  const notComparable = fullCapture ? '' : ` (the end-to-end keys' capture policy ${e.capture}: not the records the targets are set for)`;
  const checkFull = (value: unknown, test: (x: number) => boolean) => (fullCapture ? check(value, test) : undefined);
  const limitShare = limit?.sustainedPerS === undefined ? undefined : limit.sustainedPerS / limit.limitPerS;
  const partOf = (name: string) => limit?.parts.find((part) => part.part === name);
  const ratioTo = (name: string) => {
    const part = partOf(name);
    return part?.measuredUs === undefined ? undefined : part.measuredUs / part.floorUs;
  };
  const limitTable = limit
    ? `
The machine's limit for this pipeline's work: each part's floor, the least CPU per record
it can take as measured in this report, beside what it took end to end at ${f(limit.atPerS)}/s
(the highest step that passed); ${data.machine.cores} cores ÷ ${f(limit.floorUs, 1)} µs =
**${f(limit.limitPerS)} records/s**.

| part | floor | measured in | floor µs per record | end to end µs per record | ratio |
| --- | --- | --- | --- | --- | --- |
${limit.parts
  .map(
    (part) =>
      `| ${part.part} | ${part.floor} | ${measuredIn(part.section)} | ${f(part.floorUs, 1)} | ${f(part.measuredUs, 1)} | ${part.measuredUs === undefined ? '' : `${f(part.measuredUs / part.floorUs, 1)}×`} |`,
  )
  .join('\n')}
| **all** | | | **${f(limit.floorUs, 1)}** | | |

The end-to-end column is the endToEnd section's${dateOf('endToEnd') ? ` (${dateOf('endToEnd')} UTC)` : ''}; a floor measured in another run sets two runs side by side.${fullCapture ? '' : ` The ladder ran with keys of capture policy ${e.capture} (BENCH_E2E_CAPTURE): other records than the floors'.`}
`
    : '';
  const targets = [
    ['analytics: every p95 ≤ 300 ms at the full size', `${f(worstP95)} ms (the slowest)`, check(worstP95, (x) => x <= 300)],
    [
      'analytics: every p95 ≤ 300 ms at the full size while the pipeline ingests at half the sustained rate',
      worstWhileIngesting === undefined
        ? 'not measured'
        : `${f(worstWhileIngesting.p95Ms)} ms (the slowest: ${worstWhileIngesting.name}), ${f(an.whileIngesting?.achievedPerS)}/s ingested of ${f(an.whileIngesting?.offeredPerS)} offered${whileIngestingCause}`,
      check(worstWhileIngesting?.p95Ms, (x) => x <= 300),
    ],
    [
      'analytics: time at the full size / at a tenth ≤ 1.5 (p50)',
      `${f(ratios.length ? Math.max(...ratios) : undefined, 2)} (the largest)${worstP95Ratio ? `; at p95 ${f(worstP95Ratio.ratio, 2)} at most (${worstP95Ratio.row.name}: ClickHouse's own p95 ${f(worstP95Ratio.small?.clickhouseP95Ms)} / ${f(worstP95Ratio.row.clickhouseP95Ms)} ms)` : ''}`,
      check(ratios.length ? Math.max(...ratios) : undefined, (x) => x <= 1.5),
    ],
    [
      'analytics: rollup rows read by an unfiltered 30-day query ≤ 1 % of events',
      `${f(an.wideRowsShare * 100, 3)} %`,
      check(an.wideRowsShare, (x) => x <= 0.01),
    ],
    [
      "end to end ≥ 0.6 of the machine's limit (the cores ÷ the floors' CPU per record, below), zero loss, zero duplicates",
      limit ? `${f(limit.sustainedPerS)}/s of ${f(limit.limitPerS)}/s: ${f(limitShare, 2)}${notComparable}` : 'n/a',
      checkFull(limitShare, (x) => x >= 0.6),
    ],
    [
      'ClickHouse CPU per record end to end ≤ 2× its own insert of the same rows',
      `${f(ratioTo('ClickHouse'), 1)}× (${f(partOf('ClickHouse')?.measuredUs, 1)} / ${f(partOf('ClickHouse')?.floorUs, 1)} µs)${notComparable}`,
      checkFull(ratioTo('ClickHouse'), (x) => x <= 2),
    ],
    [
      'gateway CPU per record on the batch path ≤ 2× the bare Fastify+TLS server taking the same batches',
      `${f(b.gatewayCpuUsPerRecord / b.baselineCpuUsPerRecord, 1)}× (${f(b.gatewayCpuUsPerRecord, 1)} / ${f(b.baselineCpuUsPerRecord, 1)} µs)`,
      check(b.gatewayCpuUsPerRecord / b.baselineCpuUsPerRecord, (x) => x <= 2),
    ],
    ['gateway single-record ≥ 0.6 of bare Fastify', f(g.ratio, 2), check(g.ratio, (x) => x >= 0.6)],
    [
      'ingester CPU per record ≤ 2.5× the bare kafkajs consumer with JSON.parse',
      `${f(i.cpuUsPerRecord / i.baselineCpuUsPerRecord, 1)}× (${f(i.cpuUsPerRecord, 1)} / ${f(i.baselineCpuUsPerRecord, 1)} µs)`,
      check(i.cpuUsPerRecord / i.baselineCpuUsPerRecord, (x) => x <= 2.5),
    ],
    freshnessTarget(fr, e.sustainedPerS),
    ['gateway p99 < 20 ms at half its maximum', `${f(g.p99Ms)} ms`, check(g.p99Ms, (x) => x < 20)],
    [
      'gateway peak RSS ≤ 256 MB under the end-to-end run',
      `${f(e.gatewayRssMb)} MB over the ladder${passedStepsRss(e.gatewayPassedStepsRssMb)}${notComparable}`,
      checkFull(e.gatewayRssMb, (x) => x <= 256),
    ],
    [
      'ingester peak RSS ≤ 320 MB under the end-to-end run',
      `${f(e.ingesterRssMb)} MB over the ladder${passedStepsRss(e.ingesterPassedStepsRssMb)}${notComparable}`,
      checkFull(e.ingesterRssMb, (x) => x <= 320),
    ],
  ]
    .map(([target, measured, ok]) => `| ${target} | ${measured} | ${met(ok as boolean | undefined)} |`)
    .join('\n');
  return `# Benchmarks

Measured by \`npm run bench${flags(data)}\` on ${data.date.slice(0, 10)}${
    Array.isArray(data.sections) ? ' (a partial run: the other sections keep the figures of the run before)' : ''
  }; every figure is the
median of ${data.runs} runs with min–max in brackets; ratios are against baselines measured in the same run.
Absolute figures on this shared machine move by 20–40 % between runs; the ratios are what to compare.

Machine: ${data.machine.cores} cores (${data.machine.cpu}), ${data.machine.memoryGiB} GiB, Node ${data.machine.node},
Kafka ${data.machine.kafka} (KRaft, single node), ClickHouse ${data.machine.clickhouse}; Kafka, Apicurio, Redis,
ClickHouse and the load generator all share the machine with the service under test.${otherMachines(data)}${earlierRuns(data)}

Targets, as measured by this run:

| target | measured | |
| --- | --- | --- |
${targets}
${limitTable}
What was tried, measured, kept or taken back, run by run, is the history:
[bench/analysis.md](bench/analysis.md). Raw figures: \`bench/results/latest.json\`.

## Every figure

| figure | measured | baseline | ratio | target |
| --- | --- | --- | --- | --- |
| gateway accepted records/s (1 process, mean body ${f(g.meanBodyBytes)} B) | ${range(g.single)} | bare Fastify+TLS ${range(g.baseline)} | ${f(g.ratio, 2)} | ≥ 0.6 |
| gateway accepted records/s, one process per core | ${range(g.perCore)} | | ${f(g.perCoreRecordsPerSec / g.baselinePerSec, 2)} | |
| non-202 answers at maximum load | ${f(g.non2xxAtMax)} | | | 0 |
| gateway latency at 50 % of max: p50 / p99 / p99.9 | ${f(g.p50Ms)} / ${range(g.p99At50)} / ${f(g.p999Ms)} ms | bare Fastify+TLS at the same rate: p99 ${range(g.baselineP99At50)} ms | | p99 < 20 ms |
| … the same load as the gateway measured it: p50 / p99 from the request's arrival in Fastify to its answer; event-loop delay past its 10 ms timer p99 / max; main thread busy; the machine's CPU time stolen by its hypervisor | ${f(g.ownP50At50?.median, 1)} / ${range(g.ownP99At50, 1)} ms; ${range(g.eventLoopDelayP99At50, 1)} / ${range(g.eventLoopDelayMaxAt50, 1)} ms; ${f(100 * g.mainThreadBusyAt50?.median)} %; ${f(100 * g.machineStealAt50?.median, 1)} % | | | |
| gateway p99 at 80 % of max | ${range(g.p99At80)} ms | | | |
| batch endpoint accepted records/s into Kafka (SDK, ${f(b.flushAt)} per gzip batch, ${f(b.requestsInFlight)} in flight, ingester stopped) | ${range(b.batch)} | bare Fastify+TLS taking the same batches ${range(b.baseline)} | ${f(b.ratio, 2)} | ≥ 20,000/s |
| … p50 / p99 per batch; gateway CPU per record; gateway peak RSS | ${f(b.p50Ms)} / ${range(b.p99)} ms; ${f(b.gatewayCpuUsPerRecord)} µs; ${f(b.gatewayRssMb)} MB | | | RSS < 200 MB |
| batch endpoint, one gateway process per core (cluster), same generator | ${range(b.perCore)} | | ${f(b.perCoreRecordsPerS / b.baselineRecordsPerS, 2)} | ≥ 20,000/s |
| single endpoint, same gateway, same run (autocannon); gateway CPU per record | ${range(b.single)}; ${f(b.singleGatewayCpuUsPerRecord)} µs | | ${f(b.recordsPerS / b.singleRecordsPerS, 1)}× batch/single | |
| produce path records/s (gateway batcher, no HTTP) | ${range(p.batcher)} | kafkajs sendBatch ×1000 ${range(p.baseline)} | ${f(p.ratio, 2)} | ≥ 0.5 |
| ingester rows/s into ClickHouse (${f(i.records)} records, pre-filled ${i.prefillCodec ? `in ${i.prefillCodec} batches, as the gateway produces them` : 'uncompressed'}) | ${range(i.ingester)} | bare consumer + JSON.parse ${range(i.baseline)} | ${f(i.ratio, 2)} | |
| ingester rows/s against ClickHouse's own insert rate (same rows, ${c.format ?? 'JSONEachRow'}, ${f(c.batchRows)}-row batches, both tables) | ${range(i.ingester)}; CPU per record: ingester ${f(i.cpuUsPerRecord)} µs, ClickHouse ${f(i.clickhouseCpuUsPerRecord, 1)} µs (its merges included) | ClickHouse ceiling ${range(c.ceiling)}; ClickHouse CPU ${f(c.cpuUsPerRow, 1)} µs per row (merges included) | ${f(i.ratioToClickhouse, 2)} | ≥ 0.5 |
${i.enrichUsPerRecord ? `| enrich step CPU per record, priced from the price database (each provider and model resolved once) | ${range(i.enrichUsPerRecord, 2)} µs | the same records without prices ${range(i.enrichUnpricedUsPerRecord, 2)} µs; the database's calcPrice() per record ${range(i.calcPriceUsPerRecord, 2)} µs | ${f(i.enrichUsPerRecord.median - i.enrichUnpricedUsPerRecord.median, 2)} µs for pricing | |\n` : ''}| … ClickHouse's ceiling with the same rows as JSONEachRow (what the ingester sent before) | ${range(cj.ceiling)}; ClickHouse CPU ${f(cj.cpuUsPerRow, 1)} µs per row | | ${f(c.rowsPerS / cj.rowsPerS, 2)} RowBinary / JSONEachRow | |
| the look-up before each insert: ${f(lk.keysPerUnit)} keys (half stored in the last day), ${f(lk.events)} records stored over 30 days; rows read, ms | usage_event_keys: ${range(lk.keyTable?.rowsRead)} rows, ${range(lk.keyTable?.ms)} ms | usage_events itself (before): ${range(lk.table?.rowsRead)} rows, ${range(lk.table?.ms)} ms | ${f(lk.keyTable?.ms?.median / lk.table?.ms?.median, 2)} | |
${lk.newTimeOrdered ? `| … ${f(lk.keysPerUnit)} new keys (none stored) among the same records' keys, time-ordered as the SDK's UUIDv7s are (those records' keys too); rows read, ms | ${range(lk.newTimeOrdered.rowsRead)} rows, ${range(lk.newTimeOrdered.ms)} ms | random keys, as UUIDv4s are: ${range(lk.newRandom?.rowsRead)} rows, ${range(lk.newRandom?.ms)} ms | ${f(lk.newTimeOrdered.ms.median / lk.newRandom?.ms?.median, 2)} | |\n` : ''}| ingester rows/s / gateway maximum records/s (keeps up when ≥ 1) | ${f(i.rowsPerSec / g.recordsPerSec, 2)} | | | ≥ 1 |
${freshnessRates(fr)
  .map(
    (rate) =>
      `| freshness at ${f(rate)}/s: p50 / p99 (achieved ${f(fr[`achievedPerSecAt${rate}`])}/s) | ${f(fr[`p50MsAt${rate}`])} / ${range(fr[`p99At${rate}`])} ms | | | p99 < 1 s at half the sustained rate |\n`,
  )
  .join(
    '',
  )}| ingester load unit at 5,000/s: p50 (of which ClickHouse) / p99, rows per unit p50 | ${f(fr.unitMsP50At5000)} (${f(fr.unitClickhouseMsP50At5000)}) / ${f(fr.unitMsP99At5000)} ms, ${f(fr.unitRowsP50At5000)} rows | | | |
| revocation, 2 instances: p50 / p99 / max (${f(r.samples)} samples) | ${f(r.p50Ms, 1)} / ${f(r.p99Ms, 1)} / ${f(r.maxMs, 1)} ms | | | p99 < 100 ms, max < 500 ms |
| redaction (capture policy redact), µs per KiB: prose (mean text ${f(rd.meanTextBytes)} B) / dense with personal data / hostile runs | ${range(rd.prose, 1)} / ${range(rd.dense, 1)} / ${range(rd.hostile, 1)} | | | |
| … per record (prompt and response) | ${range(rd.perRecord, 1)} µs | schema validation of the same record ${range(rd.validation, 1)} µs | ${f(rd.ratioToValidation, 2)} | |
| peak RSS: gateway / ingester | ${range(m.gatewayRss)} / ${range(m.ingesterRss)} MB | | | < 200 / < 300 MB |
| scale-out, 6 partitions: 1 / 2 ingesters, rows/s (${f(so.records)} records, one run each) | ${f(so.p6Ingesters1RowsPerS)} / ${f(so.p6Ingesters2RowsPerS)} | | ${f(so.twoVsOneAt6, 2)} two vs one | |
| scale-out, 12 partitions: 1 / 2 ingesters, rows/s | ${f(so.p12Ingesters1RowsPerS)} / ${f(so.p12Ingesters2RowsPerS)} | | ${f(so.twoVsOneAt12, 2)} two vs one | |
| end to end sustained (batch endpoint, SDK, all co-located; ${f(e.stepSeconds)} s per step) | ${f(e.sustainedPerS)} records/s | | | ≥ 12,000/s |
| … CPU per record: gateway / ingester; peak RSS: gateway / ingester | ${f(e.gatewayCpuUsPerRecord)} / ${f(e.ingesterCpuUsPerRecord)} µs; ${f(e.gatewayRssMb)} / ${f(e.ingesterRssMb)} MB | | | < 200 / < 300 MB |

End to end, step by step (a step passes when at least 95 % of the offered rate is
achieved with nothing failed or dropped, the consumer lag stays within 5 s of records
over the step's second half, the topic drains after it, and ClickHouse holds and
counts every accepted record exactly once):

| offered/s | achieved/s | accepted | lost | counted twice | max lag / in the second half | drained in | gateway memory at its peak | ingester memory at its peak | peak RSS (VmHWM), the step / its drain: gateway; ingester | result |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${ladder || '| not measured | | | | | | | | | | |'}
${
  cpuLadder
    ? `
Where the machine's CPU went, step by step (µs per accepted record over the step and its
drain, from /proc; "steal" is the time the machine's virtual CPUs wanted to run while the
hypervisor ran something else; "rest" is the machine's busy time less the processes named
and the steal: the load generator, the benchmark itself and the machine's own work; 2
cores are 100 %):

| offered/s | gateway | ingester | ClickHouse | Kafka | Redis | registry | steal | rest | all | machine busy |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${cpuLadder}
`
    : ''
}${
    threadLadder
      ? `
The same steps, the gateway's, the ingester's and ClickHouse's CPU by what their threads did
(µs per accepted record, from /proc/<pid>/task; "V8" is V8's helper threads: the collector's
parallel and concurrent work, and compilation; "pool" is libuv's threads: zlib, crypto;
"other" the rest, ended threads included; ClickHouse's "merges" are its background pools,
"the rest" its inserts with their views, the ingester's look-ups and everything else):

| offered/s | gateway main | gateway V8 | gateway pool | gateway other | ingester main | ingester V8 | ingester pool | ingester other | ClickHouse merges | ClickHouse rest |
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
${threadLadder}
`
      : ''
  }${
    partLadder
      ? `
The same steps, ClickHouse's work on each table's parts (its part log: its threads' wall
time writing the parts of inserts, the views' tables' included, and merging them; a share
of the step's part work, then the seconds of new parts + merges; "rollups" are every view's
table but the copy by user and the key index; merges finishing in a step count there):

| offered/s | ${PART_GROUPS.join(' | ')} |
| --- | ${PART_GROUPS.map(() => '---').join(' | ')} |
${partLadder}
`
      : ''
  }${floor}
Kafka codecs of the gateway's record batches (\`KAFKA_COMPRESSION\`; the SDK's batch load into one
gateway, then one ingester loading the whole topic from its start; the pipeline's rate with a
codec is at most the lower of the two):

| codec | gateway accepted records/s | gateway CPU per record | broker bytes per record | ingester rows/s | ingester CPU per record |
| --- | --- | --- | --- | --- | --- |
${codecTable || '| not measured | | | | | |'}

Hostile requests (one gateway; each attack sent ${isQuick(data) ? 3 : 10} times, the unknown key 400 times, 50
stubborn connections at once; a probe posts a valid record every 50 ms from its own
connections; beside each, a normal gzip batch of about the same wire size, measured the
same way; docs/security.md):

| attack | on the wire | answered | gateway CPU per request | peak RSS | probe's longest wait | normal batch of the same size: CPU, peak RSS, probe |
| --- | --- | --- | --- | --- | --- | --- |
${hostileRows || '| not measured | | | | | | |'}

Gateway RSS ${f(h.rssBeforeMb)} MB before the attacks (after a warm-up of normal batches), ${f(h.rssAfterAttacksMb)} MB after them, ${f(h.rssSettledMb)} MB ${f(h.settleSeconds)} s later (budget: back within 50 MB within a minute).

Analytics at scale (\`--only analytics\`; docs/analytics-api.md): ${f(an.first)} then ${f(an.events)} usage events generated inside ClickHouse (30 days, 100,000 users, 50 models, 48 keys, 2 % errors; ${f(an.firstGenerateSeconds)} s and ${f(an.restGenerateSeconds)} s more, every view filling its table except usage_rollup_minute's, which the API no longer reads${an.firstDayBuildSeconds !== undefined ? `; the day rollups built from the hours by their job (${f(an.firstDayBuildSeconds)} s and ${f(an.fullDayBuildSeconds)} s; today's read from its hours, as on a live installation)` : ''}; then every rollup the queries read (the minute ones and the errors per minute included) and the copy ordered by user merged into one part per monthly partition, at both sizes alike, so that they differ in rows and not in how far the background merges had got: ${f(an.firstSettle?.seconds)} s and ${f(an.fullSettle?.seconds)} s, their rows ${f(an.fullSettle?.rowsBefore)} → ${f(an.fullSettle?.rowsAfter)} and parts ${f(an.fullSettle?.partsBefore)} → ${f(an.fullSettle?.partsAfter)} at the full size; then the background merges the generation left in usage_events waited for until none ran for 20 s: ${f(an.firstSettle?.mergesWaitSeconds)} s and ${f(an.fullSettle?.mergesWaitSeconds)} s), ${an.timing === 'interleaved' ? `the tenth kept as it was, its parts linked into a database of its own (${f(an.tenthLinkSeconds, 1)} s) answered by an admin of its own, and the two sizes timed side by side once the full size had settled: each request asked of both in turn` : 'then each request asked of the admin service'} once (the first answer's time, before its pages are in memory) and ${f(an.timedAnswers ?? 5)} times more${an.timing === 'interleaved' ? ', the two sizes alternating which goes first' : ''}: p50 / p95 of those answers' times, ClickHouse's own time for them (p50 of query_duration_ms), what ClickHouse read for the last (system.query_log, by the request's id), and the ratios of the p50s and of the p95s at the two sizes:

| request | at ${f(an.first)}: first; p50 / p95 | rows read | at ${f(an.events)}: first; p50 / p95 | rows read | bytes read | ClickHouse p50 at each | ratio p50 / p95 |
| --- | --- | --- | --- | --- | --- | --- | --- |
${analyticsRows || '| not measured | | | | | | | |'}

At ${f(an.events)} events: one user's erasure ${f(an.erasureSeconds, 1)} s (${an.erasureState ?? 'n/a'}), one day's re-costing (${f(an.recostRows)} records) ${f(an.recostSeconds, 1)} s${an.removalSeconds === undefined ? '' : `, ${f(an.removalRecords)} records removed from history by event key ${f(an.removalSeconds, 1)} s (${an.removalState})`}. Each dashboard page over the last 30 days in Chromium, from choosing it to its charts drawn${an.pagesBackground ? ` (the median of ${(an.pages?.[0]?.each ?? []).length} rounds, each in brackets; as they began ClickHouse was running ${f(an.pagesBackground.merges)} merges in that database, mutations not done: ${f(an.pagesBackground.mutations)}; as they ended ${f(an.pagesBackgroundAfter?.merges)} and ${f(an.pagesBackgroundAfter?.mutations)})` : ''}:

| page | time | charts | error messages |
| --- | --- | --- | --- |
${pageRows || '| not measured | | | |'}

The tables at ${f(an.events)} events:

| table | rows | on disk |
| --- | --- | --- |
${tableRows || '| not measured | | |'}

Kafka clients (\`--only kafkaClients\`): the patched kafkajs the services run on,
@platformatic/kafka (pure TypeScript, no native build) and @confluentinc/kafka-javascript
(librdkafka, KafkaJS-compatible API; built by the bench against Debian's libraries), in
one process, on the same broker, with the same
${f(kc.records)} records (mean value ${f(kc.meanValueBytes)} B): produced as the gateway
produces (batches of 1,000, acks from all replicas, idempotent, snappy, murmur2
partitioning) with one batch in flight and with three; read as the ingester reads
(eachBatch, each message's wire header and JSON parsed) from the same snappy topic. CPU
is the process's per record, the client's own threads included${kc.error ? `. librdkafka not compared in this run: ${kc.error}` : ''}:

| client | produce records/s | CPU per record | three batches in flight | CPU per record | read records/s | CPU per record |
| --- | --- | --- | --- | --- | --- | --- |
${clientRows || '| not measured | | | | | | |'}

`;
}

const isQuick = (data: Output) => data.mode === 'quick';

/** The command line a run was made with, as it appears in BENCHMARKS.md. */
function flags(data: Output): string {
  const list = [data.mode === 'quick' ? '--quick' : '', Array.isArray(data.sections) ? `--only ${data.sections.join(',')}` : ''].filter(
    Boolean,
  );
  return list.length > 0 ? ` -- ${list.join(' ')}` : '';
}

/** The sections a partial run kept from a run on another machine, by that machine: compare them with each other only. */
function otherMachines(data: Output): string {
  const other = new Map<string, string[]>();
  for (const [name, cpu] of Object.entries((data.sectionMachines ?? {}) as Record<string, string>)) {
    if (cpu !== data.machine.cpu) other.set(cpu, [...(other.get(cpu) ?? []), name]);
  }
  return [...other]
    .map(
      ([cpu, names]) =>
        `\nSections measured on another machine (${cpu}): ${names.join(', ')}; compare their figures with each other, not with the rest.`,
    )
    .join('');
}

/**
 * The sections a partial run kept from earlier runs, with when each was measured: a
 * figure setting two sections side by side (the machine's limit, a ratio between
 * sections) joins two runs when their dates differ.
 */
export function earlierRuns(data: Output): string {
  if (!Array.isArray(data.sections)) return '';
  const dates = (data.sectionDates ?? {}) as Record<string, string>;
  const ran = new Set<string>(data.sections as string[]);
  const kept = Object.keys((data.sectionMachines ?? {}) as Record<string, string>).filter((name) => !ran.has(name));
  if (kept.length === 0) return '';
  const when = (name: string) => {
    const date = dates[name];
    return date ? `${date.slice(0, 10)} ${date.slice(11, 16)} UTC` : 'date not recorded';
  };
  const listed = kept
    .sort((a, b) => (dates[b] ?? '').localeCompare(dates[a] ?? ''))
    .map((name) => `${name} (${when(name)})`)
    .join(', ');
  return `\nKept from earlier runs: ${listed}. A figure that sets two sections side by side (the machine's limit, a ratio between sections) joins their runs.`;
}

/** BENCHMARKS.md as bench/results/latest.json gives it. */
export function renderFromFiles(): string {
  const data = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as Output;
  return renderMarkdown(data);
}

// `npm run bench:render`: rewrites BENCHMARKS.md from the figures, no run.
if (import.meta.url === `file://${process.argv[1]}`) {
  fs.writeFileSync(path.join(root, 'BENCHMARKS.md'), renderFromFiles());
  console.log('wrote BENCHMARKS.md');
}

/** A figure as the report writes it: whole, with thousands separated; n/a when not a number. */
function fmt(value: unknown, digits = 0): string {
  return typeof value === 'number' && Number.isFinite(value)
    ? value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : 'n/a';
}

/** The offered rates the freshness section measured (its p99MsAt<rate> figures), lowest first. */
export function freshnessRates(fr: Record<string, unknown> | undefined): number[] {
  return Object.keys(fr ?? {})
    .map((name) => /^p99MsAt(\d+)$/.exec(name)?.[1])
    .filter((rate): rate is string => rate !== undefined)
    .map(Number)
    .sort((a, b) => a - b);
}

/**
 * The freshness target's row: the p99 at the lowest measured rate at least half the
 * sustained rate end to end, held (95 % of it achieved, as a step of the ladder); none
 * such: not met, the highest shown.
 */
export function freshnessTarget(
  fr: Record<string, any> | undefined,
  sustainedPerS: number | undefined,
): [string, string, boolean | undefined] {
  const target = 'freshness p99 < 1,000 ms at half the sustained rate or more';
  const rates = freshnessRates(fr);
  if (!fr || rates.length === 0) return [target, 'not measured', undefined];
  const half = (sustainedPerS ?? Number.NaN) / 2;
  // A rate counts as offered when at least 95 % of it was achieved (as a step of the ladder does).
  const held = (r: number) => {
    const achieved = Number(fr[`achievedPerSecAt${r}`]);
    return achieved >= 0.95 * r ? r : achieved;
  };
  const rate = rates.find((r) => held(r) >= half) ?? rates.at(-1)!;
  const p99 = Number(fr[`p99MsAt${rate}`]);
  const achieved = Number(fr[`achievedPerSecAt${rate}`]);
  const measured = `${fmt(p99)} ms at ${fmt(achieved)}/s achieved (half the sustained: ${fmt(half)}/s)`;
  return [target, measured, Number.isFinite(half) ? p99 < 1000 && held(rate) >= half : undefined];
}
