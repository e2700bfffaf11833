// Redaction costs CPU, so it runs only on records that will be queued: never on a
// record refused by the schema, nor on one whose idempotency key was used for another
// record (422), nor on a replay answered from the cache. The gateway app built with
// in-memory dependencies (app.inject(), no sockets) and a redactor that counts its calls.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import type { FastifyInstance } from 'fastify';
import { pino } from 'pino';
import { buildQueuedRecordSchema, compileValidators, DEFAULT_RECORD_BOUNDS } from '@otm/schemas';
import { generateKey, hashKey } from '@otm/shared/keys/key-format';
import type { IngestKeyRecord } from '@otm/shared/keys/key-store';
import { buildApp } from './app.js';
import { createGatewayMetrics } from './metrics.js';
import { promiseQueue } from './produce-batcher.js';
import type { AcceptedReply } from './record-intake.js';
import { builtInDetectors, Redactor } from './redact.js';

class CountingRedactor extends Redactor {
  calls = 0;
  override redact(text: string) {
    this.calls++;
    return super.redact(text);
  }
}

const ingestKey = generateKey('qa');
const keyRecord: IngestKeyRecord = {
  id: 'key_capture',
  environment: 'qa',
  name: 'capture',
  description: '',
  createdAt: '2026-01-01T00:00:00Z',
  capture: 'redact',
  captureInForce: 'redact',
};
const record = () => JSON.parse(fs.readFileSync(new URL('../../../schemas/fixtures/valid/success.json', import.meta.url), 'utf8'));
const redactor = new CountingRedactor(builtInDetectors('US'));
const queued: string[] = [];
let app: FastifyInstance;

beforeAll(async () => {
  app = await buildApp(
    {
      instanceId: 'capture',
      bodyLimitBytes: 1_048_576,
      retryAfterSeconds: 5,
      rateLimit: { perSecond: 0, burst: 1 },
      connectionLimits: { requestTimeoutMs: 10_000, headersTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, maxConnections: 0 },
      jsonMaxDepth: 32,
      recordBounds: DEFAULT_RECORD_BOUNDS,
      batch: { maxRecords: 100, maxBytes: 5 * 1_048_576, maxUnreadableLines: 20 },
    },
    {
      logger: pino({ level: 'silent' }),
      keyCache: { lookup: async (hash) => (hash === hashKey(ingestKey) ? keyRecord : null) },
      validators: compileValidators(buildQueuedRecordSchema()),
      schemaId: 1,
      batcher: promiseQueue(async (message) => void queued.push(message.key)),
      metrics: createGatewayMetrics(() => 0),
      ready: async () => true,
      replay: new Map<string, AcceptedReply>(),
      redactor,
    },
  );
});
afterAll(async () => {
  await app.close();
});

const post = (url: string, body: unknown, headers: Record<string, string> = {}) =>
  app.inject({
    method: 'POST',
    url,
    headers: { 'content-type': 'application/json', 'x-api-key': ingestKey, ...headers },
    payload: JSON.stringify(body),
  });

describe('redaction only on records that will be queued', () => {
  it('runs on a record that is queued (prompt and response), and not on its replay', async () => {
    const before = redactor.calls;
    expect((await post('/v1/telemetry/usage', record(), { 'idempotency-key': 'once' })).statusCode).toBe(202);
    expect(redactor.calls - before).toBe(2);
    expect((await post('/v1/telemetry/usage', record(), { 'idempotency-key': 'once' })).statusCode).toBe(202);
    expect(redactor.calls - before).toBe(2);
  });

  it('does not run on a record whose key was used for another record (422), single or in a batch', async () => {
    const other = record();
    other.tokens.output += 1;
    const before = redactor.calls;
    expect((await post('/v1/telemetry/usage', other, { 'idempotency-key': 'once' })).statusCode).toBe(422);
    const batch = Array.from({ length: 10 }, () => ({ ...other, idempotencyKey: 'once' }));
    const answer = await post('/v1/telemetry/usage/batch', batch);
    expect(answer.statusCode).toBe(400);
    expect(answer.json().results.every((result: { status: number }) => result.status === 422)).toBe(true);
    expect(redactor.calls - before).toBe(0);
  });

  it('does not run on records the schema refuses', async () => {
    const before = redactor.calls;
    const invalid = { ...record(), tokens: { input: -1, output: 1 } };
    expect((await post('/v1/telemetry/usage/batch', [invalid, invalid, record()])).statusCode).toBe(207);
    expect(redactor.calls - before).toBe(2); // the valid record's prompt and response only
  });
});
