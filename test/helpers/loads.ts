// Loads for the ingester's integration and fault tests: records with duplicated keys,
// what ClickHouse must hold after them, and an ingester on a Redis of its own.
import { expect } from 'vitest';
import type { ClickHouseClient } from '@otm/shared/clickhouse';
import { queuedRecords, sampleUsageRecords, seededRandom } from '../fixtures/sample-records.js';
import { startPrivateRedis } from './private-services.js';
import { eventually, queryRows, startIngester, testClickHouse, type testNames } from './stack.js';

/** Distinct loaded records, counted the way every analytics query counts them. */
export async function distinctCount(client: ClickHouseClient): Promise<number> {
  const [row] = await queryRows<{ n: string }>(client, 'SELECT count() AS n FROM (SELECT event_key FROM usage_events GROUP BY event_key)');
  return Number(row?.n ?? 0);
}

/** A load of records with duplicated keys; returns what ClickHouse must end up holding. */
export function duplicatedLoad(count: number, seed: number) {
  const random = seededRandom(seed);
  const distinct = sampleUsageRecords(count, { seed });
  const queued = queuedRecords(distinct, { eventKey: (index) => `load-${seed}-${index}` });
  // About 10% of the records are delivered again, as a client retry would.
  const duplicates = queued
    .filter(() => random() < 0.1)
    .map((record) => ({ ...record, meta: { ...record.meta, requestId: `${record.meta.requestId}-retry` } }));
  const expectedTokens = distinct.reduce(
    (sum, record) => sum + (record.tokens ? (record.tokens.total ?? record.tokens.input + record.tokens.output) : 0),
    0,
  );
  const keys = queued.map((record) => record.meta.eventKey);
  return { messages: [...queued, ...duplicates].sort(() => random() - 0.5), distinct: queued.length, keys, expectedTokens };
}

export async function expectExactContent(clickhouse: ClickHouseClient, load: ReturnType<typeof duplicatedLoad>, timeoutMs: number) {
  const { distinct, expectedTokens } = load;
  await eventually(async () => (await distinctCount(clickhouse)) >= distinct, timeoutMs, 500);
  const keys = await queryRows<{ event_key: string }>(clickhouse, 'SELECT event_key FROM usage_events GROUP BY event_key');
  expect(keys.map((row) => row.event_key).sort()).toEqual([...load.keys].sort());
  const [row] = await queryRows<{ n: string; tokens: string; keys: string }>(
    clickhouse,
    'SELECT count() AS n, sum(t) AS tokens, uniqExact(event_key) AS keys FROM (SELECT event_key, any(total_tokens) AS t FROM usage_events GROUP BY event_key)',
  );
  expect(Number(row!.n)).toBe(distinct);
  expect(Number(row!.keys)).toBe(distinct);
  expect(Number(row!.tokens)).toBe(expectedTokens);
  // The rollups count every row inserted into usage_events: a row inserted twice would
  // be counted twice here even after ReplacingMergeTree collapsed it in the raw table.
  // An insert fills usage_events before its views: wait for the views to catch up, then
  // the count must be exact (a row inserted twice would leave it above distinct).
  const rollupCount = async () =>
    Number((await queryRows<{ n: string }>(clickhouse, 'SELECT countMerge(requests) AS n FROM usage_rollup_by_minute'))[0]!.n);
  await eventually(async () => (await rollupCount()) >= distinct, 30_000, 200);
  expect(await rollupCount()).toBe(distinct);
}

/** An ingester on a Redis of its own (its own port and folder), small units, short retries; `cleanups` stops them. */
export async function ingesterOnPrivateRedis(n: ReturnType<typeof testNames>, port: number, cleanups: (() => Promise<unknown>)[]) {
  const privateRedis = await startPrivateRedis(port);
  cleanups.push(() => privateRedis.stop());
  const ingester = await startIngester({
    ...n,
    extraEnv: { REDIS_URL: privateRedis.address, INGEST_BATCH_MAX_ROWS: 500, INGEST_RETRY_MAX_MS: 2000 },
  });
  cleanups.push(() => ingester.stop());
  const clickhouse = testClickHouse(n.database);
  cleanups.push(() => clickhouse.close());
  return { n, privateRedis, ingester, clickhouse };
}
