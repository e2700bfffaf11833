// The production build: `npm run build`, then the services' production tree (dist/,
// the files read at run time, `npm ci --omit=dev`) in a folder of its own, where no
// tsx, TypeScript or esbuild is installed. The gateway, the ingester and the admin
// service run from it with plain Node.js: a record posted to that gateway reaches
// ClickHouse through that ingester, and that admin service serves the dashboard
// bundled at build time and counts the record. The migrations run from the tree too
// (the chart's migration Job), and the services then start without DDL rights' work
// (MIGRATE_ON_START=false).
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { stageProductionTree } from '../scripts/lib/production-tree.js';
import { SERVICE_RUNTIME_FLAGS, startProcess, type ServiceProcess } from '../scripts/lib/service-process.js';
import {
  createTestKey,
  eventually,
  fixture,
  httpRequest,
  postUsage,
  projectRoot,
  queryRows,
  stackEnv,
  testCertificate,
  testClickHouse,
  testNames,
} from './helpers/stack.js';

const tree = path.join(projectRoot, '.stack', 'production-tree');
const n = testNames('built');
const adminToken = `built-${n.groupId}-abcdefghijkl`;
const services: ServiceProcess[] = [];

/** Runs a built service of the production tree with plain Node.js: no tsx, no source condition. */
function startBuilt(service: 'gateway' | 'ingester' | 'admin', env: NodeJS.ProcessEnv, ready: RegExp): Promise<ServiceProcess> {
  return startProcess(
    `built ${service}`,
    [path.join(tree, 'services', service, 'dist/server.js')],
    env,
    ready,
    60_000,
    SERVICE_RUNTIME_FLAGS,
  );
}

beforeAll(async () => {
  execFileSync('npm', ['run', 'build'], { cwd: projectRoot, stdio: 'inherit' });
  fs.rmSync(tree, { recursive: true, force: true });
  stageProductionTree(projectRoot, tree);
}, 300_000);

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
});

describe('the production tree', () => {
  it('holds only production dependencies and no TypeScript sources', () => {
    const installed = fs.readdirSync(path.join(tree, 'node_modules'));
    for (const buildOnly of ['tsx', 'typescript', 'esbuild', 'chart.js', 'commander', 'selfsigned', 'vitest', 'pino-pretty']) {
      expect(installed, buildOnly).not.toContain(buildOnly);
    }
    const sources = fs
      .readdirSync(tree, { recursive: true, encoding: 'utf8' })
      .filter((file) => /(?<!\.d)\.ts$/.test(file) && !file.startsWith('node_modules'));
    expect(sources).toEqual([]);
  });

  it('carries the dependency patches (patches/), which its install scripts did not apply', () => {
    const crc = fs.readFileSync(path.join(tree, 'node_modules/kafkajs/src/protocol/recordBatch/crc32C/index.js'), 'utf8');
    expect(crc).toContain("require('@node-rs/crc32')");
    expect(fs.existsSync(path.join(tree, 'node_modules/@node-rs/crc32/package.json'))).toBe(true);
  });

  it('migrates with its own migrate command, then runs the gateway, the ingester and the admin service with plain Node.js, end to end', async () => {
    const migrateCommand = (...args: string[]) =>
      spawnSync(process.execPath, [path.join(tree, 'services/ingester/dist/migrate.js'), ...args], {
        env: stackEnv({ CLICKHOUSE_DATABASE: n.database }),
        encoding: 'utf8',
        timeout: 120_000,
      });
    const migrated = migrateCommand();
    expect(migrated.status, migrated.stderr).toBe(0);
    expect(migrated.stdout).toMatch(new RegExp(`migrated ${n.database}: \\d+ applied`));
    const again = migrateCommand();
    expect(again.stdout).toContain(`${n.database} is up to date`);
    const unknown = migrateCommand('--clustr', 'x');
    expect([unknown.status, unknown.stderr.trim()]).toEqual([1, expect.stringMatching(/^migrate: .*--clustr/)]);

    const tls = await testCertificate();
    const common = {
      USAGE_TOPIC: n.topic,
      USAGE_TOPIC_PARTITIONS: 3,
      REDIS_KEY_PREFIX: n.keyPrefix,
      METRICS_PORT: 0,
      MIGRATE_ON_START: 'false',
    };
    const ingester = await startBuilt(
      'ingester',
      stackEnv({ ...common, DLQ_TOPIC: `${n.topic}.dlq`, CLICKHOUSE_DATABASE: n.database, INGEST_GROUP_ID: n.groupId }),
      /ingester consuming/,
    );
    services.push(ingester);
    const gateway = await startBuilt(
      'gateway',
      stackEnv({ ...common, GATEWAY_PORT: 0, TLS_CERT_FILE: tls.certFile, TLS_KEY_FILE: tls.keyFile }),
      /gateway listening/,
    );
    services.push(gateway);
    const admin = await startBuilt(
      'admin',
      stackEnv({ ...common, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0, CLICKHOUSE_DATABASE: n.database, INGEST_GROUP_ID: n.groupId }),
      /admin listening/,
    );
    services.push(admin);

    const key = await createTestKey(n.keyPrefix, 'prod', 'built');
    const record = fixture('valid/success.json');
    const answer = await postUsage(gateway.url, record, { 'x-api-key': key.key, 'idempotency-key': `built-${n.groupId}` });
    expect(answer.status).toBe(202);

    const clickhouse = testClickHouse(n.database);
    try {
      const rows = await eventually(async () => {
        const found = await queryRows<{ model: string; input: string }>(
          clickhouse,
          'SELECT model_id AS model, toString(input_tokens) AS input FROM usage_events',
        );
        return found.length > 0 && found;
      });
      expect(rows).toEqual([{ model: record.request.modelId, input: String(record.tokens.input) }]);
    } finally {
      await clickhouse.close();
    }

    // The dashboard comes from dist/dashboard (bundled by the build; esbuild is not installed here).
    const page = await httpRequest(`${admin.url}/`, { method: 'GET' });
    expect(page.status).toBe(200);
    const bundle = await httpRequest(`${admin.url}/app.js`, { method: 'GET' });
    expect(bundle.status).toBe(200);
    expect(bundle.text).toBe(fs.readFileSync(path.join(tree, 'services/admin/dist/dashboard/app.js'), 'utf8'));
    const started = Date.parse(record.timing.startTime);
    const range = `from=${new Date(started - 3600_000).toISOString()}&to=${new Date(started + 3600_000).toISOString()}`;
    // ClickHouse shows usage_events' rows of an insert before its views have written
    // theirs (the insert returns once both have): the rollups may count the record a moment later.
    const counted = async () => {
      const usage = await httpRequest(`${admin.url}/v1/analytics/usage?${range}&bucket=none`, {
        headers: { authorization: `Bearer ${adminToken}` },
      });
      expect(usage.status, usage.text).toBe(200);
      return usage.body.rows.map((row: { requests: number }) => Number(row.requests)) as number[];
    };
    await eventually(async () => (await counted())[0] === 1, 10_000).catch(() => undefined);
    expect(await counted()).toEqual([1]);
  });
});
