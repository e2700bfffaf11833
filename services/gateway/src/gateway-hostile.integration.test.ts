// The ingest endpoint against hostile input, on the real stack: records the store
// could not hold are refused with the documented body naming the field (decisions.md,
// "Bounds on what is stored"), bodies that cost too much are refused before parsing,
// and slow or unauthenticated connections cannot hold a socket.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import tls from 'node:tls';
import zlib from 'node:zlib';
import {
  createTestKey,
  fixture,
  httpRequest,
  postUsage,
  startGateway,
  testCertificate,
  uniqueName,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';

const topic = uniqueName('gw-hostile');
const keyPrefix = `${uniqueName('gwh')}:`;
let gateway: ServiceProcess;
let apiKey: string;
let port: number;

beforeAll(async () => {
  gateway = await startGateway({ topic, keyPrefix });
  apiKey = (await createTestKey(keyPrefix, 'qa', 'hostile')).key;
  port = Number(new URL(gateway.url).port);
});
afterAll(async () => {
  await gateway?.stop();
});

const post = (body: unknown, headers: Record<string, string> = {}) => postUsage(gateway.url, body, { 'x-api-key': apiKey, ...headers });
const success = () => fixture('valid/success.json');

async function expectRefused(body: unknown, path: string, message: RegExp) {
  const answer = await post(body);
  expect(answer.status, answer.text).toBe(400);
  expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError' });
  expect(answer.body.errors, answer.text).toContainEqual({ path, message: expect.stringMatching(message) });
}

function withTiming(fields: Record<string, string>) {
  const body = success();
  Object.assign(body.timing, fields);
  return body;
}

describe('timestamps the store cannot hold', () => {
  it('refuses a time before 2000 (1969 included) and more than 24 h ahead, naming the field', async () => {
    await expectRefused(withTiming({ startTime: '1969-12-31T23:59:59Z' }), '/timing/startTime', /must not be before 2000-01-01/);
    await expectRefused(withTiming({ firstTokenTime: '1999-12-31T23:59:59Z' }), '/timing/firstTokenTime', /before 2000/);
    const ahead = new Date(Date.now() + 25 * 3600_000).toISOString();
    await expectRefused(withTiming({ lastTokenTime: ahead }), '/timing/lastTokenTime', /24 h after/);
    // Within the window, out of order: accepted (and flagged at enrichment).
    const backwards = withTiming({ startTime: '2026-11-22T10:00:05Z', lastTokenTime: '2026-11-22T10:00:01Z' });
    expect((await post(backwards)).status).toBe(202);
  });

  it('refuses texts that do not denote a real instant: a leap second, an offset written +01', async () => {
    await expectRefused(withTiming({ startTime: '2026-06-30T23:59:60Z' }), '/timing/startTime', /date-time/);
    await expectRefused(withTiming({ startTime: '2026-11-22T10:00:00+01' }), '/timing/startTime', /date-time/);
    await expectRefused(withTiming({ startTime: '2026-02-30T10:00:00Z' }), '/timing/startTime', /date-time/);
  });
});

describe('strings', () => {
  it('refuses lone surrogates anywhere', async () => {
    const body = success();
    body.user.id = 'u\ud800';
    await expectRefused(body, '/user/id', /well-formed Unicode/);
    const inContext = success();
    inContext.context = { note: 'x\udfff' };
    await expectRefused(inContext, '/context/note', /well-formed Unicode/);
  });

  it('refuses control characters and bidi overrides in identifiers and context key names, not in prompts', async () => {
    const body = success();
    body.user.id = 'admin\u202Egnp.exe';
    await expectRefused(body, '/user/id', /control characters or bidirectional overrides/);
    const model = success();
    model.request.modelId = 'gpt-4o\u0000';
    await expectRefused(model, '/request/modelId', /control characters/);
    const key = success();
    key.context = { 'tenant\u0007': 'a' };
    await expectRefused(key, '/context/tenant\u0007', /control characters/);
    const prompt = success();
    prompt.io.prompt = 'Line one\nLine\ttwo \u202E reversed';
    expect((await post(prompt)).status).toBe(202);
  });

  it('bounds arrays inside context at 256 items', async () => {
    const body = success();
    body.context = { list: Array.from({ length: 257 }, (_, index) => index) };
    await expectRefused(body, '/context/list', /256 items/);
  });
});

describe('the cost of a body is bounded before it is parsed', () => {
  it('refuses a megabyte of nesting with 400 (scanned, not parsed)', async () => {
    const hostile = '['.repeat(1_000_000);
    const started = performance.now();
    const answer = await post(hostile);
    const ms = performance.now() - started;
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({
      errorType: 'ValidationError',
      errors: [{ path: '/', message: 'must not nest deeper than 32 levels' }],
    });
    console.log(`1 MB of "[" refused in ${ms.toFixed(1)} ms (round trip)`);
    // 32 levels is fine as far as nesting goes (the schema then refuses the shape).
    const answer32 = await post(`{"context":${'{"a":'.repeat(31)}1${'}'.repeat(31)}}`);
    expect(answer32.status).toBe(400);
    expect(answer32.body.errors).not.toContainEqual(expect.objectContaining({ message: expect.stringMatching(/nest/) }));
  });

  it('refuses prototype poisoning keys like Fastify does', async () => {
    const answer = await post('{"__proto__":{"x":1},"request":{}}');
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ errorType: 'ValidationError' });
  });
});

