// A start that reads as healthy: `npm start` against a Kafka that has never run (no
// topics, no consumer group, its group coordinator still loading) and a database and
// key prefix no one used, as on a new machine. Every line it prints until the services
// have run for a minute is read, and a line at WARN, ERROR or FATAL fails the test: an
// alarm must mean something a person has to act on.
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClickHouse } from '@otm/shared/clickhouse';
import { KeyStore } from '@otm/shared/keys/key-store';
import { createRedis } from '@otm/shared/redis';
import { SOURCE_FLAGS } from '../scripts/lib/service-process.js';
import { startPrivateKafka, type PrivateService } from './helpers/private-services.js';
import { projectRoot, testCertificate, testNames, testStack } from './helpers/stack.js';

/** How long the services run after all three said they are up. */
const HEALTHY_MINUTE_MS = 60_000;
/**
 * pino-pretty's level as npm start prints it (`[12:00:00] WARN: ...`), and what a library
 * warns of on the console (AJV's `strict mode: ...` about a schema).
 */
const ALARM = /\b(WARN|ERROR|FATAL):|\bstrict mode:/;

const stack = testStack();
const names = testNames('start-log');

describe.skipIf(stack.source !== 'local stack')('npm start on a new machine', () => {
  let broker: PrivateService;
  let start: ChildProcess | undefined;

  beforeAll(async () => {
    broker = await startPrivateKafka(29_592);
  });

  afterAll(async () => {
    if (start && start.exitCode === null) {
      const exited = new Promise((resolve) => start!.once('exit', resolve));
      start.kill('SIGTERM');
      await exited;
    }
    await broker?.stop();
    const clickhouse = createClickHouse({ url: stack.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${names.database}` }).catch(() => undefined);
    await clickhouse.close();
  });

  it('prints no WARN, ERROR or FATAL line from its start until the services have run for a minute', async () => {
    // The freshness canary's key, made here: npm start would keep its own in the stack folder.
    const redis = createRedis(stack.REDIS_URL, { name: 'start-log-test' });
    await redis.connect();
    const canary = await new KeyStore(redis, names.keyPrefix).create({ environment: 'prod', name: 'otm-canary' });
    redis.disconnect();

    const lines: string[] = [];
    start = spawn(process.execPath, [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/start.ts')], {
      cwd: projectRoot,
      env: {
        PATH: process.env.PATH,
        HOME: process.env.HOME,
        KAFKA_BROKERS: broker.address,
        CLICKHOUSE_DATABASE: names.database,
        REDIS_KEY_PREFIX: names.keyPrefix,
        USAGE_TOPIC: names.topic,
        GATEWAY_PORT: '28643',
        ADMIN_PORT: '28680',
        METRICS_PORT: '0',
        ADMIN_TOKEN: 'start-log-test-token-0123456789abcdef',
        CANARY_API_KEY: canary.key,
        CANARY_GATEWAY_URL: 'https://127.0.0.1:28643',
        CANARY_CA_FILE: (await testCertificate()).certFile,
        CANARY_INTERVAL_MS: '5000',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let buffered = '';
    const onData = (chunk: Buffer) => {
      buffered += chunk.toString('utf8');
      const complete = buffered.split('\n');
      buffered = complete.pop()!;
      lines.push(...complete);
    };
    start.stdout!.on('data', onData);
    start.stderr!.on('data', onData);

    const deadline = Date.now() + 150_000;
    while (!lines.some((line) => line.includes('otm-telemetry is running')) && Date.now() < deadline && start.exitCode === null) {
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
    expect(
      lines.some((line) => line.includes('otm-telemetry is running')),
      `npm start did not report the services up:\n${lines.join('\n')}`,
    ).toBe(true);
    await new Promise((resolve) => setTimeout(resolve, HEALTHY_MINUTE_MS));
    expect(start.exitCode, 'npm start ended by itself').toBeNull();

    // The minute held the real work: topics created, the group joined, canary records loaded.
    expect(lines.some((line) => line.startsWith('ingester') && line.includes('ingester consuming'))).toBe(true);
    expect(
      lines.filter((line) => ALARM.test(line)),
      lines.join('\n'),
    ).toEqual([]);
  }, 300_000);
});
