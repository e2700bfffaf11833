// Both HTTP services answer through the one edge (registerEdge): every answer carries
// its request id, and errors the same documented body ({ statusCode, errorType, message[, errors] }) for the same
// kind of error, checked against the real gateway and admin service.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createTestKey,
  fixture,
  httpRequest,
  startGateway,
  startService,
  stackEnv,
  testNames,
  type ServiceProcess,
} from './helpers/stack.js';

const n = testNames('edge');
const adminToken = `edge-${n.groupId}-0123456789abcdefghij`;
let gateway: ServiceProcess;
let admin: ServiceProcess;

beforeAll(async () => {
  [gateway, admin] = await Promise.all([
    startGateway({ topic: n.topic, keyPrefix: n.keyPrefix, extraEnv: { BODY_LIMIT_BYTES: 2048 } }),
    startService('admin', stackEnv({ REDIS_KEY_PREFIX: n.keyPrefix, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0 }), /admin listening/),
  ]);
}, 180_000);
afterAll(async () => {
  await Promise.all([gateway?.stop(), admin?.stop()]);
});

/** One request per service that provokes the same kind of error on each. */
const cases: { what: string; status: number; errorType: string; gateway: Request; admin: Request }[] = [
  {
    what: 'no credentials',
    status: 401,
    errorType: 'AuthError',
    gateway: { method: 'POST', path: '/v1/telemetry/usage', body: '{}', headers: { 'content-type': 'application/json' } },
    admin: { method: 'GET', path: '/v1/keys' },
  },
  {
    what: 'an unknown route',
    status: 404,
    errorType: 'NotFound',
    gateway: { method: 'GET', path: '/v1/nowhere' },
    admin: { method: 'GET', path: '/v1/nowhere', authorized: true },
  },
  {
    what: 'a body that is not JSON',
    status: 400,
    errorType: 'ValidationError',
    gateway: {
      method: 'POST',
      path: '/v1/telemetry/usage',
      body: '{"request":',
      headers: { 'content-type': 'application/json' },
      authorized: true,
    },
    admin: { method: 'POST', path: '/v1/keys', body: '{"name":', headers: { 'content-type': 'application/json' }, authorized: true },
  },
  {
    what: 'a media type that is not JSON',
    status: 415,
    errorType: 'UnsupportedMediaType',
    gateway: { method: 'POST', path: '/v1/telemetry/usage', body: 'hello', headers: { 'content-type': 'text/plain' }, authorized: true },
    admin: { method: 'POST', path: '/v1/keys', body: 'hello', headers: { 'content-type': 'text/plain' }, authorized: true },
  },
];

interface Request {
  method: string;
  path: string;
  body?: string;
  headers?: Record<string, string>;
  authorized?: boolean;
}

let gatewayKey = '';
async function ask(service: 'gateway' | 'admin', request: Request) {
  const headers = { ...request.headers };
  if (request.authorized && service === 'admin') headers.authorization = `Bearer ${adminToken}`;
  if (request.authorized && service === 'gateway') {
    gatewayKey ||= (await createTestKey(n.keyPrefix, 'dev', 'edge')).key;
    headers['x-api-key'] = gatewayKey;
  }
  const base = service === 'gateway' ? gateway.url : admin.url;
  return httpRequest(`${base}${request.path}`, { method: request.method, headers, body: request.body });
}

describe('error answers of both services', () => {
  it.each(cases)('$what: $status $errorType with the documented body on the gateway and the admin service', async (entry) => {
    for (const service of ['gateway', 'admin'] as const) {
      const answer = await ask(service, entry[service]);
      expect(answer.status, `${service}: ${answer.text}`).toBe(entry.status);
      expect(answer.body.statusCode).toBe(entry.status);
      expect(answer.body.errorType).toBe(entry.errorType);
      expect(typeof answer.body.message).toBe('string');
      expect(Object.keys(answer.body).every((member) => ['statusCode', 'errorType', 'message', 'errors'].includes(member))).toBe(true);
      expect(String(answer.headers['content-type'])).toMatch(/^application\/json/);
      expect(answer.headers['x-request-id']).toMatch(UUID_V7);
    }
  });

  it("every answer carries its request id; the gateway's 202 names the same one in its body", async () => {
    const accepted = await ask('gateway', {
      method: 'POST',
      path: '/v1/telemetry/usage',
      body: JSON.stringify(fixture('valid/success.json')),
      headers: { 'content-type': 'application/json' },
      authorized: true,
    });
    expect(accepted.status).toBe(202);
    expect(accepted.headers['x-request-id']).toMatch(UUID_V7);
    expect(accepted.headers['x-request-id']).toBe(accepted.body.requestId);
    const listed = await ask('admin', { method: 'GET', path: '/v1/keys', authorized: true });
    expect(listed.status).toBe(200);
    expect(listed.headers['x-request-id']).toMatch(UUID_V7);
  });
});

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
