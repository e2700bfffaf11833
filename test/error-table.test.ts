// Every documented error answer of both HTTP services, through their real route
// definitions (app.inject(), no sockets): the gateway's and the admin service's apps
// are built as server.ts builds them, with in-memory dependencies in place of Kafka,
// Redis and ClickHouse. Each answer must carry the documented body (errors.ts:
// statusCode, errorType, message; `errors` on a 400), its request id, and Retry-After
// where a client should come back. test/error-answers.integration.test.ts checks the
// same bodies from the real processes over HTTP.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import type { FastifyInstance, InjectOptions } from 'fastify';
import { pino } from 'pino';
import { buildQueuedRecordSchema, compileValidators, DEFAULT_RECORD_BOUNDS } from '@otm/schemas';
import { errorCatalog, type ErrorType } from '@otm/shared/errors';
import { Registry } from 'prom-client';
import { generateKey, hashKey } from '@otm/shared/keys/key-format';
import type { CreatedKey, IngestKeyRecord } from '@otm/shared/keys/key-store';
import { buildApp } from '../services/gateway/src/app.js';
import { createGatewayMetrics } from '../services/gateway/src/metrics.js';
import { ProduceUnavailableError, promiseQueue, type QueuedMessage } from '../services/gateway/src/produce-batcher.js';
import type { AcceptedReply } from '../services/gateway/src/record-intake.js';
import { buildAdminApp } from '../services/admin/src/app.js';
import { builtInDetectors, Redactor } from '../services/gateway/src/redact.js';

const logger = pino({ level: process.env.TABLE_LOG ?? 'silent' });
const limits = { requestTimeoutMs: 10_000, headersTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, maxConnections: 0 };
const record = () => JSON.parse(fs.readFileSync(new URL('../schemas/fixtures/valid/success.json', import.meta.url), 'utf8'));

/** What the in-memory dependencies do next: the tests below switch them. */
const world = { produce: 'ok' as 'ok' | 'unavailable' | 'bug', keyStore: 'ok' as 'ok' | 'down' };

const ingestKey = generateKey('qa');
const keyRecord: IngestKeyRecord = {
  id: 'key_table',
  environment: 'qa',
  name: 'table',
  description: '',
  createdAt: '2026-01-01T00:00:00Z',
  capture: 'full',
  captureInForce: 'full',
};
const adminToken = 'a'.repeat(40);
let gateway: FastifyInstance;
let admin: FastifyInstance;
const gatewayMetrics = createGatewayMetrics(() => 0);
const adminMetrics = new Registry();

beforeAll(async () => {
  const replay = new Map<string, AcceptedReply>();
  gateway = await buildApp(
    {
      instanceId: 'table',
      bodyLimitBytes: 64 * 1024,
      retryAfterSeconds: 5,
      rateLimit: { perSecond: 1, burst: 20 },
      connectionLimits: limits,
      jsonMaxDepth: 32,
      recordBounds: DEFAULT_RECORD_BOUNDS,
      batch: { maxRecords: 10, maxBytes: 64 * 1024, maxUnreadableLines: 20 },
    },
    {
      logger,
      keyCache: {
        lookup: async (hash) => {
          if (world.keyStore === 'down') throw new Error('Connection is closed.');
          return hash === hashKey(ingestKey) ? keyRecord : null;
        },
      },
      validators: compileValidators(buildQueuedRecordSchema()),
      schemaId: 1,
      batcher: promiseQueue(async (_message: QueuedMessage) => {
        if (world.produce === 'unavailable') throw new ProduceUnavailableError('no broker acknowledged');
        if (world.produce === 'bug') throw new TypeError("Cannot read properties of undefined (reading 'secret')");
      }),
      metrics: gatewayMetrics,
      ready: async () => world.keyStore === 'ok',
      replay,
      redactor: new Redactor(builtInDetectors('US')),
    },
  );
  const keys = new Map<string, CreatedKey>();
  const storeCall = async <T>(result: () => T): Promise<T> => {
    if (world.keyStore === 'down') throw new Error('Connection is closed.');
    return result();
  };
  admin = await buildAdminApp(
    { adminTokens: [adminToken], connectionLimits: limits, jsonMaxDepth: 32 },
    {
      logger,
      keyStore: {
        list: () => storeCall(() => [...keys.values()]),
        create: (input) =>
          storeCall(() => {
            const created = {
              ...keyRecord,
              ...input,
              description: input.description ?? '',
              id: `key_${keys.size}`,
              key: generateKey(input.environment),
            };
            keys.set(created.id, created);
            return created;
          }),
        delete: (id) => storeCall(() => keys.delete(id)),
        setCapture: (id, capture) =>
          storeCall(() => {
            const key = keys.get(id);
            if (key) key.capture = capture;
            return key ?? null;
          }),
        environmentCaptures: () => storeCall(() => ({ prod: 'full', qa: 'full', preview: 'full', dev: 'full' }) as const),
        setEnvironmentCapture: () => storeCall(() => undefined),
      },
      metrics: adminMetrics,
      audit: { around: (_entry, change) => change(), recent: async () => [] },
      protectedRoutes: [
        (secured) =>
          secured.get('/v1/crash', async () => {
            throw new TypeError("Cannot read properties of undefined (reading 'secret')");
          }),
      ],
    },
  );
});
afterAll(async () => {
  await gateway?.close();
  await admin?.close();
});

