// Helpers for integration tests: the stack's addresses, unique names per test
// file, real service processes, an HTTPS client that trusts the local certificate,
// and readers for the topic and ClickHouse.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { inject } from 'vitest';
import { Agent, request as undiciRequest } from 'undici';
import { consumerLag, createKafka, type IncomingRecord } from '@otm/shared/kafka';
import { createRedis, type Redis } from '@otm/shared/redis';
import { createClickHouse, type ClickHouseClient } from '@otm/shared/clickhouse';
import { decodeWire } from '@otm/shared/registry';
import { KeyStore } from '@otm/shared/keys/key-store';
import type { Environment, QueuedUsageRecord } from '@otm/schemas';
import { ensureLocalCertificate } from '../../scripts/local-tls.js';
import { startService, type ServiceProcess } from '../../scripts/lib/service-process.js';
import { projectRoot } from '../../scripts/lib/project-root.js';

export interface StackAddresses {
  KAFKA_BROKERS: string;
  SCHEMA_REGISTRY_URL: string;
  REDIS_URL: string;
  CLICKHOUSE_URL: string;
  CLICKHOUSE_DATABASE: string;
  source: string;
}

export { projectRoot };

export function testStack(): StackAddresses {
  return inject('stack');
}

/** A name no other test file uses: topics, groups, prefixes, databases. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
}

/** Names of everything one test case owns: topic, Redis key prefix, database, consumer group. */
export function testNames(label: string) {
  return {
    topic: uniqueName(label),
    keyPrefix: `${uniqueName(label)}:`,
    database: uniqueName(label.replace(/-/g, '_')),
    groupId: uniqueName(label),
  };
}

export function stackEnv(overrides: Record<string, string | number | boolean> = {}): NodeJS.ProcessEnv {
  const stack = testStack();
  const { source, ...addresses } = stack;
  void source;
  // Metrics on a free port: a test never takes a fixed port (METRICS_PORT given wins).
  // Dedupe marks for an hour, not a day: no test runs that long, and a developer's stack
  // would otherwise carry every run's marks in Redis for a day (a million keys after a
  // day of test runs). An override wins here too.
  const env: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...addresses,
    LOG_LEVEL: 'info',
    METRICS_PORT: '0',
    DEDUPE_TTL_SECONDS: '3600',
  };
  for (const [name, value] of Object.entries(overrides)) env[name] = String(value);
  return env;
}

export async function testCertificate() {
  return ensureLocalCertificate(path.join(projectRoot, '.stack', 'tls'));
}

export { startService, type ServiceProcess };

export interface GatewayOptions {
  topic: string;
  keyPrefix: string;
  extraEnv?: Record<string, string | number | boolean>;
}

export async function startGateway(options: GatewayOptions): Promise<ServiceProcess> {
  const tls = await testCertificate();
  return startService(
    'gateway',
    stackEnv({
      USAGE_TOPIC: options.topic,
      USAGE_TOPIC_PARTITIONS: 3,
      REDIS_KEY_PREFIX: options.keyPrefix,
      GATEWAY_PORT: 0,
      METRICS_PORT: 0,
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      ...options.extraEnv,
    }),
    /gateway listening/,
  );
}

export interface IngesterOptions {
  topic: string;
  keyPrefix: string;
  database: string;
  groupId: string;
  extraEnv?: Record<string, string | number | boolean>;
}

export function startIngester(options: IngesterOptions): Promise<ServiceProcess> {
  return startService(
    'ingester',
    stackEnv({
      USAGE_TOPIC: options.topic,
      USAGE_TOPIC_PARTITIONS: 3,
      DLQ_TOPIC: `${options.topic}.dlq`,
      ERASURE_TOPIC: `${options.topic}.erasures`,
      REDIS_KEY_PREFIX: options.keyPrefix,
      CLICKHOUSE_DATABASE: options.database,
      INGEST_GROUP_ID: options.groupId,
      METRICS_PORT: 0,
      ...options.extraEnv,
    }),
    /ingester consuming/,
  );
}

let agent: Agent | undefined;
async function httpsAgent(): Promise<Agent> {
  if (!agent) {
    const tls = await testCertificate();
    agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile) }, pipelining: 0 });
  }
  return agent;
}

export interface HttpAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: any;
  text: string;
}

export async function httpRequest(
  url: string,
  options: { method?: string; headers?: Record<string, string>; body?: string | Buffer } = {},
): Promise<HttpAnswer> {
  const response = await undiciRequest(url, {
    method: (options.method ?? 'GET') as 'GET',
    headers: options.headers,
    body: options.body,
    dispatcher: url.startsWith('https:') ? await httpsAgent() : undefined,
  });
  const text = await response.body.text();
  let body: unknown;
  try {
    body = text ? JSON.parse(text) : undefined;
  } catch {
    body = undefined;
  }
  return { status: response.statusCode, headers: response.headers, body, text };
}

