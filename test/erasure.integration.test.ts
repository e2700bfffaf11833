// Erasure of one user's data on request (docs/privacy.md), through the real gateway,
// Kafka, ingester, admin service and ClickHouse: the user's rows leave the raw tables
// and both rollups, the other user's totals stay the same to the token, a record of
// the erased user sitting in Kafka when the erasure runs is not loaded afterwards, and
// the audit log holds the request and the rows removed. The erasure is announced on
// the compacted erasure topic, and the Python example consumer, run before and after
// it, ends holding none of the user's records received before it.
import { LATENCY_ROLLUP_TABLES, SCALED_ROLLUPS, USAGE_ROLLUP_TABLES, aggregateViews } from '@otm/shared/rollups/views';
import { buildEveryDay } from './helpers/day-levels.js';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKafka, topicSettings } from '@otm/shared/kafka';
import { pythonWith, runPython } from './helpers/python.js';
import {
  createTestKey,
  eventually,
  fixture,
  httpRequest,
  postUsage,
  queryRows,
  stackEnv,
  startGateway,
  startIngester,
  startService,
  testClickHouse,
  testNames,
  testStack,
  uniqueName,
  type ServiceProcess,
} from './helpers/stack.js';

const names = testNames('erasure');
const erasureTopic = `${names.topic}.erasures`;
const stack = testStack();
const adminToken = `admin-${uniqueName('token')}-0123456789abcdef`;
const adminHeaders = { authorization: `Bearer ${adminToken}` };
const clickhouse = testClickHouse(names.database);
const tag = uniqueName('er').replace(/[^a-z0-9]/gi, '');
const erased = `${tag}-erased`;
const kept = `${tag}-kept`;
// Both users' errors fall in one minute, under one code: the errors rollup (which has
// no user column) holds them in the same row.
const minute = new Date(Math.floor((Date.now() - 3_600_000) / 60_000) * 60_000);
const at = (seconds: number) => new Date(minute.getTime() + seconds * 1000).toISOString();

let gateway: ServiceProcess;
let ingester: ServiceProcess;
let admin: ServiceProcess;
let key: string;

function success(userId: string, tokens: number, marker: string) {
  const record = fixture('valid/success.json');
  record.user.id = userId;
  record.tokens = { input: tokens, output: tokens, total: 2 * tokens };
  record.timing = { startTime: at(1), firstTokenTime: at(2), lastTokenTime: at(3), latencyMs: 2000 };
  record.io = { prompt: `${marker} prompt of ${userId}`, response: `${marker} response` };
  return record;
}
function failure(userId: string) {
  const record = fixture('valid/error-stack.json');
  record.user.id = userId;
  record.error.code = `code-${tag}`;
  record.timing = { startTime: at(10), firstTokenTime: at(10), lastTokenTime: at(11) };
  return record;
}
async function post(record: unknown) {
  const answer = await postUsage(gateway.url, record, { 'x-api-key': key });
  expect(answer.status, answer.text).toBe(202);
}
const startTheIngester = () => startIngester({ ...names, extraEnv: {} });
const count = async (query: string) => Number((await queryRows<{ n: string }>(clickhouse, query))[0]!.n);
const totals = async (userId: string) =>
  (
    await queryRows<{ requests: string; tokens: string }>(
      clickhouse,
      `SELECT sum(requests) AS requests, sum(total_tokens) AS tokens FROM usage_rollup_user_by_day WHERE user_id = '${userId}'`,
    )
  ).map((row) => ({ requests: Number(row.requests), tokens: Number(row.tokens) }))[0]!;
const errorRollup = () => count(`SELECT countMerge(errors) AS n FROM usage_errors_minute WHERE error_code = 'code-${tag}'`);

beforeAll(async () => {
  [gateway, ingester, admin] = await Promise.all([
    startGateway({ topic: names.topic, keyPrefix: names.keyPrefix }),
    startTheIngester(),
    startService(
      'admin',
      stackEnv({
        REDIS_KEY_PREFIX: names.keyPrefix,
        CLICKHOUSE_DATABASE: names.database,
        ADMIN_TOKEN: adminToken,
        ADMIN_PORT: 0,
        ERASURE_TOPIC: erasureTopic,
      }),
      /admin listening/,
    ),
  ]);
  key = (await createTestKey(names.keyPrefix, 'qa', 'erasure')).key;
});
afterAll(async () => {
  await Promise.all([gateway, ingester, admin].map((service) => service?.stop()));
  await clickhouse.close();
});

