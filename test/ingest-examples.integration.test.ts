// The HTTP ingest examples of examples/ (Python with the standard library, Go with the
// standard library) against a real gateway and ingester, run the way their READMEs
// say: each sends its records in batches, trusting the gateway's certificate through
// its CA option, and every record reaches ClickHouse once. Without python3 or go on
// the PATH the test of that language says it skipped and why.
import { execFile } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { systemPython } from './helpers/python.js';
import {
  createTestKey,
  eventually,
  projectRoot,
  queryRows,
  startGateway,
  startIngester,
  testCertificate,
  testClickHouse,
  testNames,
  type ServiceProcess,
} from './helpers/stack.js';

const run = promisify(execFile);
const names = testNames('ingest-examples');
const services: ServiceProcess[] = [];
let gateway: ServiceProcess;
let key: string;
let caFile: string;
const clickhouse = testClickHouse(names.database);

async function hasGo(): Promise<boolean> {
  try {
    await run('go', ['version']);
    return true;
  } catch {
    return false;
  }
}

beforeAll(async () => {
  const [started, ingester] = await Promise.all([startGateway({ topic: names.topic, keyPrefix: names.keyPrefix }), startIngester(names)]);
  gateway = started;
  services.push(gateway, ingester);
  key = (await createTestKey(names.keyPrefix, 'dev', 'examples')).key;
  caFile = (await testCertificate()).certFile;
}, 120_000);

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await clickhouse.close();
});

/** The records ClickHouse holds for a user, each counted once. */
const stored = async (user: string) =>
  Number(
    (await queryRows<{ n: string }>(clickhouse, `SELECT uniqExact(event_key) AS n FROM usage_events WHERE user_id = '${user}'`))[0]!.n,
  );
const rows = async (user: string) =>
  Number((await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM usage_events FINAL WHERE user_id = '${user}'`))[0]!.n);

describe('HTTP ingest examples', () => {
  it('Python (standard library): 250 records in batches of 100 reach ClickHouse once', async (context) => {
    const python = await systemPython();
    if (!python) {
      console.log('skipped: no python3 on the PATH');
      return context.skip();
    }
    const user = `py-${names.groupId}`;
    const { stdout } = await run(
      python,
      ['examples/python-ingest/otm_ingest.py', '--url', gateway.url, '--key', key, '--ca-file', caFile, '--records', '250', '--user', user],
      { cwd: projectRoot, timeout: 120_000 },
    );
    expect(JSON.parse(stdout)).toEqual({ accepted: 250, refused: 0, gaveUp: 0 });
    await eventually(async () => (await stored(user)) === 250, 60_000);
    expect(await rows(user)).toBe(250);
  }, 180_000);

  it('Go (standard library): 250 records in batches of 100 reach ClickHouse once', async (context) => {
    if (!(await hasGo())) {
      console.log('skipped: no go on the PATH');
      return context.skip();
    }
    const user = `go-${names.groupId}`;
    const binary = path.join(os.tmpdir(), `otm-go-ingest-${names.groupId}`);
    // Built offline: the example has no module dependency.
    await run('go', ['build', '-o', binary, '.'], {
      cwd: path.join(projectRoot, 'examples/go-ingest'),
      timeout: 300_000,
      env: { ...process.env, GOFLAGS: '-mod=mod', GOTOOLCHAIN: 'local' },
    });
    const { stdout } = await run(binary, ['-url', gateway.url, '-key', key, '-ca-file', caFile, '-records', '250', '-user', user], {
      timeout: 120_000,
    });
    expect(JSON.parse(stdout)).toEqual({ accepted: 250, refused: 0, gaveUp: 0 });
    await eventually(async () => (await stored(user)) === 250, 60_000);
    expect(await rows(user)).toBe(250);
  }, 360_000);
});