/** POST a usage record with an X-API-Key (or other given headers). */
export function postUsage(gatewayUrl: string, body: unknown, headers: Record<string, string>): Promise<HttpAnswer> {
  return httpRequest(`${gatewayUrl}/v1/telemetry/usage`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

export async function withRedis<T>(work: (redis: Redis) => Promise<T>): Promise<T> {
  const redis = createRedis(testStack().REDIS_URL);
  await redis.connect();
  try {
    return await work(redis);
  } finally {
    redis.disconnect();
  }
}

export function createTestKey(keyPrefix: string, environment: Environment = 'dev', name = 'test') {
  return withRedis((redis) => new KeyStore(redis, keyPrefix).create({ environment, name }));
}

export interface TopicRecord {
  key: string;
  schemaId: number;
  value: QueuedUsageRecord;
  headers: IncomingRecord['headers'];
  partition: number;
  offset: string;
}

/** Reads the whole topic from the beginning (on the stack's Kafka unless `brokers` is given) until `until` holds or the time runs out. */
export async function readTopic(
  topic: string,
  until: (records: TopicRecord[]) => boolean,
  timeoutMs = 30_000,
  brokers = testStack().KAFKA_BROKERS,
): Promise<TopicRecord[]> {
  const kafka = createKafka({ brokers: brokers.split(','), clientId: 'test-reader' });
  const consumer = kafka.consumer({ groupId: uniqueName('reader'), maxWaitTimeInMs: 100 });
  const records: TopicRecord[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic, fromBeginning: true });
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => resolve(), timeoutMs);
      consumer
        .run({
          eachMessage: async ({ message, partition }) => {
            const wire = decodeWire(message.value);
            if (!wire.ok) throw new Error(wire.reason);
            records.push({
              key: message.key?.toString() ?? '',
              schemaId: wire.schemaId,
              value: JSON.parse(wire.json) as QueuedUsageRecord,
              headers: message.headers,
              partition,
              offset: message.offset,
            });
            if (until(records)) {
              clearTimeout(timer);
              resolve();
            }
          },
        })
        .catch(reject);
    });
  } finally {
    await consumer.disconnect();
  }
  return records;
}

/** A readTopic condition: every one of these requestIds has been read (records are checked once each). */
export function holdsRequestIds(requestIds: Iterable<string>): (records: TopicRecord[]) => boolean {
  const waiting = new Set(requestIds);
  let checked = 0;
  return (records) => {
    for (; checked < records.length; checked++) waiting.delete(records[checked]!.value.meta.requestId);
    return waiting.size === 0;
  };
}

export function testClickHouse(database: string): ClickHouseClient {
  const stack = testStack();
  return createClickHouse({ url: stack.CLICKHOUSE_URL, database, username: 'default', password: '' });
}

export async function queryRows<T>(client: ClickHouseClient, query: string): Promise<T[]> {
  const result = await client.query({ query, format: 'JSONEachRow' });
  return result.json<T>();
}

/** Polls until check returns a value, or fails after timeoutMs. */
export async function eventually<T>(check: () => Promise<T | undefined | false>, timeoutMs = 30_000, everyMs = 200): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await check();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      last = error;
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
  throw new Error(`condition not met within ${timeoutMs} ms${last ? `: ${(last as Error).message}` : ''}`);
}

export function fixture(name: string): Record<string, any> {
  return JSON.parse(fs.readFileSync(path.join(projectRoot, 'schemas/fixtures', name), 'utf8'));
}

export interface DeadLetterRecord {
  key: string;
  headers: Record<string, string>;
  value: string;
}

/** Reads a dead-letter topic from the beginning until `until` holds or the time runs out. */
export async function readDeadLetters(
  dlqTopic: string,
  until: (letters: DeadLetterRecord[]) => boolean,
  timeoutMs = 20_000,
): Promise<DeadLetterRecord[]> {
  const kafka = createKafka({ brokers: testStack().KAFKA_BROKERS.split(','), clientId: 'dlq-reader' });
  const consumer = kafka.consumer({ groupId: uniqueName('dlq'), maxWaitTimeInMs: 100 });
  const letters: DeadLetterRecord[] = [];
  await consumer.connect();
  try {
    await consumer.subscribe({ topic: dlqTopic, fromBeginning: true });
    await new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, timeoutMs);
      void consumer.run({
        eachMessage: async ({ message }) => {
          letters.push({
            key: message.key?.toString() ?? '',
            headers: Object.fromEntries(Object.entries(message.headers ?? {}).map(([name, value]) => [name, String(value)])),
            value: message.value?.toString('latin1') ?? '',
          });
          if (until(letters)) {
            clearTimeout(timer);
            resolve();
          }
        },
      });
    });
  } finally {
    await consumer.disconnect();
  }
  return letters;
}

/** Messages of `topic` the group has not committed yet, summed over partitions. */
export async function groupLag(groupId: string, topic: string, brokers = testStack().KAFKA_BROKERS): Promise<number> {
  const admin = createKafka({ brokers: brokers.split(','), clientId: 'test-lag' }).admin();
  await admin.connect();
  try {
    return (await consumerLag(admin, groupId, topic)).reduce((sum, partition) => sum + partition.lag, 0);
  } finally {
    await admin.disconnect();
  }
}

/** A TCP port free on the host now (the OS picks it; closed again before it is returned). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}