describe('DELETE /v1/admin/users/{userId}/data', () => {
  it("removes one user's rows from every table and the rollups, and their records still in Kafka stay out", async () => {
    for (const [i, tokens] of [100, 200, 300].entries()) {
      await post(success(erased, tokens, `A${i}-${tag}`));
      await post(success(kept, tokens + 1, `B${i}-${tag}`));
    }
    for (let i = 0; i < 2; i++) {
      await post(failure(erased));
      await post(failure(kept));
    }
    await eventually(async () => (await count(`SELECT count() AS n FROM usage_events WHERE startsWith(user_id, '${tag}')`)) === 10, 60_000);
    // The views fill their tables after usage_events is written (ClickHouse pushes an insert to them in turn).
    await eventually(async () => (await totals(kept)).requests === 5 && (await totals(erased)).requests === 5, 10_000);
    const keptBefore = await totals(kept);
    expect(keptBefore).toEqual({ requests: 5, tokens: 2 * (101 + 201 + 301) });
    expect(await totals(erased)).toEqual({ requests: 5, tokens: 2 * (100 + 200 + 300) });
    expect(await errorRollup()).toBe(4);

    // The ingester stops; one record of each user waits in Kafka through the erasure.
    await ingester.stop();
    await post(success(erased, 1000, `late-${tag}`));
    await post(success(kept, 1001, `late-${tag}`));

    // Weeks the job summed (migration 0015), far before these records: the user's go, the other's stay.
    await clickhouse.insert({
      table: 'usage_rollup_user_by_week',
      values: [erased, kept].map((user) => ({
        week: '2024-01-01 00:00:00',
        environment: 'qa',
        user_id: user,
        user_type: 'external',
        requests: 1,
      })),
      format: 'JSONEachRow',
    });
    const started = await httpRequest(`${admin.url}/v1/admin/users/${erased}/data?environment=qa`, {
      method: 'DELETE',
      headers: adminHeaders,
    });
    expect(started.status, started.text).toBe(202);
    expect(started.body).toMatchObject({ state: 'running', environment: 'qa', userId: erased });
    let job: Record<string, unknown> = started.body;
    await eventually(
      async () => {
        job = (await httpRequest(`${admin.url}${started.body.statusUrl}`, { headers: adminHeaders })).body;
        return job.state !== 'running';
      },
      60_000,
      200,
    );
    expect(job).toMatchObject({ state: 'done', removed: { events: 5, io: 3, errorRollupKeys: 1 } });

    ingester = await startTheIngester();
    await eventually(async () => (await totals(kept)).requests === 6, 60_000);
    // The erased user's waiting record was dropped, not loaded: nothing of them anywhere.
    await eventually(async () => (await count(`SELECT count() AS n FROM usage_events WHERE user_id = '${erased}'`)) === 0, 10_000);
    expect(await count(`SELECT count() AS n FROM usage_io WHERE position(prompt, 'prompt of ${erased}') > 0`)).toBe(0);
    expect(await count(`SELECT count() AS n FROM usage_rollup_user_by_day WHERE user_id = '${erased}'`)).toBe(0);
    expect(await count(`SELECT count() AS n FROM usage_events_by_user WHERE user_id = '${erased}'`)).toBe(0);
    // The other user: unchanged to the token, plus their own waiting record.
    expect(await totals(kept)).toEqual({ requests: 6, tokens: keptBefore.tokens + 2 * 1001 });
    expect(await count(`SELECT count() AS n FROM usage_io WHERE position(prompt, 'prompt of ${kept}') > 0`)).toBe(4);
    // The errors rollup counts only the other user's two errors now.
    expect(await errorRollup()).toBe(2);
    // The tables of migration 0008: nothing of the user in those keyed by user, and those
    // without a user column (rebuilt for the user's keys) add up to what usage_events holds.
    expect(await count(`SELECT count() AS n FROM usage_events_by_user WHERE user_id = '${erased}'`)).toBe(0);
    expect(await count(`SELECT count() AS n FROM usage_rollup_user_by_day WHERE user_id = '${erased}'`)).toBe(0);
    expect(await count(`SELECT sum(requests) AS n FROM usage_rollup_user_by_day WHERE user_id = '${kept}'`)).toBe(6);
    expect(await count(`SELECT count() AS n FROM usage_rollup_user_by_week WHERE user_id = '${erased}'`)).toBe(0);
    expect(await count(`SELECT count() AS n FROM usage_rollup_user_by_week WHERE user_id = '${kept}'`)).toBe(1);
    const [raw] = await queryRows<{ requests: string; tokens: string; errors: string }>(
      clickhouse,
      "SELECT count() AS requests, sum(total_tokens) AS tokens, countIf(status = 'error') AS errors FROM usage_events",
    );
    // The day rollups as their job builds them: the erasure marked the days it changed.
    await buildEveryDay(clickhouse, names.keyPrefix);
    for (const table of USAGE_ROLLUP_TABLES.filter((table) => table !== 'usage_rollup_user_by_day')) {
      const [rollup] = await queryRows<{ requests: string; tokens: string }>(
        clickhouse,
        `SELECT countMerge(requests) AS requests, sumMerge(total_tokens) AS tokens FROM ${table}`,
      );
      expect([Number(rollup!.requests), Number(rollup!.tokens)], table).toEqual([Number(raw!.requests), Number(raw!.tokens)]);
    }
    // The latency rollups count the requests left too.
    for (const table of LATENCY_ROLLUP_TABLES) {
      expect(await count(`SELECT countMerge(requests) AS n FROM ${table}`), table).toBe(Number(raw!.requests));
    }
    for (const table of ['usage_errors_by_hour', 'usage_errors_by_day']) {
      expect(await count(`SELECT countMerge(errors) AS n FROM ${table}`), table).toBe(Number(raw!.errors));
    }
    // Row by row: every rollup without a user (rebuilt from usage_events, or merged from
    // a finer rollup rebuilt before it) counts per group what usage_events holds.
    for (const view of aggregateViews().filter((view) => SCALED_ROLLUPS.some((rollup) => rollup.view === view.view))) {
      if (view.groups.some((group) => group.name === 'user_id')) continue;
      const names = view.groups.map((group) => group.name);
      const key = (columns: string[]) => `concat(${columns.map((column) => `toString(${column})`).join(", '|', ")})`;
      const stored = await queryRows<{ key: string; n: string }>(
        clickhouse,
        `SELECT ${key(names)} AS key, toString(${view.count.merge}(${view.count.column})) AS n FROM ${view.table} GROUP BY ${names.join(', ')} ORDER BY key`,
      );
      const counted = await queryRows<{ key: string; n: string }>(
        clickhouse,
        `SELECT ${key(view.groups.map((group) => group.expression))} AS key, toString(count()) AS n FROM usage_events ${view.where ? `WHERE ${view.where}` : ''} GROUP BY key ORDER BY key`,
      );
      expect(stored, view.table).toEqual(counted);
    }
    const metrics = await httpRequest(`http://127.0.0.1:${ingester.metricsPort}/metrics`);
    expect(metrics.text).toMatch(/^otm_ingester_erased_dropped_total 1$/m);

    const audit = await httpRequest(`${admin.url}/v1/audit`, { headers: adminHeaders });
    const ours = (audit.body.entries as { action: string; target: string; details: Record<string, unknown> }[]).filter(
      (entry) => entry.target === `qa:${erased}`,
    );
    expect(ours.map((entry) => entry.action).sort()).toEqual(['user.erase', 'user.erase.done']);
    expect(ours.find((entry) => entry.action === 'user.erase.done')!.details).toMatchObject({ events: 5, io: 3, jobId: job.id });
  });

  it('removes an error message whose 200-byte cut splits a character (the rollup keeps the first 200 bytes)', async () => {
    const userId = `${tag}-utf8`;
    const record = failure(userId);
    record.error.code = `utf8-${tag}`;
    // 199 ASCII bytes, then "é" (two bytes): the rollup's cut at 200 bytes splits it.
    record.error.message = `${'m'.repeat(199)}é and more`;
    await post(record);
    const rollupRows = () => count(`SELECT count() AS n FROM usage_errors_minute WHERE error_code = 'utf8-${tag}'`);
    await eventually(async () => (await rollupRows()) === 1, 60_000);

    const started = await httpRequest(`${admin.url}/v1/admin/users/${userId}/data?environment=qa`, {
      method: 'DELETE',
      headers: adminHeaders,
    });
    expect(started.status, started.text).toBe(202);
    await eventually(
      async () => (await httpRequest(`${admin.url}${started.body.statusUrl}`, { headers: adminHeaders })).body.state === 'done',
      60_000,
      200,
    );
    expect(await count(`SELECT count() AS n FROM usage_events WHERE user_id = '${userId}'`)).toBe(0);
    // Nothing of the message is left in the rollup, and nothing counts it.
    expect(await rollupRows()).toBe(0);
  });

  it("is announced on the compacted erasure topic; the Python example consumer, run before and after, holds none of the user's earlier records", async (context) => {
    const python = await pythonWith(['examples/python-consumer/requirements.txt']);
    if (!python) return context.skip('python3 is not on the PATH: the Python example consumer needs it');
    const userId = `${tag}-announced`;
    const other = `${tag}-other`;
    for (let i = 0; i < 3; i++) {
      await post(success(userId, 10 + i, `ann${i}-${tag}`));
      await post(success(other, 20 + i, `oth${i}-${tag}`));
    }
    const store = path.join(os.tmpdir(), `${uniqueName('erasure-store')}.sqlite`);
    const group = uniqueName('pycons-erasure');
    const consume = async () =>
      JSON.parse(
        await runPython(python, [
          'examples/python-consumer/consumer.py',
          ...['--brokers', stack.KAFKA_BROKERS, '--registry', stack.SCHEMA_REGISTRY_URL, '--topic', names.topic],
          ...['--group', group, '--store', store, '--by-user', '--idle-seconds', '4'],
        ]),
      ) as Record<string, number>;
    const before = await consume();
    expect(before[`qa:${userId}`]).toBe(3);
    expect(before[`qa:${other}`]).toBe(3);

    // One more record of the user, sent before the erasure and read only after it.
    await post(success(userId, 99, `late-${tag}`));
    const started = await httpRequest(`${admin.url}/v1/admin/users/${userId}/data?environment=qa`, {
      method: 'DELETE',
      headers: adminHeaders,
    });
    expect(started.status, started.text).toBe(202);
    let job: Record<string, unknown> = started.body;
    await eventually(
      async () => {
        job = (await httpRequest(`${admin.url}${started.body.statusUrl}`, { headers: adminHeaders })).body;
        return job.state !== 'running';
      },
      60_000,
      200,
    );
    expect(job.state, JSON.stringify(job)).toBe('done');
    // A record sent after the erasure is new data: kept.
    await post(success(userId, 7, `after-${tag}`));

    // The announcement: keyed by environment and user, the documented fields, registry wire format.
    const kafka = createKafka({ brokers: stack.KAFKA_BROKERS.split(','), clientId: 'erasure-test' });
    expect(await topicSettings(kafka, erasureTopic, ['cleanup.policy'])).toEqual({ 'cleanup.policy': 'compact' });
    const announcements: { key: string; value: Buffer; headers: Record<string, string> }[] = [];
    const reader = kafka.consumer({ groupId: uniqueName('erasure-reader') });
    await reader.connect();
    await reader.subscribe({ topic: erasureTopic, fromBeginning: true });
    await reader.run({
      eachMessage: async ({ message }) => {
        const headers = Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, value]) => [name, String(value)]));
        announcements.push({ key: message.key!.toString(), value: message.value!, headers });
      },
    });
    try {
      await eventually(async () => announcements.some((a) => a.key === `qa:${userId}`), 30_000);
    } finally {
      await reader.disconnect();
    }
    const ours = announcements.filter((a) => a.key === `qa:${userId}`);
    expect(ours).toHaveLength(1);
    expect(ours[0]!.value[0]).toBe(0);
    expect(ours[0]!.value.readInt32BE(1)).toBe(Number(ours[0]!.headers['x-schema-id']));
    expect(ours[0]!.headers['content-type']).toBe('application/json; framing=schema-registry');
    expect(JSON.parse(ours[0]!.value.subarray(5).toString('utf8'))).toEqual({
      environment: 'qa',
      userId,
      erasedAt: job.erasedAt,
      requestedAt: job.requestedAt,
      jobId: job.id,
    });

    // Run again: the held records and the late one are gone, the new one and the other user's stay.
    const after = await consume();
    expect(after[`qa:${userId}`]).toBe(1);
    expect(after[`qa:${other}`]).toBe(3);
  });

  it('refuses a request without an environment, and answers 404 for an unknown job', async () => {
    const noEnvironment = await httpRequest(`${admin.url}/v1/admin/users/someone/data`, { method: 'DELETE', headers: adminHeaders });
    expect(noEnvironment.status).toBe(400);
    expect((await httpRequest(`${admin.url}/v1/admin/erasures/erasure_nope`, { headers: adminHeaders })).status).toBe(404);
    expect((await httpRequest(`${admin.url}/v1/admin/users/someone/data?environment=qa`, { method: 'DELETE' })).status).toBe(401);
  });
});
