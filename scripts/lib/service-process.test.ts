import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { quote } from 'shell-quote';
import { serviceAllocatorEnv, serviceNodeFlags, serviceNodeOptions, withMemoryFlags } from './service-process.js';
import { projectRoot } from './project-root.js';

describe('withMemoryFlags', () => {
  it("gives the ingester its V8 flags and glibc's fixed mmap threshold", () => {
    const env = withMemoryFlags('ingester', { PATH: '/bin' });
    expect(env.NODE_OPTIONS).toBe('--max-old-space-size=256 --max-semi-space-size=8');
    expect(env.MALLOC_MMAP_THRESHOLD_).toBe('131072');
    expect(env.PATH).toBe('/bin');
  });

  it('gives the gateway, alone or one process per core, the same threshold', () => {
    for (const entry of ['gateway', 'gateway-cluster'] as const) {
      expect(withMemoryFlags(entry, {}).MALLOC_MMAP_THRESHOLD_).toBe('131072');
    }
  });

  it('leaves the allocator of the admin service alone', () => {
    expect(withMemoryFlags('admin', {}).MALLOC_MMAP_THRESHOLD_).toBeUndefined();
  });

  it('keeps what the environment sets already', () => {
    const env = withMemoryFlags('ingester', { NODE_OPTIONS: '--max-old-space-size=512', MALLOC_MMAP_THRESHOLD_: '1048576' });
    expect(env.NODE_OPTIONS).toBe('--max-old-space-size=512 --max-semi-space-size=8');
    expect(env.MALLOC_MMAP_THRESHOLD_).toBe('1048576');
  });
});

// The same settings are written in docker-compose.yml and the Helm chart (a container
// starts the service itself, not through the launcher): the three must not drift apart.
describe('the memory settings in docker-compose.yml and the Helm chart', () => {
  const compose = parse(fs.readFileSync(path.join(projectRoot, 'docker-compose.yml'), 'utf8'), { merge: true }) as {
    services: Record<string, { environment?: Record<string, string> }>;
  };
  /** The NODE_OPTIONS and MALLOC_* entries of a Helm template's container env. */
  const helmEnv = (service: string) => {
    const text = fs.readFileSync(path.join(projectRoot, 'deploy/helm/otm-telemetry/templates', `${service}.yaml`), 'utf8');
    const found: Record<string, string> = {};
    for (const match of text.matchAll(/- name: (NODE_OPTIONS|MALLOC_\w+)\s+value: "([^"]*)"/g)) found[match[1]!] = match[2]!;
    return found;
  };
  const expected = (service: 'gateway' | 'ingester' | 'admin') => ({
    NODE_OPTIONS: serviceNodeOptions[service].join(' '),
    ...serviceAllocatorEnv[service],
  });

  for (const service of ['gateway', 'ingester', 'admin'] as const) {
    it(`${service}: the launchers' V8 flags and allocator settings, no more and no fewer`, () => {
      const environment = compose.services[service]!.environment!;
      const memory = Object.fromEntries(
        Object.entries(environment).filter(([name]) => name === 'NODE_OPTIONS' || name.startsWith('MALLOC_')),
      );
      expect(memory).toEqual(expected(service));
      expect(helmEnv(service)).toEqual(expected(service));
    });
  }
});

describe('serviceNodeFlags', () => {
  it('keeps a quoted path with a space as one flag', () => {
    expect(serviceNodeFlags(`--cpu-prof '--cpu-prof-dir=/tmp/a b' --import "/tmp/c d/e.mjs"`)).toEqual([
      '--cpu-prof',
      '--cpu-prof-dir=/tmp/a b',
      '--import',
      '/tmp/c d/e.mjs',
    ]);
  });

  it('reads back what the bench writes', () => {
    const flags = ['--cpu-prof', '--cpu-prof-dir=/tmp/profiles of a run', '--import', '/tmp/x/sampler.mjs'];
    expect(serviceNodeFlags(quote(flags))).toEqual(flags);
  });

  it('gives nothing for no flags, and keeps a dollar sign as written', () => {
    expect(serviceNodeFlags(undefined)).toEqual([]);
    expect(serviceNodeFlags('  ')).toEqual([]);
    expect(serviceNodeFlags('--title=$HOME')).toEqual(['--title=$HOME']);
  });
});
