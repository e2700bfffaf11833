// Removing records from history (docs/privacy.md, "Removing records"), through the real
// gateway, Kafka, ingester, admin service and ClickHouse: records named by request id
// (the admin API), by event key (the API and the CLI) leave usage_events, usage_io and
// usage_events_by_user; every rollup equals the raw rows afterwards, counts and sums; the
// other records of the same groups stay counted; the audit log holds the removal; asking
// again changes nothing.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { rollupTotals } from '@otm/shared/rollups/repair';
import { buildEveryDay } from './helpers/day-levels.js';
import { SOURCE_FLAGS } from '../scripts/lib/service-process.js';
import {
  createTestKey,
  eventually,
  fixture,
  httpRequest,
  postUsage,
  projectRoot,
  queryRows,
  stackEnv,
  startGateway,
  startIngester,
  startService,
  testClickHouse,
  testNames,
  uniqueName,
  type ServiceProcess,
} from './helpers/stack.js';

const names = testNames('removal');
const adminToken = `admin-${uniqueName('token')}-0123456789abcdef`;
const adminHeaders = { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' };
const clickhouse = testClickHouse(names.database);
const user = uniqueName('rm').replace(/[^a-z0-9]/gi, '');
// Every record in one minute: they share every rollup group but the user's.
const minute = Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000;
const at = (seconds: number) => new Date(minute + seconds * 1000).toISOString();

let gateway: ServiceProcess;
let ingester: ServiceProcess;
let admin: ServiceProcess;
let key: { key: string; id: string };

function record(tokens: number, status: 'success' | 'error' = 'success') {
  const body = fixture(status === 'success' ? 'valid/success.json' : 'valid/error-stack.json');
  body.user.id = user;
  body.tokens = { input: tokens, output: tokens };
  body.timing = { startTime: at(1), firstTokenTime: at(2), lastTokenTime: at(3), latencyMs: 2000 };
  return body;
}
async function post(body: unknown, headers: Record<string, string> = {}) {
  const answer = await postUsage(gateway.url, body, { 'x-api-key': key.key, ...headers });
  expect(answer.status, answer.text).toBe(202);
  return answer.body.requestId as string;
}
const count = async (query: string) => Number((await queryRows<{ n: string }>(clickhouse, query))[0]!.n);

/** Each rollup beside the raw rows: records, and tokens where the rollup sums them. */
async function expectRollupsEqualRaw() {
  // The day rollups as their job builds them: the days a removal changed were marked when it lifted its fence.
  await buildEveryDay(clickhouse, names.keyPrefix);
  for (const { table, stored, counted } of await rollupTotals(clickhouse)) expect(counted, table).toBe(stored);
  const raw = await count('SELECT sum(total_tokens) AS n FROM usage_events');
  expect(await count('SELECT sumMerge(total_tokens) AS n FROM usage_rollup_by_minute')).toBe(raw);
  expect(await count('SELECT sumMerge(total_tokens) AS n FROM usage_rollup_by_day')).toBe(raw);
  expect(await count('SELECT sumMerge(total_tokens) AS n FROM usage_rollup_key_totals_by_hour')).toBe(raw);
  expect(await count('SELECT sum(total_tokens) AS n FROM usage_rollup_user_by_day')).toBe(raw);
}

async function removal(body: unknown) {
  const started = await httpRequest(`${admin.url}/v1/admin/records/removals`, {
    method: 'POST',
    headers: adminHeaders,
    body: JSON.stringify(body),
  });
  expect(started.status, started.text).toBe(202);
  expect(started.body.statusUrl).toBe(`/v1/admin/records/removals/${started.body.id}`);
  let job: Record<string, any> = started.body;
  await eventually(async () => {
    job = (await httpRequest(`${admin.url}${started.body.statusUrl}`, { headers: adminHeaders })).body;
    return job.state !== 'running';
  }, 60_000);
  expect(job.state, job.error).toBe('done');
  return job;
}

beforeAll(async () => {
  [gateway, ingester, admin] = await Promise.all([
    startGateway({ topic: names.topic, keyPrefix: names.keyPrefix }),
    startIngester({ ...names, extraEnv: {} }),
    startService(
      'admin',
      stackEnv({ REDIS_KEY_PREFIX: names.keyPrefix, CLICKHOUSE_DATABASE: names.database, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0 }),
      /admin listening/,
    ),
  ]);
  key = await createTestKey(names.keyPrefix, 'qa', 'removal');
});
afterAll(async () => {
  await Promise.all([gateway, ingester, admin].map((service) => service?.stop()));
  await clickhouse.close();
});

describe('removing records from history', () => {
  it('by request id and event key: gone from every table, every rollup equal to the raw rows, audited, and asking again changes nothing', async () => {
    const outlier = await post(record(90_000_000));
    const kept = [await post(record(100)), await post(record(200)), await post(record(300, 'error'))];
    await post(record(50, 'error'), { 'idempotency-key': 'bad-error' });
    const errorKey = `${key.id}:bad-error`;
    await eventually(async () => (await count('SELECT count() AS n FROM usage_events')) === 5, 60_000);
    // usage_events shows an insert's rows before its views have written theirs (the insert returns once all have).
    await eventually(async () => (await rollupTotals(clickhouse)).every(({ stored, counted }) => counted === stored), 30_000);
    await expectRollupsEqualRaw();

    const job = await removal({ requestIds: [outlier], eventKeys: [errorKey], reason: 'test records' });
    expect(job).toMatchObject({ records: 2, removed: { events: 2, io: 1 }, reason: 'test records' });
    const left = await queryRows<{ request_id: string }>(clickhouse, 'SELECT request_id FROM usage_events ORDER BY request_id');
    expect(left.map((row) => row.request_id)).toEqual([...kept].sort());
    expect(await count(`SELECT count() AS n FROM usage_events_by_user WHERE user_id = '${user}'`)).toBe(3);
    expect(await count(`SELECT count() AS n FROM usage_io WHERE event_key IN ('${outlier}', '${errorKey}')`)).toBe(0);
    await expectRollupsEqualRaw();
    // The other records of the same groups stay counted: 100 + 200 + 300 tokens each way.
    expect(await count(`SELECT sum(total_tokens) AS n FROM usage_rollup_user_by_day WHERE user_id = '${user}'`)).toBe(1200);
    expect(await count(`SELECT countMerge(errors) AS n FROM usage_errors_by_day`)).toBe(1);

    const audit = await httpRequest(`${admin.url}/v1/audit`, { headers: adminHeaders });
    const actions = audit.body.entries.map((entry: { action: string }) => entry.action);
    expect(actions).toEqual(expect.arrayContaining(['records.remove', 'records.remove.done']));

    // Asking again: nothing found, nothing changed.
    expect(await removal({ requestIds: [outlier], eventKeys: [errorKey], reason: 'again' })).toMatchObject({ records: 0 });
    await expectRollupsEqualRaw();
    expect(await count('SELECT count() AS n FROM usage_events')).toBe(3);
  });

  it('the CLI removes by event key', async () => {
    const target = await post(record(400));
    await eventually(async () => (await count(`SELECT count() AS n FROM usage_events WHERE event_key = '${target}'`)) === 1, 60_000);
    const output = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/remove-records.ts'), '--event-key', target, '--reason', 'cli test'],
        { env: stackEnv({ REDIS_KEY_PREFIX: names.keyPrefix, CLICKHOUSE_DATABASE: names.database }), cwd: projectRoot },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
    expect(output.code, output.stderr).toBe(0);
    expect(output.stdout).toContain('1 records removed');
    expect(await count(`SELECT count() AS n FROM usage_events WHERE event_key = '${target}'`)).toBe(0);
    await expectRollupsEqualRaw();
  });

  it('refuses a removal naming no record (400) and answers 404 for an unknown job', async () => {
    const none = await httpRequest(`${admin.url}/v1/admin/records/removals`, {
      method: 'POST',
      headers: adminHeaders,
      body: JSON.stringify({ reason: 'nothing', eventKeys: [] }),
    });
    expect(none.status).toBe(400);
    expect(none.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    const unknown = await httpRequest(`${admin.url}/v1/admin/records/removals/removal_nope`, { headers: adminHeaders });
    expect(unknown.status).toBe(404);
    expect(unknown.body).toMatchObject({ errorType: 'NotFound', message: 'No removal job with this id.' });
  });
});
