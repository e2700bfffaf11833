// Writes the figures down: bench/results/latest.json, BENCHMARKS.md (rendered from
// them; it links the history, bench/analysis.md) and, with --profile or --allocations,
// one summary per profiled service.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClickHouse, serverVersion } from '@otm/shared/clickhouse';
import { renderAllocationSummary, renderSummary, summarise, summariseAllocations, type HeapProfile } from '../profile-summary.js';
import { only, quick, runs, addresses, root, log, profiles, results, previous } from './context.js';
import { renderMarkdown, sectionDates, sectionMachines, type Machine, type Output } from './render.js';

export async function writeReport(ran: readonly string[]): Promise<void> {
  const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
  const [chMajor, chMinor] = await serverVersion(clickhouse);
  await clickhouse.close();
  const pom = fs.readFileSync(path.join(root, 'deploy/maven/pom.xml'), 'utf8');
  const machine: Machine = {
    cores: os.availableParallelism(),
    memoryGiB: Math.round(os.totalmem() / 2 ** 30),
    cpu: os.cpus()[0]?.model ?? 'unknown',
    node: process.version,
    kafka: pom.match(/<kafka.version>([^<]+)/)?.[1] ?? '?',
    clickhouse: `${chMajor}.${chMinor}`,
  };

  // --profile and --allocations: one Markdown summary per profiled service and kind (the
  // raw profiles stay in the stack folder).
  for (const profile of profiles) {
    const per = { count: profile.records(), unit: 'records' };
    const title = `${profile.title}, ${new Date().toISOString().slice(0, 10)}`;
    const cpu = largest(profile.dir, '.cpuprofile');
    if (cpu) writeProfile(`${profile.name}.md`, renderSummary(summarise(JSON.parse(fs.readFileSync(cpu, 'utf8')), 30), title, per));
    const heap = largest(profile.dir, '.heapprofile');
    if (heap) {
      const summary = summariseAllocations(JSON.parse(fs.readFileSync(heap, 'utf8')) as HeapProfile, 30);
      writeProfile(`${profile.name}-allocations.md`, renderAllocationSummary(summary, `Allocations: ${title}`, per));
    }
  }

  const date = new Date().toISOString();
  const output: Output = {
    date,
    mode: quick ? 'quick' : 'full',
    // With --only, the other sections' figures are the previous run's.
    sections: only ? [...only] : 'all',
    runs,
    machine,
    sectionMachines: sectionMachines(ran, machine.cpu, previous),
    sectionDates: sectionDates(ran, date, previous),
    ...results,
  };
  fs.mkdirSync(path.join(root, 'bench/results'), { recursive: true });
  fs.writeFileSync(path.join(root, 'bench/results/latest.json'), `${JSON.stringify(output, null, 2)}\n`);
  fs.writeFileSync(path.join(root, 'BENCHMARKS.md'), renderMarkdown(output));
  log('wrote bench/results/latest.json and BENCHMARKS.md');
}

/** The largest file of `dir` ending in `extension`: the main thread's profile (workers, as pino's transport, write small ones). */
function largest(dir: string, extension: string): string | undefined {
  const files = fs.readdirSync(dir).filter((file) => file.endsWith(extension));
  return files.map((file) => path.join(dir, file)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
}

function writeProfile(name: string, text: string): void {
  const out = path.join(root, 'bench/profiles', name);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, text);
  log(`wrote ${path.relative(root, out)}`);
}
