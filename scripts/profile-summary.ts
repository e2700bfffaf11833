// npm run profile:summary -- <file.cpuprofile|file.heapprofile> [--title T] [--per N --unit records] [--top 25]
// Turns a V8 CPU profile (node --cpu-prof) into the Markdown summary kept in
// bench/profiles/: where the time went by area (garbage collector, idle, each
// dependency, the project's own files) and the functions with the most self time
// and the most total time; and a sampling heap profile (scripts/allocation-sampler.mjs)
// into where the bytes were allocated, by area and by function. The raw profile is large and machine-specific; the
// summary is what the benchmarks' reading cites.
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export interface ProfileSummary {
  totalMs: number;
  areas: { area: string; ms: number }[];
  self: { name: string; ms: number }[];
  total: { name: string; ms: number }[];
}

/** Where a frame belongs: a dependency (by package name), node's internals, V8's pseudo-frames, or a project file. */
export function areaOf(frame: ProfileNode['callFrame']): string {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'garbage collector';
    if (functionName === '(idle)') return 'idle (waiting for I/O)';
    if (functionName === '(program)') return 'V8 and native (program)';
    return `native: ${functionName || '(anonymous)'}`;
  }
  const modules = url.lastIndexOf('node_modules/');
  if (modules >= 0) {
    const rest = url.slice(modules + 'node_modules/'.length).split('/');
    return rest[0]!.startsWith('@') ? `${rest[0]}/${rest[1]}` : rest[0]!;
  }
  if (url.startsWith('node:')) return `node: ${url.slice(5).split('/')[0]}`;
  const project = url.match(/(services|scripts|schemas|clients)\/.*$/);
  return project ? project[0].replace(/\.ts$/, '.ts') : path.basename(url);
}

function nameOf(frame: ProfileNode['callFrame']): string {
  const where = frame.url ? `${areaOf(frame)}:${frame.lineNumber + 1}` : '';
  return `${frame.functionName || '(anonymous)'}${where ? ` (${where})` : ''}`;
}

