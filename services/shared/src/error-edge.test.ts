// The one error edge both HTTP services register (registerEdge): every error
// answer, whether thrown by a route or by Fastify itself, has the documented body
// (statusCode, errorType, message, and errors for validation), Retry-After where a
// client should come back, and nothing internal in it.
import { describe, expect, it } from 'vitest';
import net from 'node:net';
import { once } from 'node:events';
import { setTimeout as sleep } from 'node:timers/promises';
import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import { pino } from 'pino';
import { errorCatalog, ServiceError, type ErrorType } from './errors.js';
import { edgeServerOptions, registerEdge, registerJsonParser } from './http-edge.js';

async function edgeApp() {
  // As the admin service: an unknown query parameter is refused, not silently dropped.
  const app = Fastify({
    ...edgeServerOptions({ requestTimeoutMs: 10_000, headersTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, maxConnections: 0 }),
    bodyLimit: 64,
    ajv: { customOptions: { removeAdditional: false } },
  });
  registerJsonParser(app, 8);
  registerEdge(app, { retryAfterSeconds: 7, accessLog: 'info' });
  app.get<{ Params: { type: ErrorType } }>('/throw/:type', async (request) => {
    throw new ServiceError(request.params.type, `a ${request.params.type}`);
  });
  app.get('/crash', async () => {
    throw new Error('secret internal detail');
  });
  app.post('/echo', async (request) => request.body);
  app.get(
    '/query',
    { schema: { querystring: { type: 'object', properties: { n: { type: 'integer' } }, additionalProperties: false } } },
    async () => ({}),
  );
  await app.ready();
  return app;
}

describe('registerEdge', () => {
  it.each(Object.entries(errorCatalog))('a thrown %s is answered %j with the documented body', async (type, entry) => {
    const app = await edgeApp();
    const answer = await app.inject({ method: 'GET', url: `/throw/${type}` });
    expect(answer.statusCode).toBe(entry.statusCode);
    expect(answer.json()).toEqual({ statusCode: entry.statusCode, errorType: type, message: `a ${type}` });
    expect(answer.headers['retry-after']).toBe(type === 'Unavailable' || type === 'RateLimited' ? '7' : undefined);
    expect(String(answer.headers['x-request-id'])).toMatch(/^[0-9a-f-]{36}$/);
  });

  it.each([
    ['an unknown route', 404, 'NotFound', 'No route for GET /nowhere.', { method: 'GET', url: '/nowhere?x=1' }],
    ['an error the route did not expect', 500, 'InternalError', 'Internal error.', { method: 'GET', url: '/crash' }],
    [
      'a body over the limit',
      413,
      'PayloadTooLarge',
      'The request body is larger than the limit.',
      { method: 'POST', url: '/echo', payload: JSON.stringify({ a: 'x'.repeat(100) }), headers: { 'content-type': 'application/json' } },
    ],
    [
      'a media type without a parser',
      415,
      'UnsupportedMediaType',
      undefined,
      { method: 'POST', url: '/echo', payload: 'hello', headers: { 'content-type': 'text/plain' } },
    ],
    [
      'a body that is not JSON',
      400,
      'ValidationError',
      'The request body is not valid JSON.',
      { method: 'POST', url: '/echo', payload: '{"a":', headers: { 'content-type': 'application/json' } },
    ],
    [
      'a query the route schema refuses',
      400,
      'ValidationError',
      'The request does not match the expected parameters.',
      { method: 'GET', url: '/query?n=x' },
    ],
    [
      'an unknown query parameter',
      400,
      'ValidationError',
      'The request does not match the expected parameters.',
      { method: 'GET', url: '/query?m=1' },
    ],
  ] as const)('%s: %i %s', async (_what, status, errorType, message, request) => {
    const app = await edgeApp();
    const answer = await app.inject(request as never);
    expect(answer.statusCode).toBe(status);
    const body = answer.json();
    expect(body.statusCode).toBe(status);
    expect(body.errorType).toBe(errorType);
    if (message) expect(body.message).toBe(message);
    expect(answer.body).not.toContain('secret internal detail');
    if (status === 400) expect(Array.isArray(body.errors)).toBe(true);
  });
});