describe('gzip', () => {
  it('inflates a gzip body, refuses a body that claims gzip but is not, and other encodings', async () => {
    const gzipped = zlib.gzipSync(JSON.stringify(success()));
    const ok = await httpRequest(`${gateway.url}/v1/telemetry/usage`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipped,
    });
    expect(ok.status, ok.text).toBe(202);
    const fake = await post(success(), { 'content-encoding': 'gzip' });
    expect(fake.status).toBe(400);
    expect(fake.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError', message: expect.stringMatching(/not valid gzip/) });
    const brotli = await post(success(), { 'content-encoding': 'br' });
    expect(brotli.status).toBe(415);
    expect(brotli.body).toMatchObject({ statusCode: 415, errorType: 'UnsupportedMediaType' });
  });

  it('stops inflating a zip bomb at the body limit: 413', async () => {
    const bomb = zlib.gzipSync(Buffer.alloc(64 * 1024 * 1024, 0x20), { level: 9 }); // 64 MiB of spaces, ~64 KB
    const answer = await httpRequest(`${gateway.url}/v1/telemetry/usage`, {
      method: 'POST',
      headers: { 'x-api-key': apiKey, 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: bomb,
    });
    expect(answer.status, answer.text).toBe(413);
    expect(answer.body).toMatchObject({ statusCode: 413, errorType: 'PayloadTooLarge' });
  });
});

describe('idempotency, continued', () => {
  it('a known Idempotency-Key with a different body is 422 IdempotencyKeyReused; the same body is replayed', async () => {
    const key = `order-${uniqueName('k')}`;
    const first = await post(success(), { 'idempotency-key': key });
    expect(first.status).toBe(202);
    const same = await post(success(), { 'idempotency-key': key });
    expect(same.status).toBe(202);
    expect(same.body.requestId).toBe(first.body.requestId);
    const changed = success();
    changed.tokens.output = 351;
    const reused = await post(changed, { 'idempotency-key': key });
    expect(reused.status, reused.text).toBe(422);
    expect(reused.body).toEqual({
      statusCode: 422,
      errorType: 'IdempotencyKeyReused',
      message: expect.stringMatching(/different usage record/),
    });
  });

  it('two Idempotency-Key headers are a 400', async () => {
    const answer = await rawExchange(
      [
        'POST /v1/telemetry/usage HTTP/1.1',
        'Host: localhost',
        `X-API-Key: ${apiKey}`,
        'Content-Type: application/json',
        'Idempotency-Key: one',
        'Idempotency-Key: two',
        `Content-Length: ${Buffer.byteLength(JSON.stringify(success()))}`,
        'Connection: close',
        '',
        JSON.stringify(success()),
      ].join('\r\n'),
    );
    expect(answer).toMatch(/^HTTP\/1.1 400/);
    expect(bodyOf(answer)).toMatchObject({
      errorType: 'ValidationError',
      errors: [{ path: 'header:Idempotency-Key', message: 'must be sent once' }],
    });
  });
});

describe('the documented error body where Node and Fastify would answer in their own words', () => {
  it('a malformed URL', async () => {
    const answer = await httpRequest(`${gateway.url}/v1/telemetry/%E0%A4%A`, { method: 'POST' });
    expect(answer.status).toBe(400);
    expect(answer.body).toMatchObject({ statusCode: 400, errorType: 'ValidationError', message: 'Malformed URL.' });
  });

  it('a malformed HTTP request', async () => {
    const answer = await rawExchange('GARBAGE / HTTP/1.1\r\nHost: x\r\n\r\n');
    expect(answer).toMatch(/^HTTP\/1.1 400/);
    expect(bodyOf(answer)).toEqual({ statusCode: 400, errorType: 'ValidationError', message: 'Malformed HTTP request.' });
  });
});

describe('Expect: 100-continue', () => {
  const head = (key: string) =>
    [
      'POST /v1/telemetry/usage HTTP/1.1',
      'Host: localhost',
      `X-API-Key: ${key}`,
      'Content-Type: application/json',
      'Expect: 100-continue',
      `Content-Length: ${Buffer.byteLength(JSON.stringify(success()))}`,
      '',
      '',
    ].join('\r\n');

  it('is answered only after authentication: 401 without a 100 for a bad key, 100 then 202 for a good one', async () => {
    const refused = await rawFirstAnswer(head('otm_dev_' + 'x'.repeat(43)));
    expect(refused).toMatch(/^HTTP\/1.1 401/);
    expect(refused).not.toMatch(/100 Continue/);
    const invited = await rawFirstAnswer(head(apiKey));
    expect(invited).toMatch(/^HTTP\/1.1 100 Continue/);
  });
});

describe('slow and idle connections (limits of decisions.md: headers 5 s, request 10 s)', () => {
  it('closes a connection that sends nothing after the TLS handshake', async () => {
    const { closedAfterMs } = await holdConnection(() => undefined);
    console.log(`idle connection closed after ${closedAfterMs} ms`);
    expect(closedAfterMs).toBeLessThan(12_000);
  }, 30_000);

  it('closes a connection that trickles its headers, one byte a second (slowloris)', async () => {
    const { closedAfterMs, answer } = await holdConnection((socket) => {
      const request = `POST /v1/telemetry/usage HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'a'.repeat(100)}`;
      let index = 0;
      const timer = setInterval(() => {
        if (socket.destroyed || index >= request.length) clearInterval(timer);
        else socket.write(request[index++]!);
      }, 1000);
      socket.once('close', () => clearInterval(timer));
    });
    console.log(`slowloris connection closed after ${closedAfterMs} ms: ${answer.split('\r\n')[0]}`);
    expect(closedAfterMs).toBeLessThan(8_000);
    expect(answer).toMatch(/^HTTP\/1.1 408/);
  }, 30_000);

  it('answers a request whose body never completes 408 RequestTimeout with the documented body, then closes', async () => {
    const { closedAfterMs, answer } = await holdConnection((socket) => {
      // Whole headers announcing 100 bytes, 2 of them sent, then nothing.
      socket.write(
        `POST /v1/telemetry/usage HTTP/1.1\r\nHost: localhost\r\nX-API-Key: ${apiKey}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"`,
      );
    });
    console.log(`unfinished body: connection closed after ${closedAfterMs} ms: ${answer.split('\r\n')[0]}`);
    expect(answer).toMatch(/^HTTP\/1.1 408/);
    const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { statusCode: number; errorType: string };
    expect(body).toMatchObject({ statusCode: 408, errorType: 'RequestTimeout' });
    expect(closedAfterMs).toBeGreaterThanOrEqual(9_000);
    expect(closedAfterMs).toBeLessThan(14_000);
  }, 30_000);

  it('answers headers over the limit 431 HeadersTooLarge with the documented body, and closes', async () => {
    const { answer } = await holdConnection((socket) => {
      socket.write(`POST /v1/telemetry/usage HTTP/1.1\r\nHost: localhost\r\nX-Padding: ${'x'.repeat(40 * 1024)}\r\n\r\n`);
    });
    expect(answer).toMatch(/^HTTP\/1.1 431/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toEqual({
      statusCode: 431,
      errorType: 'HeadersTooLarge',
      message: 'The request headers are too large.',
    });
  }, 30_000);
});

/** Opens a TLS connection, lets `behave` drive it, and reports when the server closed it (bounded at 20 s). */
async function holdConnection(behave: (socket: tls.TLSSocket) => void): Promise<{ closedAfterMs: number; answer: string }> {
  const { certFile } = await testCertificate();
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(certFile), servername: 'localhost' });
    let answer = '';
    let connectedAt = 0;
    const limit = setTimeout(() => {
      socket.destroy();
      reject(new Error('the server held the connection for 20 s'));
    }, 20_000);
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('error', () => undefined);
    socket.once('secureConnect', () => {
      connectedAt = Date.now();
      behave(socket);
    });
    socket.once('close', () => {
      clearTimeout(limit);
      resolve({ closedAfterMs: Date.now() - connectedAt, answer });
    });
  });
}

/** Sends raw bytes over TLS and returns everything the server wrote until it closed. */
async function rawExchange(request: string): Promise<string> {
  const { certFile } = await testCertificate();
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(certFile), servername: 'localhost' }, () =>
      socket.write(request),
    );
    let text = '';
    const limit = setTimeout(() => {
      socket.destroy();
      resolve(text);
    }, 10_000);
    socket.on('data', (chunk) => (text += chunk.toString()));
    socket.on('error', reject);
    socket.on('close', () => {
      clearTimeout(limit);
      resolve(text);
    });
  });
}

/** Sends a request head and returns the first answer the server writes (without sending a body). */
async function rawFirstAnswer(request: string): Promise<string> {
  const { certFile } = await testCertificate();
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(certFile), servername: 'localhost' }, () =>
      socket.write(request),
    );
    const limit = setTimeout(() => {
      socket.destroy();
      reject(new Error('no answer within 5 s'));
    }, 5000);
    socket.once('data', (chunk) => {
      clearTimeout(limit);
      socket.destroy();
      resolve(chunk.toString());
    });
    socket.on('error', reject);
  });
}

function bodyOf(answer: string): unknown {
  return JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4));
}
