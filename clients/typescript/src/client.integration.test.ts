// The client against the real gateway, Kafka, ingester and ClickHouse: every record
// lands exactly once, records queued while the gateway is away land once it returns,
// and a full queue counts exactly what it drops.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { Agent, fetch as undiciFetch } from 'undici';
import {
  createTestKey,
  eventually,
  fixture,
  freePort,
  queryRows,
  startGateway,
  startIngester,
  testCertificate,
  testClickHouse,
  testNames,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { createClient, type ClientOptions, type UsageRecord } from './index.js';

const names = testNames('sdk');
let ingester: ServiceProcess;
let gateway: ServiceProcess;
let gatewayPort: number;
let apiKey: string;
let trustingFetch: typeof fetch;
const clickhouse = () => testClickHouse(names.database);

beforeAll(async () => {
  gatewayPort = await freePort();
  gateway = await startGateway({ ...names, extraEnv: { GATEWAY_PORT: gatewayPort, RATE_LIMIT_PER_SECOND: 0 } });
  ingester = await startIngester(names);
  apiKey = (await createTestKey(names.keyPrefix, 'prod', 'sdk')).key;
  // The local certificate is self-signed: a fetch that trusts it, as a user would configure.
  const dispatcher = new Agent({ connect: { ca: fs.readFileSync((await testCertificate()).certFile) } });
  trustingFetch = ((url: string, init: object) => undiciFetch(url, { ...init, dispatcher })) as unknown as typeof fetch;
});
afterAll(async () => {
  await gateway?.stop();
  await ingester?.stop();
});

const clientFor = (options: Partial<ClientOptions> = {}) =>
  createClient({ endpoint: `https://127.0.0.1:${gatewayPort}`, apiKey, fetch: trustingFetch, ...options });

function recordOf(userId: string): UsageRecord {
  const record = fixture('valid/success.json') as UsageRecord;
  record.user.id = userId;
  return record;
}

/** Rows in ClickHouse per user id among those starting with `tag`. */
async function storedCounts(tag: string): Promise<Map<string, number>> {
  const client = clickhouse();
  try {
    const rows = await queryRows<{ user_id: string; n: string }>(
      client,
      `SELECT user_id, count() AS n FROM usage_events WHERE startsWith(user_id, '${tag}') GROUP BY user_id`,
    );
    return new Map(rows.map((row) => [row.user_id, Number(row.n)]));
  } finally {
    await client.close();
  }
}

async function waitForStored(tag: string, expected: number): Promise<Map<string, number>> {
  await eventually(async () => [...(await storedCounts(tag)).values()].reduce((sum, n) => sum + n, 0) >= expected, 60_000, 500);
  // Anything more (a duplicate) would arrive with the same batches: look once more after a pause.
  await new Promise((resolve) => setTimeout(resolve, 2000));
  return storedCounts(tag);
}

describe('the client against the real gateway', () => {
  it('10,000 records through record() and shutdown() land exactly once in ClickHouse', async () => {
    const tag = uniqueName('sdk-all');
    const client = clientFor();
    for (let index = 0; index < 10_000; index++) expect(client.record(recordOf(`${tag}-${index}`))).toBe(true);
    const stats = await client.shutdown(60_000);
    expect(stats).toEqual({ queued: 0, sent: 10_000, failed: 0, dropped: 0, retries: 0 });
    const stored = await waitForStored(tag, 10_000);
    expect(stored.size).toBe(10_000);
    expect([...stored.values()].every((n) => n === 1)).toBe(true);
  });

  it('records queued while the gateway is stopped land after it returns, with no duplicates', async () => {
    const tag = uniqueName('sdk-outage');
    const errors: number[] = [];
    const client = clientFor({
      flushAt: 100,
      flushIntervalMs: 200,
      retryInitialDelayMs: 100,
      retryMaxDelayMs: 1000,
      onError: (e) => errors.push(e.status),
    });
    for (let index = 0; index < 500; index++) client.record(recordOf(`${tag}-${index}`));
    expect(await client.flush(20_000)).toBe(true);
    await gateway.stop();
    for (let index = 500; index < 1500; index++) client.record(recordOf(`${tag}-${index}`));
    await new Promise((resolve) => setTimeout(resolve, 3000));
    expect(client.stats().sent).toBe(500);
    expect(client.stats().queued).toBe(1000);
    gateway = await startGateway({ ...names, extraEnv: { GATEWAY_PORT: gatewayPort, RATE_LIMIT_PER_SECOND: 0 } });
    const stats = await client.shutdown(30_000);
    expect(stats).toMatchObject({ queued: 0, sent: 1500, failed: 0, dropped: 0 });
    expect(stats.retries).toBeGreaterThan(0);
    expect(errors.every((status) => status === 0 || status === 503)).toBe(true);
    const stored = await waitForStored(tag, 1500);
    expect(stored.size).toBe(1500);
    expect([...stored.values()].every((n) => n === 1)).toBe(true);
  });

  it.each(['drop-newest', 'drop-oldest'] as const)('a full queue counts exactly what it drops (%s)', async (overflow) => {
    const tag = uniqueName(`sdk-${overflow}`);
    // One request at a time; the first 100 leave at once, the next 100 fill the queue, the last 50 overflow.
    const client = clientFor({ flushAt: 100, maxQueueSize: 100, maxConcurrentRequests: 1, overflow, flushIntervalMs: 60_000 });
    const queued = Array.from({ length: 250 }, (_, index) => client.record(recordOf(`${tag}-${index}`)));
    expect(client.stats()).toMatchObject({ queued: 200, dropped: 50 });
    expect(queued.filter((ok) => !ok)).toHaveLength(overflow === 'drop-newest' ? 50 : 0);
    const stats = await client.shutdown(20_000);
    expect(stats).toEqual({ queued: 0, sent: 200, failed: 0, dropped: 50, retries: 0 });
    const stored = await waitForStored(tag, 200);
    const expected =
      overflow === 'drop-newest'
        ? Array.from({ length: 200 }, (_, index) => index)
        : [...Array.from({ length: 100 }, (_, index) => index), ...Array.from({ length: 100 }, (_, index) => 150 + index)];
    expect([...stored.keys()].map((id) => Number(id.slice(tag.length + 1))).sort((a, b) => a - b)).toEqual(expected);
  });

  it('times a streaming call: start, first token and end', async () => {
    const tag = uniqueName('sdk-timer');
    const client = clientFor();
    const call = client.startCall({ model: 'gpt-4o', provider: 'openai', user: { id: tag, type: 'external' }, prompt: 'Hello' });
    await new Promise((resolve) => setTimeout(resolve, 120));
    call.firstToken();
    await new Promise((resolve) => setTimeout(resolve, 80));
    const record = call.end({ inputTokens: 5, outputTokens: 7, response: 'Hi there' });
    await client.shutdown();
    const ttft = Date.parse(record.timing!.firstTokenTime) - Date.parse(record.timing!.startTime);
    expect(ttft).toBeGreaterThanOrEqual(100);
    expect(record.timing!.latencyMs).toBeGreaterThanOrEqual(180);
    const client2 = clickhouse();
    try {
      const rows = await eventually(async () => {
        const found = await queryRows<{ input_tokens: string; ttft_ms: string }>(
          client2,
          `SELECT * FROM usage_events WHERE user_id = '${tag}'`,
        );
        return found.length > 0 ? found : undefined;
      });
      expect(rows).toHaveLength(1);
      expect(Number(rows[0]!.input_tokens)).toBe(5);
    } finally {
      await client2.close();
    }
  });
});
