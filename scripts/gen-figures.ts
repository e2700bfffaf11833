// Sets every benchmark figure quoted in the repository's Markdown from
// bench/results/latest.json (scripts/lib/figures.ts says how a figure is marked), so a
// doc cannot quote a figure the benchmarks no longer give.
//
//   npm run gen:figures               rewrite the figures
//   npm run gen:figures -- --check    (in npm test) exit 1 when a figure differs from the results
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { format, resolveConfig } from 'prettier';
import { renderFigures } from './lib/figures.js';

const { check } = new Command('gen:figures')
  .description('Set the benchmark figures quoted in the Markdown from bench/results/latest.json')
  .option('--check', 'write nothing; exit 1 when a quoted figure differs from the results')
  .parse(process.argv)
  .opts<{ check?: boolean }>();

const root = path.join(import.meta.dirname, '..');
const results = JSON.parse(fs.readFileSync(path.join(root, 'bench/results/latest.json'), 'utf8')) as unknown;
const files = execFileSync('git', ['ls-files', '*.md'], { cwd: root, encoding: 'utf8' })
  .split('\n')
  .filter((file) => file && fs.existsSync(path.join(root, file)));
for (const file of files) {
  const text = fs.readFileSync(path.join(root, file), 'utf8');
  if (!text.includes('<!-- bench:')) continue;
  // Formatted again: a figure of another width realigns its table.
  const target = path.join(root, file);
  const rendered = await format(renderFigures(text, results, file), { ...(await resolveConfig(target)), filepath: target });
  if (rendered === text) continue;
  if (check) {
    console.error(`${file} quotes figures that differ from bench/results/latest.json: run npm run gen:figures`);
    process.exitCode = 1;
  } else {
    fs.writeFileSync(path.join(root, file), rendered);
    console.log(`wrote ${file}`);
  }
}
