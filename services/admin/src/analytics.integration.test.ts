// Analytics against real ClickHouse: the materialized rollups equal the same
// numbers computed from the raw rows, with duplicates delivered and a replay that
// Redis knows nothing about; the API validates its parameters and wants the admin
// token; the report CLI prints the table.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { queuedRecords, sampleUsageRecords, seededRandom } from '../../../test/fixtures/sample-records.js';
import { produceQueued } from '../../../test/helpers/produce.js';
import { SOURCE_FLAGS } from '../../../scripts/lib/service-process.js';
import {
  createTestKey,
  eventually,
  httpRequest,
  projectRoot,
  queryRows,
  stackEnv,
  startIngester,
  startService,
  testClickHouse,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { BUCKET_RELATIVE_ERROR, bucketSql, bucketValue } from '@otm/shared/rollups/histogram';

const n = {
  topic: uniqueName('analytics'),
  keyPrefix: `${uniqueName('analytics')}:`,
  database: uniqueName('analytics'),
  groupId: uniqueName('analytics'),
};
const adminToken = `analytics-${uniqueName('token')}-abcdefghijklmnop`;
const auth = { authorization: `Bearer ${adminToken}` };
const startMs = Math.floor((Date.now() - 3 * 3600_000) / 60_000) * 60_000;
const from = new Date(startMs - 3600_000).toISOString();
const to = new Date(Date.now() + 60_000).toISOString();
const COUNT = 3000;

let admin: ServiceProcess;
const services: ServiceProcess[] = [];
const clickhouse = testClickHouse(n.database);

beforeAll(async () => {
  const random = seededRandom(3);
  const records = queuedRecords(sampleUsageRecords(COUNT, { seed: 3, startMs, users: 30 }), {
    eventKey: (index) => `an-${index}`,
    receivedAtMs: startMs + 1800_000,
  });
  // Duplicates delivered: 15% of the records come again (other request ids).
  const duplicates = records
    .filter(() => random() < 0.15)
    .map((record) => ({ ...record, meta: { ...record.meta, requestId: `${record.meta.requestId}-again` } }));
  await produceQueued(n.topic, [...records, ...duplicates]);
  services.push(await startIngester(n));
  await eventually(async () => {
    const [row] = await queryRows<{ n: string }>(
      clickhouse,
      'SELECT count() AS n FROM (SELECT event_key FROM usage_events GROUP BY event_key)',
    );
    return Number(row?.n) === COUNT;
  }, 60_000);
  // A replay Redis knows nothing about (as after a crash between the insert and
  // marking the keys, or a Redis that lost its data): a second consumer group with
  // its own Redis prefix reads the whole topic again into the same database.
  services.push(await startIngester({ ...n, groupId: uniqueName('replay'), keyPrefix: `${uniqueName('replay')}:` }));
  await eventually(async () => services[1]!.logs.some((line) => line.includes('ingester consuming')), 10_000);
  await new Promise((resolve) => setTimeout(resolve, 5000));
  admin = await startService(
    'admin',
    stackEnv({ ADMIN_TOKEN: adminToken, ADMIN_PORT: 0, CLICKHOUSE_DATABASE: n.database, REDIS_KEY_PREFIX: n.keyPrefix }),
    /admin listening/,
  );
  services.push(admin);
}, 180_000);

afterAll(async () => {
  await Promise.all(services.map((service) => service.stop()));
  await clickhouse.close();
});

/** The same figures computed from the raw rows, each event key once. */
async function rawByModel() {
  return queryRows<Record<string, any>>(
    clickhouse,
    `SELECT provider, model_id AS model, count() AS requests, countIf(status = 'success') AS successes, countIf(status = 'error') AS errors,
            sum(ifNull(input_tokens, 0)) AS inputTokens, sum(ifNull(output_tokens, 0)) AS outputTokens, sum(total_tokens) AS totalTokens,
            sum(ifNull(cost_usd, 0)) AS costUsd, countIf(price_known = 0) AS unpricedRequests,
            sum(ifNull(cached_input_tokens, 0)) AS cachedInputTokens, sum(ifNull(cache_write_tokens, 0)) AS cacheWriteTokens,
            sum(ifNull(reasoning_tokens, 0)) AS reasoningTokens,
            sumIf(ifNull(input_tokens, 0), isNotNull(cached_input_tokens)) AS cacheReportedInput,
            quantilesIf(0.5, 0.9, 0.99)(ifNull(latency_ms, 0), isNotNull(latency_ms)) AS latency,
            quantilesIf(0.5, 0.9, 0.99)(ifNull(ttft_ms, 0), isNotNull(ttft_ms)) AS ttft
     FROM (SELECT event_key, any(provider) AS provider, any(model_id) AS model_id, any(status) AS status, any(input_tokens) AS input_tokens,
                  any(output_tokens) AS output_tokens, any(total_tokens) AS total_tokens, any(cost_usd) AS cost_usd, any(price_known) AS price_known,
                  any(latency_ms) AS latency_ms, any(ttft_ms) AS ttft_ms, any(cached_input_tokens) AS cached_input_tokens,
                  any(cache_write_tokens) AS cache_write_tokens, any(reasoning_tokens) AS reasoning_tokens
           FROM usage_events GROUP BY event_key)
     GROUP BY provider, model ORDER BY provider, model`,
  );
}

describe('rollups', () => {
  it('usage_events holds each event key once, despite duplicates and a replay unknown to Redis', async () => {
    const [row] = await queryRows<{ rows: string; keys: string }>(
      clickhouse,
      'SELECT count() AS rows, uniqExact(event_key) AS keys FROM usage_events',
    );
    expect([Number(row!.rows), Number(row!.keys)]).toEqual([COUNT, COUNT]);
  });

  it('usage and latency per model equal the raw rows', async () => {
    const raw = await rawByModel();
    const usage = await httpRequest(`${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=provider,model`, {
      headers: auth,
    });
    const latency = await httpRequest(`${admin.url}/v1/analytics/latency?from=${from}&to=${to}&bucket=none&groupBy=provider,model`, {
      headers: auth,
    });
    expect(usage.status, usage.text).toBe(200);
    expect(latency.status).toBe(200);
    const sort = (rows: Record<string, any>[]) =>
      [...rows].sort((a, b) => `${a.provider}/${a.model}`.localeCompare(`${b.provider}/${b.model}`));
    const api = sort(usage.body.rows);
    const apiLatency = sort(latency.body.rows);
    expect(api.map((row) => `${row.provider}/${row.model}`)).toEqual(raw.map((row) => `${row.provider}/${row.model}`));
    raw.forEach((expected, index) => {
      const got = api[index]!;
      const fields = ['requests', 'successes', 'errors', 'inputTokens', 'outputTokens', 'totalTokens', 'unpricedRequests'];
      for (const field of [...fields, 'cachedInputTokens', 'cacheWriteTokens', 'reasoningTokens']) {
        expect(Number(got[field]), `${expected.model} ${field}`).toBe(Number(expected[field]));
      }
      const reported = Number(expected.cacheReportedInput);
      if (reported === 0) expect(got.cacheHitRatio, expected.model).toBeNull();
      else expect(got.cacheHitRatio, expected.model).toBeCloseTo(Number(expected.cachedInputTokens) / reported, 12);
      expect(got.costUsd).toBeCloseTo(Number(expected.costUsd), 9);
      // Percentiles from t-digest states (the rollups of migration 0008): within 2 % of
      // the exact values (docs/analytics-api.md states the accuracy measured).
      const l = apiLatency[index]!;
      const near = (got: (number | null)[], exact: number[]) =>
        exact.forEach((value, i) => {
          if (!Number.isFinite(value)) return expect(got[i], expected.model).toBeNull();
          expect(Math.abs(got[i]! - value), `${expected.model} quantile ${i}: ${got[i]} vs ${value}`).toBeLessThanOrEqual(0.02 * value + 1);
        });
      near([l.latencyP50Ms, l.latencyP90Ms, l.latencyP99Ms], expected.latency as number[]);
      near([l.ttftP50Ms, l.ttftP90Ms, l.ttftP99Ms], expected.ttft as number[]);
    });
    expect(api.reduce((sum, row) => sum + row.requests, 0)).toBe(COUNT);

    // Filtered by environment (under a day, not on whole hours: the usage rollups' t-digest states).
    const rawEnv = await queryRows<{ environment: string; model: string; requests: string; latency: number[] }>(
      clickhouse,
      `SELECT environment, model_id AS model, count() AS requests, quantilesIf(0.5, 0.9, 0.99)(ifNull(latency_ms, 0), isNotNull(latency_ms)) AS latency
       FROM (SELECT event_key, any(environment) AS environment, any(model_id) AS model_id, any(latency_ms) AS latency_ms FROM usage_events GROUP BY event_key)
       WHERE environment = (SELECT any(environment) FROM usage_events) GROUP BY environment, model ORDER BY model`,
    );
    const byEnv = await httpRequest(
      `${admin.url}/v1/analytics/latency?from=${from}&to=${to}&bucket=none&groupBy=model&environment=${rawEnv[0]!.environment}`,
      { headers: auth },
    );
    const gotEnv = [...byEnv.body.rows].sort((a: any, b: any) => a.model.localeCompare(b.model));
    expect(gotEnv.map((row: any) => [row.model, row.requests])).toEqual(rawEnv.map((row) => [row.model, Number(row.requests)]));
    rawEnv.forEach((expected, index) =>
      expected.latency.forEach((value, i) => {
        const got = [gotEnv[index].latencyP50Ms, gotEnv[index].latencyP90Ms, gotEnv[index].latencyP99Ms][i];
        // About 100 records per model here: the 99th percentile lies between the last few
        // values (4 % off seen, through usage_rollup_by_hour as well); the others within 2 %.
        const bound = i === 2 ? 0.05 : 0.02;
        expect(Math.abs(got - value), `${expected.model} quantile ${i}`).toBeLessThanOrEqual(bound * value + 1);
      }),
    );
  });

  it('the unpriced models: the pairs without a price, with their requests, as the raw rows; no bucket or groupBy', async () => {
    const raw = (await rawByModel()).filter((row) => Number(row.unpricedRequests) > 0);
    expect(raw.length).toBeGreaterThan(0);
    const answer = await httpRequest(`${admin.url}/v1/analytics/unpriced?from=${from}&to=${to}`, { headers: auth });
    expect(answer.status, answer.text).toBe(200);
    expect(answer.body).toMatchObject({ bucket: 'none', groupBy: ['provider', 'model'], truncated: false });
    expect(answer.body.rows).toEqual(
      raw.map((row) => ({
        provider: row.provider,
        model: row.model,
        unpricedRequests: Number(row.unpricedRequests),
        requests: Number(row.requests),
      })),
    );
    for (const param of ['bucket=hour', 'groupBy=model', 'orderBy=requests']) {
      const refused = await httpRequest(`${admin.url}/v1/analytics/unpriced?since=24h&${param}`, { headers: auth });
      expect(refused.status, param).toBe(400);
    }
  });

  it('latency and time to first token per hour and per day, overall, by model and per environment (the histograms of migration 0010), equal the raw rows', async () => {
    const environment = (await queryRows<{ e: string }>(clickhouse, 'SELECT any(environment) AS e FROM usage_events'))[0]!.e;
    const cases = [
      // usage_latency_hist_total_by_hour, usage_latency_hist_total_by_day (and their ttft twins)
      { params: 'bucket=hour', bucket: 3600, groups: [] as string[], where: '' },
      { params: 'bucket=day', bucket: 86_400, groups: [], where: '' },
      // usage_latency_hist_by_hour, usage_latency_hist_by_day
      { params: 'bucket=hour&groupBy=provider,model', bucket: 3600, groups: ['provider', 'model_id'], where: '' },
      { params: 'bucket=day&groupBy=provider,model', bucket: 86_400, groups: ['provider', 'model_id'], where: '' },
      // usage_latency_hist_env_by_hour, usage_latency_hist_env_by_day
      {
        params: `bucket=hour&groupBy=model&environment=${environment}`,
        bucket: 3600,
        groups: ['model_id'],
        where: `WHERE environment = '${environment}'`,
      },
      {
        params: `bucket=day&groupBy=environment,model`,
        bucket: 86_400,
        groups: ['environment', 'model_id'],
        where: '',
      },
    ];
    const percentiles = (column: string) =>
      `quantilesExactWeightedIf(0.5, 0.9, 0.99)(${bucketSql(column)}, toUInt64(1), isNotNull(${column})) AS ${column}_buckets,
       quantilesExactWeightedIf(0.5, 0.9, 0.99)(ifNull(${column}, toUInt64(0)), toUInt64(1), isNotNull(${column})) AS ${column}_exact,
       countIf(isNotNull(${column})) AS ${column}_values`;
    let groupsChecked = 0;
    for (const { params, bucket, groups, where } of cases) {
      const answer = await httpRequest(`${admin.url}/v1/analytics/latency?from=${from}&to=${to}&${params}&limit=10000`, { headers: auth });
      expect(answer.status, answer.text).toBe(200);
      const raw = await queryRows<Record<string, any>>(
        clickhouse,
        `SELECT concat(toString(intDiv(toUInt32(event_time), ${bucket}) * ${bucket}), '|', ${groups.length ? groups.join(", '|', ") : "''"}) AS key,
                count() AS requests, ${percentiles('latency_ms')}, ${percentiles('ttft_ms')},
                avgIf(ifNull(output_tokens_per_sec, toFloat64(0)), isNotNull(output_tokens_per_sec)) AS tps
         FROM (SELECT event_key, any(event_time) AS event_time, any(environment) AS environment, any(provider) AS provider,
                      any(model_id) AS model_id, any(latency_ms) AS latency_ms, any(ttft_ms) AS ttft_ms,
                      any(output_tokens_per_sec) AS output_tokens_per_sec FROM usage_events GROUP BY event_key)
         ${where} GROUP BY key ORDER BY key`,
      );
      const key = (row: Record<string, any>) =>
        `${Date.parse(row.bucket) / 1000}|${groups.map((column) => row[column === 'model_id' ? 'model' : column]).join('|')}`;
      const got = [...(answer.body.rows as Record<string, any>[])].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
      expect(
        got.map((row) => [key(row), row.requests]),
        params,
      ).toEqual(raw.map((row) => [row.key, Number(row.requests)]));
      raw.forEach((expected, index) => {
        const row = got[index]!;
        for (const [column, fields] of [
          ['latency_ms', ['latencyP50Ms', 'latencyP90Ms', 'latencyP99Ms']],
          ['ttft_ms', ['ttftP50Ms', 'ttftP90Ms', 'ttftP99Ms']],
        ] as const) {
          const answered = fields.map((field) => row[field] as number | null);
          if (Number(expected[`${column}_values`]) === 0) {
            expect(answered, `${params} ${expected.key} ${column}`).toEqual([null, null, null]);
            continue;
          }
          // Exactly the raw rows' percentiles counted in the same buckets ...
          expect(answered, `${params} ${expected.key} ${column}`).toEqual(
            (expected[`${column}_buckets`] as number[]).map((b) => bucketValue(b)),
          );
          // ... which stand within 2 % of the exact value of the same rank.
          (expected[`${column}_exact`] as number[]).forEach((exact, i) =>
            expect(Math.abs(answered[i]! - exact), `${params} ${expected.key} ${column} ${i}`).toBeLessThanOrEqual(
              BUCKET_RELATIVE_ERROR * exact + 1e-9,
            ),
          );
        }
        if (expected.tps === null || !Number.isFinite(Number(expected.tps))) expect(row.outputTokensPerSec).toBeNull();
        else expect(row.outputTokensPerSec).toBeCloseTo(Number(expected.tps), 6);
        groupsChecked += 1;
      });
    }
    expect(groupsChecked).toBeGreaterThanOrEqual(20);
  });

  it('per-minute, per-hour and per-day buckets add up to the same totals as the raw rows', async () => {
    const [raw] = await queryRows<{ requests: string; tokens: string }>(
      clickhouse,
      'SELECT count() AS requests, sum(t) AS tokens FROM (SELECT event_key, any(total_tokens) AS t FROM usage_events GROUP BY event_key)',
    );
    for (const bucket of ['minute', 'hour', 'day']) {
      const answer = await httpRequest(`${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=${bucket}&limit=10000`, {
        headers: auth,
      });
      expect(answer.status).toBe(200);
      const rows = answer.body.rows as { requests: number; totalTokens: number; bucket: string }[];
      expect(
        rows.reduce((sum, row) => sum + row.requests, 0),
        bucket,
      ).toBe(Number(raw!.requests));
      expect(
        rows.reduce((sum, row) => sum + row.totalTokens, 0),
        bucket,
      ).toBe(Number(raw!.tokens));
      expect(rows[0]!.bucket).toMatch(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:00\.000Z$/);
    }
  });

  it('usage by key (the key totals of migration 0011; with the provider, the keyed rollups of 0008) equals the raw rows, minutes at the edges included', async () => {
    // From 17 minutes past an hour to now: hours in the middle, minutes at both ends.
    const edgeFromMs = startMs - 3600_000 + 17 * 60_000;
    const edgeFrom = new Date(edgeFromMs).toISOString();
    const raw = (dimensions: string) =>
      queryRows<Record<string, string>>(
        clickhouse,
        `SELECT ${dimensions}, count() AS requests, sum(t) AS tokens, countIf(s = 'error') AS errors
         FROM (SELECT event_key, any(api_key_id) AS keyId, any(environment) AS environment, any(user_type) AS userType, any(provider) AS provider,
                      any(total_tokens) AS t, any(status) AS s, any(event_time) AS at
               FROM usage_events GROUP BY event_key)
         WHERE toUInt32(at) >= ${edgeFromMs / 1000} GROUP BY ${dimensions} ORDER BY ${dimensions}`,
      );
    for (const [groupBy, columns] of [
      ['keyId', 'keyId'],
      ['keyId,environment,userType', 'keyId, environment, userType'],
      ['keyId,provider', 'keyId, provider'],
    ] as const) {
      const names = groupBy.split(',');
      const expected = (await raw(columns)).map((row) => [
        ...names.map((name) => row[name]),
        Number(row.requests),
        Number(row.tokens),
        Number(row.errors),
      ]);
      expect(expected.length, groupBy).toBeGreaterThan(1);
      for (const bucket of ['none', 'hour']) {
        const answer = await httpRequest(
          `${admin.url}/v1/analytics/usage?from=${edgeFrom}&to=${to}&bucket=${bucket}&groupBy=${groupBy}&limit=10000`,
          {
            headers: auth,
          },
        );
        expect(answer.status, `${groupBy} ${bucket}`).toBe(200);
        // Hourly rows added up per group.
        const sums = new Map<string, { values: string[]; requests: number; tokens: number; errors: number }>();
        for (const row of answer.body.rows as Record<string, any>[]) {
          const values = names.map((name) => String(row[name]));
          const sum = sums.get(values.join('|')) ?? { values, requests: 0, tokens: 0, errors: 0 };
          sum.requests += row.requests;
          sum.tokens += row.totalTokens;
          sum.errors += row.errors;
          sums.set(values.join('|'), sum);
        }
        const got = [...sums.values()].sort((a, b) => (a.values.join('|') < b.values.join('|') ? -1 : 1));
        expect(
          got.map((sum) => [...sum.values, sum.requests, sum.tokens, sum.errors]),
          `${groupBy} ${bucket}`,
        ).toEqual(expected);
      }
    }
  });

  it('errors by code, top users and the internal/external split equal the raw rows', async () => {
    const rawErrors = await queryRows<{ code: string; n: string }>(
      clickhouse,
      "SELECT ifNull(c, '') AS code, count() AS n FROM (SELECT event_key, any(error_code) AS c, any(status) AS s FROM usage_events GROUP BY event_key) WHERE s = 'error' GROUP BY code ORDER BY code",
    );
    const errors = await httpRequest(`${admin.url}/v1/analytics/errors?from=${from}&to=${to}&bucket=none&groupBy=errorCode`, {
      headers: auth,
    });
    expect(errors.status).toBe(200);
    expect(
      [...errors.body.rows].sort((a: any, b: any) => a.errorCode.localeCompare(b.errorCode)).map((row: any) => [row.errorCode, row.errors]),
    ).toEqual(rawErrors.map((row) => [row.code, Number(row.n)]));

    // Top users run in two steps (the groups, then every measure of those users only):
    // each measure of the rows kept equals the raw rows', in the same order.
    const rawUsers = await queryRows<{ user: string; type: string; tokens: string; requests: string; errors: string; cost: number }>(
      clickhouse,
      `SELECT u AS user, ut AS type, sum(t) AS tokens, count() AS requests, countIf(s = 'error') AS errors, sum(c) AS cost FROM (SELECT event_key, any(user_id) AS u, any(user_type) AS ut, any(total_tokens) AS t, any(status) AS s, any(ifNull(cost_usd, 0)) AS c FROM usage_events GROUP BY event_key) GROUP BY user, type ORDER BY tokens DESC, user, type LIMIT 5`,
    );
    const top = await httpRequest(
      `${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=userId,userType&orderBy=totalTokens&limit=5`,
      { headers: auth },
    );
    expect(top.body.rows.map((row: any) => [row.userId, row.userType, row.totalTokens, row.requests, row.errors])).toEqual(
      rawUsers.map((row) => [row.user, row.type, Number(row.tokens), Number(row.requests), Number(row.errors)]),
    );
    top.body.rows.forEach((row: any, index: number) => expect(Math.abs(row.costUsd - rawUsers[index]!.cost)).toBeLessThan(1e-9));
    expect(top.body.truncated).toBe(true);
    // Ordered by errors, most users tie (none or one): the first step by hash sees the
    // tie go past its candidates and asks again by the groups; still the raw order.
    const rawByErrors = await queryRows<{ user: string; type: string; errors: string }>(
      clickhouse,
      `SELECT u AS user, ut AS type, countIf(s = 'error') AS errors FROM (SELECT event_key, any(user_id) AS u, any(user_type) AS ut, any(status) AS s FROM usage_events GROUP BY event_key) GROUP BY user, type ORDER BY errors DESC, user, type LIMIT 4`,
    );
    const byErrors = await httpRequest(
      `${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=userId,userType&orderBy=errors&limit=4`,
      { headers: auth },
    );
    expect(byErrors.body.rows.map((row: any) => [row.userId, row.userType, row.errors])).toEqual(
      rawByErrors.map((row) => [row.user, row.type, Number(row.errors)]),
    );
    // Without orderBy: the groups in their own order.
    const firstUsers = await httpRequest(`${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=userId&limit=3`, {
      headers: auth,
    });
    const rawFirst = await queryRows<{ user: string; requests: string }>(
      clickhouse,
      'SELECT u AS user, count() AS requests FROM (SELECT event_key, any(user_id) AS u FROM usage_events GROUP BY event_key) GROUP BY user ORDER BY user LIMIT 3',
    );
    expect(firstUsers.body.rows.map((row: any) => [row.userId, row.requests])).toEqual(
      rawFirst.map((row) => [row.user, Number(row.requests)]),
    );

    const split = await httpRequest(`${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=userType`, {
      headers: auth,
    });
    expect(split.body.rows.map((row: any) => row.userType).sort()).toEqual(['external', 'internal']);
    expect(split.body.truncated).toBe(false);
    // truncated says whether more rows exist: not at exactly `limit` rows, yes beyond.
    for (const [limit, truncated] of [
      [2, false],
      [1, true],
    ] as const) {
      const answer = await httpRequest(
        `${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&groupBy=userType&limit=${limit}`,
        {
          headers: auth,
        },
      );
      expect([answer.body.rows.length, answer.body.truncated], `limit ${limit}`).toEqual([limit, truncated]);
    }
  });

  it('filters by environment', async () => {
    const [raw] = await queryRows<{ n: string }>(
      clickhouse,
      "SELECT count() AS n FROM (SELECT event_key, any(environment) AS e FROM usage_events GROUP BY event_key) WHERE e = 'qa'",
    );
    const answer = await httpRequest(`${admin.url}/v1/analytics/usage?from=${from}&to=${to}&bucket=none&environment=qa`, { headers: auth });
    expect(answer.body.rows[0].requests).toBe(Number(raw!.n));
  });
});

describe('analytics API', () => {
  it.each([
    ['bucket=week', '/bucket'],
    ['groupBy=colour', '/groupBy'],
    ['groupBy=model,model', '/groupBy'],
    ['limit=0', '/limit'],
    ['limit=100001', '/limit'],
    ['from=yesterday', '/from'],
    [`from=${to}&to=${from}`, '/from'],
    ['environment=staging', '/environment'],
    ['since=forever', '/since'],
    ['colour=blue', '/colour'],
    ['from=2026', '/from'],
    ['from=2026-11-22', '/from'],
    ['to=11%2F22%2F2026', '/to'],
    ['from=2026-11-22T10:00:00', '/from'],
  ])('400 for %s', async (query, path) => {
    const answer = await httpRequest(`${admin.url}/v1/analytics/usage?${query}`, { headers: auth });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    expect(answer.body.errors.map((error: { path: string }) => error.path)).toContain(path);
  });

  it.each(['userId=u1', 'keyId=key_x', 'userType=internal'])('errors refuses the filter it cannot apply: %s', async (query) => {
    const answer = await httpRequest(`${admin.url}/v1/analytics/errors?${query}`, { headers: auth });
    expect(answer.status, answer.text).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    expect(answer.body.errors.map((error: { path: string }) => error.path)).toContain(`/${query.split('=')[0]}`);
  });

  it('401 without the admin token, with a wrong one, or with an ingest key', async () => {
    const ingestKey = (await createTestKey(n.keyPrefix, 'prod', 'reader')).key;
    const attempts: Record<string, string>[] = [
      {},
      { authorization: 'Bearer nope-nope-nope-nope-nope-nope-nope' },
      { authorization: `Bearer ${ingestKey}` },
      { 'x-api-key': ingestKey },
    ];
    for (const endpoint of ['usage', 'latency', 'errors']) {
      for (const headers of attempts) {
        const answer = await httpRequest(`${admin.url}/v1/analytics/${endpoint}`, { headers });
        expect(answer.status).toBe(401);
        expect(answer.body).toMatchObject({ statusCode: 401, errorType: 'AuthError' });
      }
    }
  });
});

describe('report CLI', () => {
  it('prints usage per model as a table', async () => {
    const output = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve) => {
      const child = spawn(
        process.execPath,
        [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/report.ts'), '--since', '24h', '--by', 'model', '--admin-url', admin.url],
        {
          env: { ...stackEnv(), ADMIN_TOKEN: adminToken },
        },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (chunk) => (stdout += chunk));
      child.stderr.on('data', (chunk) => (stderr += chunk));
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(output.code, output.stderr).toBe(0);
    expect(output.stdout).toContain('openai / gpt-4o');
    expect(output.stdout).toContain('anthropic / claude-3-5-sonnet');
    expect(output.stdout).toMatch(/cost USD/);
  });
});