interface Case {
  status: number;
  /** Sets the in-memory world; a request sent first (to use up an allowance, to remember a key). */
  before?: () => Promise<unknown> | void;
  request: InjectOptions;
  message?: string | RegExp;
}

const ingest = (body: unknown, headers: Record<string, string> = {}): InjectOptions => ({
  method: 'POST',
  url: '/v1/telemetry/usage',
  headers: { 'x-api-key': ingestKey, 'content-type': 'application/json', ...headers },
  payload: typeof body === 'string' ? body : JSON.stringify(body),
});
const asAdmin = (request: InjectOptions): InjectOptions => ({
  ...request,
  headers: { authorization: `Bearer ${adminToken}`, ...request.headers },
});

const gatewayCases: Record<ErrorType, Case | string> = {
  ValidationError: {
    status: 400,
    request: ingest({ ...record(), tokens: { input: '12' } }),
    message: 'The usage record does not match the schema.',
  },
  AuthError: { status: 401, request: ingest(record(), { 'x-api-key': 'otm_qa_nope' }), message: 'API key missing or incorrect.' },
  NotFound: { status: 404, request: { method: 'GET', url: '/v1/nowhere' }, message: 'No route for GET /v1/nowhere.' },
  RequestTimeout: 'a 408 is answered by Node before any route runs: error-answers.integration.test.ts and gateway-hostile',
  HeadersTooLarge: 'a 431 is answered by Node before any route runs (the shared edge; tested on the gateway: gateway-hostile)',
  PayloadTooLarge: { status: 413, request: ingest({ ...record(), io: { prompt: 'x'.repeat(70 * 1024) } }) },
  UnsupportedMediaType: { status: 415, request: { ...ingest('hello'), headers: { 'x-api-key': ingestKey, 'content-type': 'text/plain' } } },
  IdempotencyKeyReused: {
    status: 422,
    before: () => gateway.inject(ingest(record(), { 'idempotency-key': 'table-422' })),
    request: ingest({ ...record(), user: { ...record().user, id: 'someone-else' } }, { 'idempotency-key': 'table-422' }),
  },
  InternalError: { status: 500, before: () => void (world.produce = 'bug'), request: ingest(record()), message: 'Internal error.' },
  QueryTimeout: 'the gateway runs no analytics query: only the admin service answers 504',
  Unavailable: { status: 503, before: () => void (world.produce = 'unavailable'), request: ingest(record()) },
  // Last: it uses up the key's allowance (20 at once, 1/s) with two batches of ten.
  RateLimited: {
    status: 429,
    before: async () => {
      const ten = Array.from({ length: 10 }, record);
      for (let i = 0; i < 2; i += 1) await gateway.inject({ ...ingest(ten), url: '/v1/telemetry/usage/batch' });
    },
    request: ingest(record()),
  },
};