describe('the access log', () => {
  it('writes one line per answered request: request id, method, route, status and time; no credentials, no body', async () => {
    const lines: Record<string, unknown>[] = [];
    const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line)) });
    const options: FastifyServerOptions = {
      ...edgeServerOptions({ requestTimeoutMs: 10_000, headersTimeoutMs: 5_000, keepAliveTimeoutMs: 5_000, maxConnections: 0 }),
      loggerInstance: logger,
      disableRequestLogging: true,
    };
    const app = Fastify(options) as unknown as FastifyInstance;
    registerJsonParser(app, 8);
    registerEdge(app, { retryAfterSeconds: 7, accessLog: 'info' });
    app.post('/echo', async (request) => request.body);
    const answer = await app.inject({
      method: 'POST',
      url: '/echo?x=1',
      payload: '{"secret":"body"}',
      headers: { 'content-type': 'application/json', authorization: 'Bearer otm_dev_secret' },
    });
    const [line] = lines.filter((entry) => entry.msg === 'answered');
    expect(line).toMatchObject({ requestId: answer.headers['x-request-id'], method: 'POST', route: '/echo', status: 200 });
    expect(typeof line!.ms).toBe('number');
    expect(JSON.stringify(lines)).not.toMatch(/otm_dev_secret|"secret":"body"/);
  });
});

describe('an answer sent before the body has all arrived', () => {
  /**
   * Sends `Content-Length: total` and `first` bytes, reads the answer, then sends the
   * rest; tells whether the server kept the connection until the whole body was sent.
   */
  async function earlyAnswer(port: number, total: number, first: number, connection = '') {
    // A client that asked for Connection: close keeps sending after the server's FIN
    // (half-open, as TCP allows); only a reset or a close stops it.
    const socket = net.connect({ port, host: '127.0.0.1', allowHalfOpen: connection !== '' });
    await once(socket, 'connect');
    let received = '';
    let closed = false;
    socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
    socket.on('error', () => (closed = true));
    if (connection === '') socket.on('end', () => (closed = true));
    socket.on('close', () => (closed = true));
    socket.write(`POST /echo HTTP/1.1\r\nHost: x\r\n${connection}Content-Type: application/json\r\nContent-Length: ${total}\r\n\r\n`);
    socket.write(Buffer.alloc(first, 0x20));
    const deadline = Date.now() + 5_000;
    while (!received.includes('}') && Date.now() < deadline) await sleep(10);
    const answer = received;
    // The client, like most, goes on sending the body it announced.
    const rest = Buffer.alloc(total - first, 0x20);
    let sent = 0;
    while (sent < rest.length && !closed) {
      const chunk = rest.subarray(sent, sent + 256 * 1024);
      if (!socket.write(chunk)) await Promise.race([new Promise((resolve) => socket.once('drain', resolve)), sleep(1_000)]);
      sent += chunk.length;
    }
    await sleep(100);
    const keptOpen = !closed;
    socket.destroy();
    return { answer, keptOpen, sentAll: sent === rest.length };
  }

  it('reads and throws away the rest, so a client still sending reads the 413 instead of a reset', async () => {
    const app = await edgeApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as net.AddressInfo).port;
      const outcome = await earlyAnswer(port, 8 * 1024 * 1024, 1024 * 1024);
      expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(outcome.answer).toContain('"errorType":"PayloadTooLarge"');
      expect(outcome).toMatchObject({ sentAll: true, keptOpen: true });
    } finally {
      await app.close();
    }
  });

  it('does the same for a client that asked for Connection: close, and closes once the body is read', async () => {
    const app = await edgeApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as net.AddressInfo).port;
      const outcome = await earlyAnswer(port, 8 * 1024 * 1024, 1024 * 1024, 'Connection: close\r\n');
      expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(outcome.sentAll).toBe(true);
    } finally {
      await app.close();
    }
  });

  it('closes the connection once the client has sent more than the bound after the answer', async () => {
    const app = await edgeApp();
    await app.listen({ port: 0, host: '127.0.0.1' });
    try {
      const port = (app.server.address() as net.AddressInfo).port;
      const outcome = await earlyAnswer(port, 200 * 1024 * 1024, 1024 * 1024);
      expect(outcome.answer).toMatch(/^HTTP\/1\.1 413 /);
      expect(outcome).toMatchObject({ sentAll: false, keptOpen: false });
    } finally {
      await app.close();
    }
  });
});
