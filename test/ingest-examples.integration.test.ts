// Clients an application team installs, against a real gateway and ingester, run the
// way their READMEs say: the TypeScript SDK as npm packs it (installed from its tarball
// into an empty project), and the HTTP ingest examples of examples/ (Python and Go,
// standard library only). Each sends its records in batches, trusting the gateway's
// certificate as a private CA (NODE_EXTRA_CA_CERTS for Node, a CA-file option for the
// others), and every record reaches ClickHouse once. Without python3 or go on the PATH
// the test of that language says it skipped and why.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
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
/**
 * Whether a user's stored records are keyed by UUIDv7s given by the client: `<api key id>:<UUIDv7>`,
 * time-ordered, which keeps the ingester's look-up of a unit's keys to a few ranges of its key index.
 */
const keyedByUuidV7 = async (user: string) => {
  const keys = (await queryRows<{ event_key: string }>(clickhouse, `SELECT event_key FROM usage_events WHERE user_id = '${user}'`)).map(
    (row) => row.event_key,
  );
  return keys.length > 0 && keys.every((key) => /^[^:]+:[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/.test(key));
};
const rows = async (user: string) =>
  Number((await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM usage_events FINAL WHERE user_id = '${user}'`))[0]!.n);

describe('clients an application installs', () => {
  it('the TypeScript SDK, packed and installed from its tarball, sends 120 records that reach ClickHouse once', async () => {
    const user = `sdk-${names.groupId}`;
    const project = fs.mkdtempSync(path.join(os.tmpdir(), 'otm-sdk-pack-'));
    try {
      // npm pack builds the package (its prepare script) and writes the tarball a registry would hold.
      const { stdout: packed } = await run('npm', ['pack', '--json', '--pack-destination', project], {
        cwd: path.join(projectRoot, 'clients/typescript'),
        timeout: 180_000,
      });
      const [tarball] = JSON.parse(packed.slice(packed.indexOf('['))) as { filename: string; files: { path: string }[] }[];
      expect(tarball!.files.map((file) => file.path)).toEqual(
        expect.arrayContaining(['LICENSE', 'README.md', 'dist/index.js', 'dist/index.d.ts']),
      );
      expect(tarball!.files.some((file) => file.path.startsWith('src/'))).toBe(false);
      fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'sdk-pack-check', private: true, type: 'module' }));
      // Its one dependency (uuid) from npm's cache where the workspace's install left it, else from the registry.
      await run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline', path.join(project, tarball!.filename)], {
        cwd: project,
        timeout: 120_000,
      });
      fs.writeFileSync(
        path.join(project, 'send.mjs'),
        `import { createClient } from '@otm/client';
const telemetry = createClient({ endpoint: process.env.OTM_ENDPOINT, apiKey: process.env.OTM_API_KEY, flushAt: 50 });
for (let i = 0; i < 120; i++) {
  telemetry.record({
    request: { modelId: 'gpt-4o-mini', status: 'success', provider: 'openai' },
    user: { id: process.env.OTM_USER, type: 'external' },
    tokens: { input: 100 + i, output: 20, total: 120 + i },
    timing: {
      startTime: new Date(Date.now() - 2000).toISOString(),
      firstTokenTime: new Date(Date.now() - 1800).toISOString(),
      lastTokenTime: new Date(Date.now() - 500).toISOString(),
      latencyMs: 1500,
    },
    io: { prompt: 'Question ' + i, response: 'Answer ' + i },
  });
}
await telemetry.shutdown();
console.log(JSON.stringify(telemetry.stats()));
`,
      );
      const { stdout } = await run(process.execPath, ['send.mjs'], {
        cwd: project,
        timeout: 60_000,
        // Trusting a private CA, as the SDK's quick start says.
        env: { ...process.env, NODE_EXTRA_CA_CERTS: caFile, OTM_ENDPOINT: gateway.url, OTM_API_KEY: key, OTM_USER: user },
      });
      expect(JSON.parse(stdout)).toMatchObject({ sent: 120, failed: 0, dropped: 0, queued: 0 });
      await eventually(async () => (await stored(user)) === 120, 60_000);
      expect(await rows(user)).toBe(120);
      expect(await keyedByUuidV7(user)).toBe(true);
      // A CommonJS application loads it with require() too (Node.js loads the ES module).
      fs.writeFileSync(path.join(project, 'load.cjs'), "console.log(typeof require('@otm/client').createClient);\n");
      const required = await run(process.execPath, ['load.cjs'], { cwd: project, timeout: 30_000 });
      expect(required.stdout.trim()).toBe('function');
    } finally {
      fs.rmSync(project, { recursive: true, force: true });
    }
  }, 300_000);

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
    expect(await keyedByUuidV7(user)).toBe(true);
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
    expect(await keyedByUuidV7(user)).toBe(true);
  }, 360_000);
});
