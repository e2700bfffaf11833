// The container path in the default test run (docs/containers.md), as a representative
// subset of `npm run test:containers`: the project's Docker engine comes up (installed
// from Debian when missing), every image is built without an image registry, and the
// user module's test runs through testcontainers on them (records sent with the SDK
// to the gateway image, read back from the topic and from ClickHouse), docker-compose.yml
// runs the whole stack from them, and records of every codec, zstd included, load
// from the containers' Kafka.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import { promisify, stripVTControlCharacters } from 'node:util';
import { describe, expect, it } from 'vitest';
import { dockerPaths } from '../scripts/lib/docker-engine.js';
import { projectRoot } from './helpers/stack.js';

const run = promisify(execFile);
const tail = (text: string, lines: number) => text.split('\n').slice(-lines).join('\n');

/** Runs one npm script, timed; a failure carries the end of its output and of the engine's log. */
async function npm(args: string[], timeoutMs: number): Promise<{ stdout: string }> {
  const started = Date.now();
  const seconds = () => ((Date.now() - started) / 1000).toFixed(0);
  try {
    const result = await run('npm', args, {
      cwd: projectRoot,
      timeout: timeoutMs,
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, FORCE_COLOR: '0' },
    });
    console.log(`[containers] npm ${args.join(' ')}: ${seconds()} s`);
    return result;
  } catch (error) {
    const failed = error as { stdout?: string; stderr?: string; killed?: boolean; signal?: string };
    const engineLog = fs.existsSync(dockerPaths().logFile) ? fs.readFileSync(dockerPaths().logFile, 'utf8') : '(no log of ours)';
    throw new Error(
      [
        `npm ${args.join(' ')} failed after ${seconds()} s${failed.killed ? ` (stopped by the ${timeoutMs / 1000} s limit, ${failed.signal})` : ''}`,
        `--- the end of its output ---\n${tail(stripVTControlCharacters(failed.stdout ?? ''), 60)}`,
        `--- the end of its errors ---\n${tail(stripVTControlCharacters(failed.stderr ?? ''), 40)}`,
        `--- the end of the engine's log ---\n${tail(engineLog, 40)}`,
      ].join('\n'),
      { cause: error },
    );
  }
}

describe('containers', () => {
  it('engine up, images built from packages, the pipeline in containers carries records end to end', { timeout: 2_400_000 }, async () => {
    const engine = await npm(['run', 'docker', '--', 'up'], 300_000);
    console.log(`[containers] ${engine.stdout.trim().split('\n').at(-1)}`);
    const images = await npm(['run', 'images'], 1_200_000);
    const sizes = [...images.stdout.matchAll(/^(otm-telemetry\/\S+): (\d+) MB/gm)].map((match) => `${match[1]} ${match[2]} MB`);
    console.log(`[containers] ${sizes.join(', ')}`);
    // The gateway runs from the services image: small enough to pull fast on every scale-out.
    const services = /^otm-telemetry\/services:local: (\d+) MB/m.exec(images.stdout);
    expect(Number(services?.[1]), images.stdout).toBeLessThan(250);
    // The user module's test, the compose file run for real, and every codec (zstd too) into the containers' Kafka.
    const { stdout } = await npm(
      ['run', 'test:containers', '--', 'clients/testcontainers', 'test/compose.containers.test.ts', 'test/codecs.integration.test.ts'],
      1_200_000,
    );
    const plain = stripVTControlCharacters(stdout);
    for (const line of plain.split('\n').filter((text) => text.startsWith('[module test]'))) console.log(`[containers] ${line}`);
    expect(plain).toMatch(/Test Files\s+3 passed \(3\)/);
    expect(plain).toMatch(/Tests\s+8 passed \(8\)/);
  });
});
