// npm run profile:summary -- <file.cpuprofile> [--title T] [--per N --unit records] [--top 25]
// Turns a V8 CPU profile (node --cpu-prof) into the Markdown summary kept in
// bench/profiles/: where the time went by area (garbage collector, idle, each
// dependency, the project's own files) and the functions with the most self time
// and the most total time. The raw profile is large and machine-specific; the
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
  const sorted = (map: Map<string, number>, key: 'area' | 'name', limit: number) =>
    [...map.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, limit)
      .map(([label, us]) => ({ [key]: label, ms: us / 1000 }) as { area: string; name: string; ms: number });
  return {
    totalMs: totalUs / 1000,
    areas: sorted(areas, 'area', 20),
    self: sorted(self, 'name', top),
    total: sorted(total, 'name', top),
  };
}

export function renderSummary(summary: ProfileSummary, title: string, per?: { count: number; unit: string }): string {
  const pct = (ms: number) => ((ms / summary.totalMs) * 100).toFixed(1);
  const perUnit = (ms: number) => (per ? ` ${((ms * 1000) / per.count).toFixed(1)} |` : '');
  const head = (first: string) =>
    `| ${first} | ms | % |${per ? ` µs per ${per.unit.replace(/s$/, '')} |` : ''}\n|---|---:|---:|${per ? '---:|' : ''}`;
  const rows = (list: { label: string; ms: number }[]) =>
    list.map(({ label, ms }) => `| ${label.replace(/\|/g, '\\|')} | ${ms.toFixed(0)} | ${pct(ms)} |${perUnit(ms)}`).join('\n');
  return [
    `# ${title}`,
    '',
    `Sampled ${summary.totalMs.toFixed(0)} ms${per ? ` while ${per.count} ${per.unit} went through` : ''}.`,
    '',
    '## By area (self time)',
    '',
    head('area'),
    rows(summary.areas.map(({ area, ms }) => ({ label: area, ms }))),
    '',
    '## Functions by self time',
    '',
    head('function (area:line)'),
    rows(summary.self.map(({ name, ms }) => ({ label: name, ms }))),
    '',
    '## Functions by total time (self and callees)',
    '',
    head('function (area:line)'),
    rows(summary.total.map(({ name, ms }) => ({ label: name, ms }))),
    '',
  ].join('\n');
}

if (import.meta.url === `file://${process.argv[1]}` || process.argv[1]?.endsWith('profile-summary.ts')) {
  const options = new Command('profile-summary')
    .argument('<profile>', 'a .cpuprofile written by node --cpu-prof')
    .option('--title <title>', 'heading of the summary', 'CPU profile')
    .option('--per <count>', 'divide by this many units (records) for a per-unit column')
    .option('--unit <unit>', 'what --per counts', 'records')
    .option('--top <n>', 'functions listed', '25')
    .option('--out <file>', 'write here instead of stdout')
    .parse(process.argv);
  const opts = options.opts<{ title: string; per?: string; unit: string; top: string; out?: string }>();
  const profile = JSON.parse(fs.readFileSync(options.args[0]!, 'utf8')) as CpuProfile;
  const text = renderSummary(
    summarise(profile, Number(opts.top)),
    opts.title,
    opts.per ? { count: Number(opts.per), unit: opts.unit } : undefined,
  );
  if (opts.out) fs.writeFileSync(opts.out, text);
  else process.stdout.write(text);
}
