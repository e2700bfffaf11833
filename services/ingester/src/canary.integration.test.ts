// The freshness canary against the real gateway, Kafka and ClickHouse: probes go
// through the public endpoint, are measured until queryable, and never appear in
// usage_events or the rollups, while ordinary records beside them load as usual.
import { afterAll, describe, expect, it } from 'vitest';
import {
  createTestKey,
  eventually,
  fixture,
  postUsage,
  queryRows,
  startGateway,
  startIngester,
  testCertificate,
  testClickHouse,
  testNames,
} from '../../../test/helpers/stack.js';

const cleanups: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
});

async function scrape(port: number | undefined): Promise<string> {
  return (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
}

describe('freshness canary', () => {
  it('measures probes sent through the ingest endpoint until queryable; canary rows stay out of the analytics', async () => {
    const n = testNames('canary');
    const gateway = await startGateway({ topic: n.topic, keyPrefix: n.keyPrefix });
    cleanups.push(() => gateway.stop());
    const canaryKey = await createTestKey(n.keyPrefix, 'prod', 'otm-canary');
    const userKey = await createTestKey(n.keyPrefix, 'prod', 'user');
    const tls = await testCertificate();
    const ingester = await startIngester({
      ...n,
      extraEnv: {
        CANARY_API_KEY: canaryKey.key,
        CANARY_GATEWAY_URL: gateway.url,
        CANARY_CA_FILE: tls.certFile,
        CANARY_INTERVAL_MS: 300,
      },
    });
    cleanups.push(() => ingester.stop());
    for (let i = 0; i < 5; i++) {
      const answer = await postUsage(gateway.url, fixture('valid/success.json'), {
        'x-api-key': userKey.key,
        'idempotency-key': `user-${i}`,
      });
      expect(answer.status).toBe(202);
    }
    const text = await eventually(async () => {
      const metrics = await scrape(ingester.metricsPort);
      const count = Number(/^otm_canary_freshness_seconds_count (\d+)/m.exec(metrics)?.[1] ?? 0);
      return count >= 3 ? metrics : undefined;
    }, 60_000).catch((error: Error) => {
      throw new Error(`${error.message}; ingester logs:\n${ingester.logs.slice(-15).join('\n')}`);
    });
    expect(text).toMatch(/^otm_canary_probes_total\{outcome="loaded"\} [3-9]|^otm_canary_probes_total\{outcome="loaded"\} \d{2,}/m);
    const sum = Number(/^otm_canary_freshness_seconds_sum ([\d.e+-]+)/m.exec(text)?.[1]);
    expect(sum).toBeGreaterThan(0);

    const clickhouse = testClickHouse(n.database);
    cleanups.push(() => clickhouse.close());
    const [probes] = await queryRows<{ n: string }>(
      clickhouse,
      "SELECT count() AS n FROM canary_probes WHERE probe_id LIKE 'otm-canary-%'",
    );
    expect(Number(probes!.n)).toBeGreaterThanOrEqual(3);
    await eventually(async () => {
      const [row] = await queryRows<{ n: string }>(clickhouse, `SELECT count() AS n FROM usage_events WHERE api_key_id = '${userKey.id}'`);
      return Number(row!.n) === 5;
    });
    const [canaryRows] = await queryRows<{ n: string }>(
      clickhouse,
      `SELECT count() AS n FROM usage_events WHERE api_key_id = '${canaryKey.id}' OR model_id = 'otm-canary'`,
    );
    expect(Number(canaryRows!.n)).toBe(0);
    // An insert fills usage_events before its views: wait for the rollup, then it must hold
    // exactly the five user records (no canary probe counted).
    const rollupCount = async () =>
      Number((await queryRows<{ n: string }>(clickhouse, 'SELECT countMerge(requests) AS n FROM usage_rollup_by_minute'))[0]!.n);
    await eventually(async () => (await rollupCount()) >= 5, 30_000);
    expect(await rollupCount()).toBe(5);
  }, 120_000);
});