/** The `limit` largest amounts of `map`, largest first. */
function largestFirst(map: Map<string, number>, limit: number): [string, number][] {
  return [...map.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
}

export function summarise(profile: CpuProfile, top = 25): ProfileSummary {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const selfUs = new Map<number, number>();
  for (let i = 0; i < profile.samples.length; i++) {
    const id = profile.samples[i]!;
    selfUs.set(id, (selfUs.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
  }
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);

  const areas = new Map<string, number>();
  const self = new Map<string, number>();
  const total = new Map<string, number>();
  let totalUs = 0;
  for (const [id, us] of selfUs) {
    const node = byId.get(id);
    if (!node) continue;
    totalUs += us;
    const area = areaOf(node.callFrame);
    areas.set(area, (areas.get(area) ?? 0) + us);
    const name = nameOf(node.callFrame);
    self.set(name, (self.get(name) ?? 0) + us);
    // Total time: every distinct function on the stack of this sample, once.
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const frame = byId.get(at)!.callFrame;
      if (frame.functionName === '(root)') continue;
      const stackName = nameOf(frame);
      if (seen.has(stackName)) continue;
      seen.add(stackName);
      total.set(stackName, (total.get(stackName) ?? 0) + us);
    }
  }
  return {
    totalMs: totalUs / 1000,
    areas: largestFirst(areas, 20).map(([area, us]) => ({ area, ms: us / 1000 })),
    self: largestFirst(self, top).map(([name, us]) => ({ name, ms: us / 1000 })),
    total: largestFirst(total, top).map(([name, us]) => ({ name, ms: us / 1000 })),
  };
}

/** How a summary's amounts are written: their column, each amount, and each amount per unit (its column named by the unit). */
interface Amounts {
  header: string;
  format(value: number): string;
  perUnit: { header: string; format(value: number, count: number): string };
}

/** A summary in Markdown: its title and first line, then tables of labelled amounts, each with its share of `total` and, given a count, per unit. */
function renderTables(
  title: string,
  intro: string,
  total: number,
  amounts: Amounts,
  per: { count: number; unit: string } | undefined,
  tables: { heading: string; first: string; rows: { label: string; value: number }[] }[],
): string {
  const unit = per?.unit.replace(/s$/, '');
  const head = (first: string) =>
    `| ${first} | ${amounts.header} | % |${per ? ` ${amounts.perUnit.header} ${unit} |` : ''}\n|---|---:|---:|${per ? '---:|' : ''}`;
  const line = ({ label, value }: { label: string; value: number }) =>
    `| ${label.replace(/\|/g, '\\|')} | ${amounts.format(value)} | ${((value / total) * 100).toFixed(1)} |${
      per ? ` ${amounts.perUnit.format(value, per.count)} |` : ''
    }`;
  return [
    `# ${title}`,
    '',
    intro,
    '',
    ...tables.flatMap(({ heading, first, rows }) => [`## ${heading}`, '', head(first), rows.map(line).join('\n'), '']),
  ].join('\n');
}

export function renderSummary(summary: ProfileSummary, title: string, per?: { count: number; unit: string }): string {
  const labelled = (list: { area?: string; name?: string; ms: number }[]) =>
    list.map(({ area, name, ms }) => ({ label: (area ?? name)!, value: ms }));
  return renderTables(
    title,
    `Sampled ${summary.totalMs.toFixed(0)} ms${per ? ` while ${per.count} ${per.unit} went through` : ''}.`,
    summary.totalMs,
    { header: 'ms', format: (ms) => ms.toFixed(0), perUnit: { header: 'µs per', format: (ms, count) => ((ms * 1000) / count).toFixed(1) } },
    per,
    [
      { heading: 'By area (self time)', first: 'area', rows: labelled(summary.areas) },
      { heading: 'Functions by self time', first: 'function (area:line)', rows: labelled(summary.self) },
      { heading: 'Functions by total time (self and callees)', first: 'function (area:line)', rows: labelled(summary.total) },
    ],
  );
}

/** A sampling heap profile (V8's HeapProfiler, as scripts/allocation-sampler.mjs writes it): bytes sampled at each call site. */
interface HeapProfileNode {
  callFrame: ProfileNode['callFrame'];
  selfSize: number;
  children?: HeapProfileNode[];
}

export interface HeapProfile {
  head: HeapProfileNode;
}

export interface AllocationSummary {
  totalBytes: number;
  areas: { area: string; bytes: number }[];
  self: { name: string; bytes: number }[];
}

/** Where the sampled bytes were allocated: by area (as areaOf) and by function (its own allocations, not its callees'). */
export function summariseAllocations(profile: HeapProfile, top = 25): AllocationSummary {
  const areas = new Map<string, number>();
  const self = new Map<string, number>();
  let totalBytes = 0;
  const pending: HeapProfileNode[] = [profile.head];
  for (let node = pending.pop(); node !== undefined; node = pending.pop()) {
    pending.push(...(node.children ?? []));
    if (node.selfSize === 0) continue;
    totalBytes += node.selfSize;
    const area = areaOf(node.callFrame);
    areas.set(area, (areas.get(area) ?? 0) + node.selfSize);
    const name = nameOf(node.callFrame);
    self.set(name, (self.get(name) ?? 0) + node.selfSize);
  }
  return {
    totalBytes,
    areas: largestFirst(areas, 20).map(([area, bytes]) => ({ area, bytes })),
    self: largestFirst(self, top).map(([name, bytes]) => ({ name, bytes })),
  };
}

export function renderAllocationSummary(summary: AllocationSummary, title: string, per?: { count: number; unit: string }): string {
  const intro = `Allocated ${(summary.totalBytes / 1e6).toFixed(1)} MB as sampled (V8's sampling heap profiler, objects freed by the collector counted)${
    per
      ? ` while ${per.count} ${per.unit} went through: ${(summary.totalBytes / per.count).toFixed(0)} bytes per ${per.unit.replace(/s$/, '')}`
      : ''
  }.`;
  return renderTables(
    title,
    intro,
    summary.totalBytes,
    {
      header: 'MB',
      format: (bytes) => (bytes / 1e6).toFixed(1),
      perUnit: { header: 'bytes per', format: (bytes, count) => (bytes / count).toFixed(0) },
    },
    per,
    [
      { heading: 'By area', first: 'area', rows: summary.areas.map(({ area, bytes }) => ({ label: area, value: bytes })) },
      {
        heading: 'Functions by what they allocate themselves',
        first: 'function (area:line)',
        rows: summary.self.map(({ name, bytes }) => ({ label: name, value: bytes })),
      },
    ],
  );
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('profile-summary.ts')) {
  const options = new Command('profile-summary')
    .argument('<profile>', 'a .cpuprofile written by node --cpu-prof, or a .heapprofile written by scripts/allocation-sampler.mjs')
    .option('--title <title>', 'heading of the summary', 'CPU profile')
    .option('--per <count>', 'divide by this many units (records) for a per-unit column')
    .option('--unit <unit>', 'what --per counts', 'records')
    .option('--top <n>', 'functions listed', '25')
    .option('--out <file>', 'write here instead of stdout')
    .parse(process.argv);
  const opts = options.opts<{ title: string; per?: string; unit: string; top: string; out?: string }>();
  const file = options.args[0]!;
  const per = opts.per ? { count: Number(opts.per), unit: opts.unit } : undefined;
  const parsed = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
  const text = file.endsWith('.heapprofile')
    ? renderAllocationSummary(summariseAllocations(parsed as HeapProfile, Number(opts.top)), opts.title, per)
    : renderSummary(summarise(parsed as CpuProfile, Number(opts.top)), opts.title, per);
  if (opts.out) fs.writeFileSync(opts.out, text);
  else process.stdout.write(text);
}
