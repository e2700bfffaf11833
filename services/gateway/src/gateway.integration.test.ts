// The ingest endpoint against the real stack: every rule of the specification and
// of decisions.md, each 202 read back from Kafka and checked against the schema the
// registry holds for the message's schema id.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import tls from 'node:tls';
import fs from 'node:fs';
import { DEFAULT_PLAUSIBLE_BOUNDS, compileValidators } from '@otm/schemas';
import { createRegistry, fetchJsonSchema } from '@otm/shared/registry';
import {
  createTestKey,
  fixture,
  httpRequest,
  postUsage,
  readTopic,
  startGateway,
  testCertificate,
  testStack,
  uniqueName,
  withRedis,
  type ServiceProcess,
  type TopicRecord,
} from '../../../test/helpers/stack.js';
import { KeyStore } from '@otm/shared/keys/key-store';
import { ROUTES, increments, postBy, recordCounts } from '../../../test/helpers/record-counts.js';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const RFC3339_MS_Z = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

const topic = uniqueName('gw-contract');
const keyPrefix = `${uniqueName('gw')}:`;
let gateway: ServiceProcess;
let apiKey: string;
let apiKeyId: string;
const accepted = new Map<string, unknown>(); // requestId -> body as sent

beforeAll(async () => {
  gateway = await startGateway({ topic, keyPrefix });
  const created = await createTestKey(keyPrefix, 'qa', 'contract');
  apiKey = created.key;
  apiKeyId = created.id;
});
afterAll(async () => {
  await gateway?.stop();
});

function post(body: unknown, headers: Record<string, string> = { 'x-api-key': apiKey }) {
  return postUsage(gateway.url, body, headers);
}

async function expectAccepted(body: Record<string, any>, headers?: Record<string, string>) {
  const answer = await post(body, headers);
  expect(answer.status, answer.text).toBe(202);
  accepted.set(answer.body.requestId, body);
  return answer;
}

async function expectInvalid(body: unknown, path: string) {
  const answer = await post(body);
  expect(answer.status, answer.text).toBe(400);
  expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
  expect(typeof answer.body.message).toBe('string');
  expect(answer.body.errors.map((error: { path: string }) => error.path)).toContain(path);
  for (const error of answer.body.errors) expect(typeof error.message).toBe('string');
  return answer;
}

const success = () => fixture('valid/success.json');
const errorRecord = () => fixture('valid/error-stack.json');

describe('202 accepted', () => {
  it('answers a success record with requestId (UUIDv7), status, message, timestamp and usage', async () => {
    const answer = await expectAccepted(success());
    expect(answer.body.requestId).toMatch(UUID_V7);
    expect(answer.body.status).toBe('accepted');
    expect(answer.body.message).toEqual(expect.any(String));
    expect(answer.body.timestamp).toMatch(RFC3339_MS_Z);
    expect(answer.body.usage).toEqual({ inputTokens: 1200, outputTokens: 350, totalTokens: 1550 });
  });

  it('totalTokens is input + output when the client sends no total', async () => {
    const body = success();
    delete body.tokens.total;
    const answer = await expectAccepted(body);
    expect(answer.body.usage).toEqual({ inputTokens: 1200, outputTokens: 350, totalTokens: 1550 });
  });

  it('totalTokens repeats tokens.total as sent, even when it disagrees with the sum', async () => {
    const body = success();
    body.tokens.total = 2000;
    expect((await expectAccepted(body)).body.usage.totalTokens).toBe(2000);
  });

  it('an error record without tokens answers zeros', async () => {
    const answer = await expectAccepted(errorRecord());
    expect(answer.body.usage).toEqual({ inputTokens: 0, outputTokens: 0, totalTokens: 0 });
  });

  it('accepts the error sample with `stack` and the `stacktrace` variant', async () => {
    await expectAccepted(fixture('valid/error-stack.json'));
    await expectAccepted(fixture('valid/error-stacktrace.json'));
  });

  it('accepts an error record that also carries tokens, timing and io (a partly streamed call)', async () => {
    const answer = await expectAccepted(fixture('valid/error-partial-stream.json'));
    expect(answer.body.usage).toEqual({ inputTokens: 500, outputTokens: 20, totalTokens: 520 });
  });

  it('accepts form B (Authorization: Bearer) and both forms carrying the same key', async () => {
    await expectAccepted(success(), { authorization: `Bearer ${apiKey}` });
    await expectAccepted(success(), { authorization: `Bearer ${apiKey}`, 'x-api-key': apiKey });
  });

  it('accepts application/json with a charset parameter', async () => {
    await expectAccepted(success(), { 'x-api-key': apiKey, 'content-type': 'application/json; charset=utf-8' });
  });

  it('accepts any keys in context, timestamps with offsets, and token counts at their bounds', async () => {
    const body = success();
    body.context = { anything: [1, { nested: true }], 'dotted.key': null, n: 1.5 };
    body.timing.startTime = '2026-11-22T11:00:00+01:00';
    body.tokens = { input: 0, output: DEFAULT_PLAUSIBLE_BOUNDS.maxTokens };
    await expectAccepted(body);
  });

  it('answers a retry with the same Idempotency-Key with the original requestId', async () => {
    const idempotencyKey = uniqueName('idem');
    const headers = { 'x-api-key': apiKey, 'idempotency-key': idempotencyKey };
    const first = await expectAccepted(success(), headers);
    const second = await post(success(), headers);
    expect(second.status).toBe(202);
    expect(second.body.requestId).toBe(first.body.requestId);
  });
});

