// Writes the figures down: bench/results/latest.json, BENCHMARKS.md (rendered from
// them; it links the history, bench/analysis.md) and, with --profile, one
// summary per profiled service.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createClickHouse, serverVersion } from '@otm/shared/clickhouse';
import { renderSummary, summarise } from '../profile-summary.js';
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

  // --profile: one Markdown summary per profiled service (the raw profiles stay in the stack folder).
  for (const profile of profiles) {
    const files = fs.readdirSync(profile.dir).filter((file) => file.endsWith('.cpuprofile'));
    // The main thread's profile is the largest; workers (pino's transport) write small ones.
    const main = files.map((file) => path.join(profile.dir, file)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
    if (!main) continue;
    const summary = summarise(JSON.parse(fs.readFileSync(main, 'utf8')), 30);
    const out = path.join(root, 'bench/profiles', `${profile.name}.md`);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(
      out,
      renderSummary(summary, `${profile.title}, ${new Date().toISOString().slice(0, 10)}`, { count: profile.records(), unit: 'records' }),
    );
    log(`wrote ${path.relative(root, out)}`);
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