const adminCases: Record<ErrorType, Case | string> = {
  ValidationError: { status: 400, request: asAdmin({ method: 'POST', url: '/v1/keys', payload: { environment: 'moon', name: 'x' } }) },
  AuthError: { status: 401, request: { method: 'GET', url: '/v1/keys' }, message: 'Admin token missing or incorrect.' },
  NotFound: { status: 404, request: asAdmin({ method: 'DELETE', url: '/v1/keys/key_unknown' }), message: 'No key with this id.' },
  RequestTimeout: 'a 408 is answered by Node before any route runs: error-answers.integration.test.ts',
  HeadersTooLarge: 'a 431 is answered by Node before any route runs (the shared edge; tested on the gateway: gateway-hostile)',
  PayloadTooLarge: {
    status: 413,
    request: asAdmin({ method: 'POST', url: '/v1/keys', payload: { environment: 'qa', name: 'x', description: 'x'.repeat(1_100_000) } }),
  },
  UnsupportedMediaType: {
    status: 415,
    request: asAdmin({ method: 'POST', url: '/v1/keys', payload: 'hello', headers: { 'content-type': 'text/plain' } }),
  },
  IdempotencyKeyReused: 'the admin service takes no Idempotency-Key: creating a key twice makes two keys (docs/analytics-api.md)',
  RateLimited: 'the admin service has no rate limit: one operator port on loopback, a 32-character token (docs/analytics-api.md)',
  QueryTimeout: 'ClickHouse stopping a query at its limit: services/admin/src/analytics.integration.test.ts, over HTTP',
  InternalError: { status: 500, request: asAdmin({ method: 'GET', url: '/v1/crash' }), message: 'Internal error.' },
  Unavailable: {
    status: 503,
    before: () => void (world.keyStore = 'down'),
    request: asAdmin({ method: 'GET', url: '/v1/keys' }),
    message: 'The key store is unavailable; retry later.',
  },
};

describe.each([
  ['gateway', () => gateway, gatewayCases],
  ['admin service', () => admin, adminCases],
] as const)('%s: every documented error answer', (_service, app, cases) => {
  const table = Object.entries(cases).map(([type, entry]) => [type, entry] as [ErrorType, Case | string]);

  it.each(table.filter(([, entry]) => typeof entry !== 'string'))('%s', async (type, entry) => {
    const { status, before, request, message } = entry as Case;
    world.produce = 'ok';
    world.keyStore = 'ok';
    await before?.();
    const answer = await app().inject(request);
    expect(answer.statusCode, answer.body).toBe(status);
    expect(errorCatalog[type].statusCode).toBe(status);
    const body = answer.json();
    expect(Object.keys(body).sort()).toEqual(
      type === 'ValidationError' ? ['errorType', 'errors', 'message', 'statusCode'] : ['errorType', 'message', 'statusCode'],
    );
    expect(body).toMatchObject({ statusCode: status, errorType: type });
    if (message) expect(body.message).toMatch(message);
    expect(body.message).not.toMatch(/secret|Connection is closed|undefined/);
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
    expect(String(answer.headers['x-request-id'])).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-/);
    expect(answer.headers['retry-after'] !== undefined).toBe(errorCatalog[type].retriable && status !== 500);
    world.produce = 'ok';
    world.keyStore = 'ok';
  });

  it('covers every error type of the catalog, or says why the service never answers it', () => {
    expect(Object.keys(cases).sort()).toEqual(Object.keys(errorCatalog).sort());
    for (const [, entry] of table) if (typeof entry === 'string') expect(entry.length).toBeGreaterThan(20);
  });
});

describe('health and metrics at the edge', () => {
  it('both answer /healthz and /readyz without a key, 503 while a dependency is down', async () => {
    for (const app of [gateway, admin]) {
      world.keyStore = 'ok';
      expect((await app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
      expect((await app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    }
    world.keyStore = 'down';
    const down = await gateway.inject({ method: 'GET', url: '/readyz' });
    expect([down.statusCode, down.json()]).toEqual([503, { status: 'unavailable' }]);
    world.keyStore = 'ok';
  });

  it('count every answer once, by route pattern and status; the admin service shows its own behind the token', async () => {
    const gatewaySeries = await gatewayMetrics.registry.getSingleMetricAsString('otm_gateway_requests_total');
    expect(gatewaySeries).toMatch(/otm_gateway_requests_total\{route="\/v1\/telemetry\/usage",status="400"\} 1\n/);
    expect(gatewaySeries).toMatch(/otm_gateway_requests_total\{route="\(no route\)",status="404"\} 1\n/);
    expect((await admin.inject({ method: 'GET', url: '/metrics' })).statusCode).toBe(401);
    const scraped = await admin.inject(asAdmin({ method: 'GET', url: '/metrics' }));
    expect(scraped.headers['content-type']).toMatch(/^text\/plain/);
    expect(scraped.body).toMatch(/otm_admin_requests_total\{route="\/v1\/keys",status="503"\} 1\n/);
    expect(scraped.body).toMatch(/otm_admin_request_seconds_bucket\{le="\+Inf",route="\/v1\/keys"\} \d+/);
  });
});