describe('the queued record on the topic', () => {
  let records: TopicRecord[];
  beforeAll(async () => {
    // One more record with an Idempotency-Key, to check the message key's scoping.
    const answer = await expectAccepted(success(), { 'x-api-key': apiKey, 'idempotency-key': 'order-42' });
    accepted.set(answer.body.requestId, success());
    records = await readTopic(topic, (all) => [...accepted.keys()].every((id) => all.some((r) => r.value.meta.requestId === id)));
  });

  it('holds every 202-answered record, in the registry wire format, valid against the registered schema', async () => {
    const registry = createRegistry(testStack().SCHEMA_REGISTRY_URL);
    const schemaIds = new Set(records.map((record) => record.schemaId));
    expect(schemaIds.size).toBe(1);
    const validators = compileValidators(await fetchJsonSchema(registry, [...schemaIds][0]!));
    for (const requestId of accepted.keys()) {
      const record = records.find((r) => r.value.meta.requestId === requestId);
      expect(record, `record ${requestId} on the topic`).toBeDefined();
      expect(validators.queuedRecord(record!.value), JSON.stringify(validators.queuedRecord.errors)).toBe(true);
    }
  });

  it('carries the client record unchanged beside the gateway metadata', () => {
    for (const [requestId, sent] of accepted) {
      const record = records.find((r) => r.value.meta.requestId === requestId)!;
      const expected = structuredClone(sent) as Record<string, any>;
      if (expected.error?.stacktrace !== undefined) {
        expected.error.stack = expected.error.stacktrace;
        delete expected.error.stacktrace;
      }
      expect(record.value.record).toEqual(expected);
      expect(record.value.meta).toMatchObject({ requestId, apiKeyId, environment: 'qa' });
      expect(record.value.meta.receivedAt).toMatch(RFC3339_MS_Z);
      expect(record.value.meta.gatewayId).toEqual(expect.any(String));
      // The request id travels as a header too, for the ingester's logs and dead letters.
      expect(record.headers?.['x-request-id']?.toString()).toBe(requestId);
      // What the value is and which schema wrote it, readable without decoding the value.
      expect(record.headers?.['content-type']?.toString()).toBe('application/json; framing=schema-registry');
      expect(record.headers?.['x-schema-id']?.toString()).toBe(String(record.schemaId));
    }
  });

  it('normalises stacktrace to stack', () => {
    const record = records.find((r) => r.value.record.request.modelId === 'gemini-1.5-pro')!;
    expect(record.value.record.error).toEqual({
      code: 'timeout',
      message: 'Upstream timed out',
      stack: 'TimeoutError: Upstream timed out',
    });
  });

  it('is keyed by the Idempotency-Key scoped by the API key id, else by the requestId', () => {
    const withKey = records.find((r) => r.value.meta.idempotencyKey === 'order-42')!;
    expect(withKey.key).toBe(`${apiKeyId}:order-42`);
    expect(withKey.value.meta.eventKey).toBe(`${apiKeyId}:order-42`);
    const withoutKey = records.find((r) => r.value.meta.idempotencyKey === null)!;
    expect(withoutKey.key).toBe(withoutKey.value.meta.requestId);
  });
});

