// Every npm script that runs a script of this folder answers --help with its usage
// and does nothing else: exit 0, no file of the repository written, no service started.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const root = path.join(import.meta.dirname, '..');
const scripts = (JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
const entries = Object.entries(scripts)
  .map(([name, command]) => [name, /\bscripts\/[\w-]+\.ts\b/.exec(command)?.[0]] as const)
  .filter((entry): entry is readonly [string, string] => entry[1] !== undefined);
const tsx = path.join(root, 'node_modules/.bin/tsx');
const tree = () => execFileSync('git', ['status', '--porcelain', '--untracked-files=all'], { cwd: root, encoding: 'utf8' });

describe('npm run <script> -- --help', () => {
  it('finds the scripts', () => {
    expect(entries.map(([name]) => name)).toEqual(expect.arrayContaining(['start', 'stack', 'keys', 'migrate', 'bench', 'gen:types']));
  });

  it.each(entries)('%s answers --help and does nothing else', (name, file) => {
    const before = tree();
    const answer = spawnSync(tsx, ['--conditions=otm-source', file, '--help'], {
      cwd: root,
      encoding: 'utf8',
      timeout: 30_000,
      // Nowhere to connect: a script that reached for a service would fail, not hang.
      env: { ...process.env, KAFKA_BROKERS: '127.0.0.1:1', REDIS_URL: 'redis://127.0.0.1:1', CLICKHOUSE_URL: 'http://127.0.0.1:1' },
    });
    expect(answer.status, `${name}: ${answer.stderr}`).toBe(0);
    expect(answer.stdout).toMatch(/^Usage: /m);
    expect(tree(), name).toBe(before);
  });
});