describe('400 validation errors', () => {
  it.each([
    ['/request', (b: any) => delete b.request],
    ['/user', (b: any) => delete b.user],
    ['/request/modelId', (b: any) => delete b.request.modelId],
    ['/request/status', (b: any) => delete b.request.status],
    ['/request/provider', (b: any) => delete b.request.provider],
    ['/user/id', (b: any) => delete b.user.id],
    ['/user/type', (b: any) => delete b.user.type],
    ['/tokens/input', (b: any) => delete b.tokens.input],
    ['/tokens/output', (b: any) => delete b.tokens.output],
    ['/timing/startTime', (b: any) => delete b.timing.startTime],
    ['/timing/firstTokenTime', (b: any) => delete b.timing.firstTokenTime],
    ['/timing/lastTokenTime', (b: any) => delete b.timing.lastTokenTime],
  ])('missing %s', async (path, mutate) => {
    const body = success();
    mutate(body);
    await expectInvalid(body, path);
  });

  it.each([
    ['/request/modelId', (b: any) => (b.request.modelId = 42)],
    ['/request/status', (b: any) => (b.request.status = 'ok')],
    ['/request/provider', (b: any) => (b.request.provider = null)],
    ['/user/id', (b: any) => (b.user.id = 7)],
    ['/user/type', (b: any) => (b.user.type = 'robot')],
    ['/user/name', (b: any) => (b.user.name = ['x'])],
    ['/tokens/input', (b: any) => (b.tokens.input = '12')],
    ['/tokens/input', (b: any) => (b.tokens.input = -1)],
    ['/tokens/output', (b: any) => (b.tokens.output = 1.5)],
    ['/tokens/total', (b: any) => (b.tokens.total = 2 ** 53)],
    ['/timing/startTime', (b: any) => (b.timing.startTime = '2026-11-22T10:00:00')],
    ['/timing/firstTokenTime', (b: any) => (b.timing.firstTokenTime = 'yesterday')],
    ['/timing/lastTokenTime', (b: any) => (b.timing.lastTokenTime = 1700000000)],
    ['/timing/latencyMs', (b: any) => (b.timing.latencyMs = '2100')],
    ['/io/prompt', (b: any) => (b.io.prompt = { text: 'hi' })],
    ['/io/response', (b: any) => (b.io.response = 3)],
    ['/context', (b: any) => (b.context = ['not', 'an', 'object'])],
    ['/context', (b: any) => (b.context = 'scalar')],
    ['/request', (b: any) => (b.request = 'gpt-4o')],
    ['/tokens', (b: any) => (b.tokens = [1, 2])],
  ])('wrong type at %s', async (path, mutate) => {
    const body = success();
    mutate(body);
    await expectInvalid(body, path);
  });

  it('unknown members are refused everywhere except in context', async () => {
    const top = success();
    top.extra = 1;
    await expectInvalid(top, '/extra');
    const nested = success();
    nested.tokens.cached = 3;
    await expectInvalid(nested, '/tokens/cached');
  });

  it('success requires tokens, timing and io', async () => {
    for (const member of ['tokens', 'timing', 'io']) {
      const body = success();
      delete body[member];
      await expectInvalid(body, `/${member}`);
    }
  });

  it('error requires error, with code and message', async () => {
    const body = errorRecord();
    delete body.error;
    await expectInvalid(body, '/error');
    const noCode = errorRecord();
    delete noCode.error.code;
    await expectInvalid(noCode, '/error/code');
    const noMessage = errorRecord();
    delete noMessage.error.message;
    await expectInvalid(noMessage, '/error/message');
  });

  it('an error carrying both stack and stacktrace is refused', async () => {
    const body = errorRecord();
    body.error.stacktrace = 'also';
    const answer = await expectInvalid(body, '/error');
    expect(answer.body.errors[0].message).toMatch(/stack/);
  });

  it('reports every violation in one answer', async () => {
    const answer = await post({ request: { status: 'success' }, user: { id: 1 }, tokens: { input: '12' } });
    expect(answer.status).toBe(400);
    const paths = answer.body.errors.map((error: { path: string }) => error.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        '/request/modelId',
        '/request/provider',
        '/user/id',
        '/user/type',
        '/tokens/input',
        '/tokens/output',
        '/timing',
        '/io',
      ]),
    );
  });

  it('enforces the string, text and context limits', async () => {
    const longId = success();
    longId.user.id = 'x'.repeat(1025);
    await expectInvalid(longId, '/user/id');
    const longPrompt = success();
    longPrompt.io.prompt = 'p'.repeat(256 * 1024 + 1);
    await expectInvalid(longPrompt, '/io/prompt');
    const wide = success();
    wide.context = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`k${i}`, i]));
    await expectInvalid(wide, '/context');
    const deep = success();
    let node: Record<string, unknown> = {};
    deep.context = node;
    for (let depth = 0; depth < 9; depth++) {
      const child = {};
      node.next = child;
      node = child;
    }
    // The object at level 8 (the context object is level 1) may not hold anything.
    await expectInvalid(deep, `/context${'/next'.repeat(7)}`);
    const fine = success();
    fine.io.prompt = 'p'.repeat(256 * 1024);
    await expectAccepted(fine);
  });

  it('malformed JSON and bodies that are not objects are 400', async () => {
    for (const raw of ['{"request":', '[1,2]', '"text"', '42', 'null']) {
      const answer = await post(raw);
      expect(answer.status, raw).toBe(400);
      expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
    }
  });

  it('an Idempotency-Key that is empty-ish, too long or not printable ASCII is 400', async () => {
    for (const value of ['x'.repeat(256), ' '.repeat(0) + '\u00e9t\u00e9']) {
      const answer = await post(success(), { 'x-api-key': apiKey, 'idempotency-key': value });
      expect(answer.status, value.slice(0, 10)).toBe(400);
    }
  });
});

describe('401, 413, 415', () => {
  const unauthorized = { statusCode: 401, errorType: 'AuthError' };

  it('refuses a missing key with the body of section 7', async () => {
    const answer = await post(success(), {});
    expect(answer.status).toBe(401);
    expect(answer.body).toEqual({ ...unauthorized, message: expect.any(String) });
  });

  it('refuses an unknown well-formed key', async () => {
    const answer = await post(success(), { 'x-api-key': `otm_dev_${'A'.repeat(43)}` });
    expect(answer.status).toBe(401);
    expect(answer.body).toMatchObject(unauthorized);
  });

  it('refuses malformed keys', async () => {
    const secret = apiKey.split('_').slice(2).join('_');
    for (const bad of [
      `sk_qa_${secret}`,
      `otm_staging_${secret}`,
      'otm_qa_short',
      `otm_qa_${secret.slice(0, 20)}é${secret.slice(21)}`,
      `otm_qa_${'a'.repeat(10_000)}`,
      `otm_qa_${secret.slice(0, 20)}!${secret.slice(21)}`,
      `otm__${secret}`,
    ]) {
      const answer = await post(success(), { 'x-api-key': bad });
      expect(answer.status, bad.slice(0, 20)).toBe(401);
      expect(answer.body).toMatchObject(unauthorized);
    }
  });

  it('refuses two different keys in the two forms', async () => {
    const other = await createTestKey(keyPrefix, 'qa', 'other');
    const answer = await post(success(), { 'x-api-key': apiKey, authorization: `Bearer ${other.key}` });
    expect(answer.status).toBe(401);
    expect(answer.body.message).toMatch(/ambiguous/i);
  });

  it('refuses a non-Bearer Authorization header', async () => {
    const answer = await post(success(), { authorization: `Basic ${Buffer.from(apiKey).toString('base64')}` });
    expect(answer.status).toBe(401);
  });

  it('415 for a Content-Type other than application/json', async () => {
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/xml']) {
      const answer = await post(JSON.stringify(success()), { 'x-api-key': apiKey, 'content-type': type });
      expect(answer.status, type).toBe(415);
      expect(answer.body).toMatchObject({ statusCode: 415, errorType: 'UnsupportedMediaType' });
    }
  });

  it('413 for a body over 1 MiB', async () => {
    const body = success();
    body.context = { padding: 'x'.repeat(1000) };
    const raw = JSON.stringify(body).replace('"context"', `"pad":"${'y'.repeat(1024 * 1024)}","context"`);
    const answer = await post(raw);
    expect(answer.status).toBe(413);
    expect(answer.body).toMatchObject({ statusCode: 413, errorType: 'PayloadTooLarge' });
  });

  it('authentication runs first: 401 wins over 413, 415 and 400', async () => {
    const huge = `{"pad":"${'y'.repeat(2 * 1024 * 1024)}"}`;
    expect((await post(huge, {})).status).toBe(401);
    expect((await post('{}', { 'content-type': 'text/plain' })).status).toBe(401);
    expect((await post('{bad json', {})).status).toBe(401);
  });

  it('an admin-style token is no ingest key', async () => {
    const answer = await post(success(), { authorization: 'Bearer this-is-an-admin-token-of-32-characters-or-more' });
    expect(answer.status).toBe(401);
  });
});

describe('around the endpoint', () => {
  it('healthz and readyz answer without a key and reveal nothing else', async () => {
    const health = await httpRequest(`${gateway.url}/healthz`);
    expect(health.status).toBe(200);
    expect(health.body).toEqual({ status: 'ok' });
    const ready = await httpRequest(`${gateway.url}/readyz`);
    expect(ready.status).toBe(200);
    expect(ready.body).toEqual({ status: 'ready' });
  });

  it('unknown routes are 404 with the shared error body; nothing on the ingest port reads data', async () => {
    for (const path of ['/v1/telemetry/usage', '/v1/keys', '/v1/analytics/usage', '/metrics']) {
      const answer = await httpRequest(`${gateway.url}${path}`, { headers: { 'x-api-key': apiKey } });
      expect(answer.status, path).toBe(404);
      expect(answer.body).toMatchObject({ statusCode: 404, errorType: 'NotFound' });
    }
  });

  it('serves Prometheus metrics on its own port', async () => {
    const metrics = await httpRequest(`http://127.0.0.1:${gateway.metricsPort}/metrics`);
    expect(metrics.status).toBe(200);
    expect(metrics.text).toMatch(/otm_gateway_requests_total\{route="\/v1\/telemetry\/usage",status="202"\} \d+/);
    expect(metrics.text).toMatch(/otm_gateway_request_seconds_bucket\{le="0.005",route="\/v1\/telemetry\/usage"\} \d+/);
    expect(metrics.text).toMatch(/otm_gateway_validation_failures_total \d+/);
    expect(metrics.text).toMatch(/otm_gateway_produce_seconds_bucket/);
    expect(metrics.text).toMatch(/otm_gateway_produce_batch_records_bucket/);
    expect(metrics.text).toMatch(/otm_gateway_produce_queue_depth \d+/);
  });

  it('counts records alike on every route: a record, its retry and a refused one each move otm_gateway_records_total the same way', async () => {
    const before = await recordCounts(gateway.metricsPort!);
    for (const route of ROUTES) {
      const key = `counts-${route}-${uniqueName('k')}`;
      const record = success();
      const first = await postBy(route, gateway.url, apiKey, record, key);
      expect(first.status, `${route}: ${first.text}`).toBe(route === 'otlp' ? 200 : 202);
      const retry = await postBy(route, gateway.url, apiKey, record, key);
      expect(retry.status, `${route}: ${retry.text}`).toBe(route === 'otlp' ? 200 : 202);
      const refused = await postBy(route, gateway.url, apiKey, record, `${key}-bad`, false);
      expect(refused.status, `${route}: ${refused.text}`).toBe(route === 'otlp' ? 200 : 400);
    }
    const moved = increments(before, await recordCounts(gateway.metricsPort!));
    expect(moved).toEqual({
      single: { accepted: 1, replayed: 1, refused: 1 },
      batch: { accepted: 1, replayed: 1, refused: 1 },
      otlp: { accepted: 1, replayed: 1, refused: 1 },
    });
  });

  it('never writes key material or record text to its logs', () => {
    const logs = gateway.logs.join('\n');
    expect(logs).not.toContain(apiKey);
    expect(logs).not.toContain('Summarise the attached invoice.');
  });

  it('refuses a TLS 1.1 handshake and accepts TLS 1.2 and 1.3', async () => {
    const { certFile } = await testCertificate();
    const port = Number(new URL(gateway.url).port);
    const handshake = (version: tls.SecureVersion) =>
      new Promise<string>((resolve) => {
        // SECLEVEL=0 lets this client offer TLS 1.1 at all, so a refusal comes from the server.
        const socket = tls.connect({
          host: '127.0.0.1',
          port,
          ca: fs.readFileSync(certFile),
          minVersion: version,
          maxVersion: version,
          servername: 'localhost',
          ciphers: 'DEFAULT@SECLEVEL=0',
        });
        socket.once('secureConnect', () => {
          resolve(socket.getProtocol() ?? 'unknown');
          socket.end();
        });
        socket.once('error', (error) => resolve(`refused: ${error.message}`));
      });
    expect(await handshake('TLSv1.2')).toBe('TLSv1.2');
    expect(await handshake('TLSv1.3')).toBe('TLSv1.3');
    // The server answers a TLS 1.1 ClientHello with a protocol_version alert.
    expect(await handshake('TLSv1.1')).toMatch(/^refused: .*(alert protocol version|unsupported protocol)/i);
  });

  it('a deleted key is refused', async () => {
    const doomed = await createTestKey(keyPrefix, 'dev', 'doomed');
    expect((await post(success(), { 'x-api-key': doomed.key })).status).toBe(202);
    await withRedis((redis) => new KeyStore(redis, keyPrefix).delete(doomed.id));
    const deletedAt = Date.now();
    let status = 0;
    while (Date.now() - deletedAt < 2000 && status !== 401) status = (await post(success(), { 'x-api-key': doomed.key })).status;
    expect(status).toBe(401);
    expect(Date.now() - deletedAt).toBeLessThan(2000);
  });
});

describe('per-key rate limit', () => {
  it('answers 429 RateLimited with Retry-After past the configured rate, per key', async () => {
    const limited = await startGateway({ topic, keyPrefix, extraEnv: { RATE_LIMIT_PER_SECOND: 1, RATE_LIMIT_BURST: 3 } });
    try {
      const first = await createTestKey(keyPrefix, 'prod', 'limited-1');
      const second = await createTestKey(keyPrefix, 'prod', 'limited-2');
      const statuses: number[] = [];
      for (let i = 0; i < 4; i++) statuses.push((await postUsage(limited.url, success(), { 'x-api-key': first.key })).status);
      expect(statuses).toEqual([202, 202, 202, 429]);
      const refused = await postUsage(limited.url, success(), { 'x-api-key': first.key });
      expect(refused.status).toBe(429);
      expect(refused.body).toMatchObject({ statusCode: 429, errorType: 'RateLimited' });
      expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
      // Another key has its own budget.
      expect((await postUsage(limited.url, success(), { 'x-api-key': second.key })).status).toBe(202);
    } finally {
      await limited.stop();
    }
  });
});
