// The cost of a hostile request is bounded before the work, against the real gateway and
// admin service: each attack is sent as a hostile client would (raw sockets where
// needed) while another client probes the gateway every 100 ms, and each test asserts
// the documented answer, the time to answer, and that every probe was answered within
// 1 s throughout (docs/limits.md, "Request cost budgets"; docs/security.md).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import fs from 'node:fs';
import net from 'node:net';
import tls from 'node:tls';
import zlib from 'node:zlib';
import { Agent, request as undiciRequest } from 'undici';
import {
  createTestKey,
  fixture,
  httpRequest,
  stackEnv,
  startGateway,
  startService,
  testCertificate,
  uniqueName,
  type HttpAnswer,
  type ServiceProcess,
} from '../../../test/helpers/stack.js';
import { loadOtlpRoot, OTLP_TYPES } from './otlp.js';
import { setTimeout as sleep } from 'node:timers/promises';

const topic = uniqueName('gw-cost');
const keyPrefix = `${uniqueName('gwc')}:`;
const adminToken = `admin-${uniqueName('t')}-0123456789abcdef`;
let gateway: ServiceProcess;
let admin: ServiceProcess;
let apiKey: string;
let probeKey: string;
let port: number;

beforeAll(async () => {
  [gateway, admin] = await Promise.all([
    startGateway({ topic, keyPrefix }),
    startService('admin', stackEnv({ REDIS_KEY_PREFIX: keyPrefix, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0 }), /admin listening/),
  ]);
  apiKey = (await createTestKey(keyPrefix, 'qa', 'hostile')).key;
  probeKey = (await createTestKey(keyPrefix, 'qa', 'probe')).key;
  port = Number(new URL(gateway.url).port);
});
afterAll(async () => {
  await Promise.all([gateway?.stop(), admin?.stop()]);
});

/** Another client (its own connections) posting a valid record every 100 ms; every answer's time is kept. */
async function probed<T>(attack: () => Promise<T>): Promise<{ result: T; attackMs: number; probeMaxMs: number; probes: number }> {
  const { certFile } = await testCertificate();
  const agent = new Agent({ connect: { ca: fs.readFileSync(certFile) } });
  const times: number[] = [];
  let running = true;
  const probing = (async () => {
    while (running) {
      const started = performance.now();
      const answer = await Promise.race([
        undiciRequest(`${gateway.url}/v1/telemetry/usage`, {
          method: 'POST',
          headers: { 'content-type': 'application/json', 'x-api-key': probeKey },
          body: JSON.stringify(fixture('valid/success.json')),
          dispatcher: agent,
        }).then(async (response) => {
          await response.body.text();
          return response.statusCode;
        }),
        sleep(5_000).then(() => 0),
      ]).catch(() => -1);
      times.push(answer === 202 ? performance.now() - started : Infinity);
      await sleep(100);
    }
  })();
  await sleep(250);
  const started = performance.now();
  const result = await attack();
  const attackMs = performance.now() - started;
  await sleep(250);
  running = false;
  await probing;
  await agent.close();
  return { result, attackMs, probeMaxMs: Math.max(...times), probes: times.length };
}

function expectProbesAnswered(run: { probeMaxMs: number; probes: number }, what: string) {
  console.log(`${what}: probes ${run.probes}, slowest ${run.probeMaxMs.toFixed(0)} ms`);
  expect(run.probes).toBeGreaterThanOrEqual(3);
  expect(run.probeMaxMs).toBeLessThan(1_000);
}

function post(pathName: string, body: Buffer | string, headers: Record<string, string>): Promise<HttpAnswer> {
  return httpRequest(`${gateway.url}${pathName}`, { method: 'POST', headers: { 'x-api-key': apiKey, ...headers }, body });
}

/** The gateway's resident memory (MB) and open file descriptors, from /proc. */
function processFacts(service: ServiceProcess): { rssMb: number; fds: number } {
  const pid = service.child.pid!;
  const rss = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return { rssMb: Number(rss) / 1024, fds: fs.readdirSync(`/proc/${pid}/fd`).length };
}

describe('1. items counted before they are parsed', () => {
  it('a 5 KiB gzip NDJSON of 2.6 million lines is refused 413 at once; memory stays where it was', async () => {
    const before = processFacts(gateway);
    const bomb = zlib.gzipSync(Buffer.from('x\n'.repeat(2_600_000)), { level: 9 });
    expect(bomb.length).toBeLessThan(8 * 1024);
    const run = await probed(() =>
      post('/v1/telemetry/usage/batch', bomb, { 'content-type': 'application/x-ndjson', 'content-encoding': 'gzip' }),
    );
    expect(run.result.status, run.result.text).toBe(413);
    expect(run.result.body).toMatchObject({
      errorType: 'PayloadTooLarge',
      message: expect.stringMatching(/at most 1000 records; this one holds more/),
    });
    expect(run.attackMs).toBeLessThan(1_000);
    expectProbesAnswered(run, 'NDJSON line bomb');
    const after = processFacts(gateway);
    console.log(`RSS ${before.rssMb.toFixed(0)} -> ${after.rssMb.toFixed(0)} MB`);
    expect(after.rssMb - before.rssMb).toBeLessThan(100);
  });

  it('1.7 million empty objects, as NDJSON or as a JSON array, are refused 413 the same way', async () => {
    const lines = zlib.gzipSync(Buffer.from('{}\n'.repeat(1_700_000)));
    const array = zlib.gzipSync(Buffer.from(`[${'{},'.repeat(1_700_000)}{}]`));
    const run = await probed(async () => [
      await post('/v1/telemetry/usage/batch', lines, { 'content-type': 'application/x-ndjson', 'content-encoding': 'gzip' }),
      await post('/v1/telemetry/usage/batch', array, { 'content-type': 'application/json', 'content-encoding': 'gzip' }),
    ]);
    for (const answer of run.result) expect(answer.status, answer.text).toBe(413);
    expect(run.attackMs).toBeLessThan(1_000);
    expectProbesAnswered(run, 'empty objects');
  });

  it('an NDJSON batch with more than 20 unreadable lines is refused whole (400); 20 are answered item by item', async () => {
    const record = JSON.stringify(fixture('valid/success.json'));
    const many = [record, ...Array.from({ length: 21 }, () => 'not json')].join('\n');
    const refused = await post('/v1/telemetry/usage/batch', many, { 'content-type': 'application/x-ndjson' });
    expect(refused.status, refused.text).toBe(400);
    expect(refused.body).toMatchObject({ errorType: 'ValidationError', message: expect.stringMatching(/More than 20 lines/) });
    const some = [record, ...Array.from({ length: 20 }, () => 'not json')].join('\n');
    const partial = await post('/v1/telemetry/usage/batch', some, { 'content-type': 'application/x-ndjson' });
    expect(partial.status, partial.text).toBe(207);
    expect(partial.body.accepted).toBe(1);
  });
});

describe('2. redaction in linear time', () => {
  it('a gzip batch of prompts built to make the key and token patterns backtrack is redacted and answered within 2 s', async () => {
    const record = (prompt: string) => ({ ...fixture('valid/success.json'), io: { prompt, response: 'ok' } });
    const items = [
      ...Array.from({ length: 6 }, () => record('-eyJ'.repeat(65_536))),
      ...Array.from({ length: 6 }, () => record('-----BEGIN PRIVATE KEY-----'.repeat(9_000))),
      ...Array.from({ length: 4 }, () => record('sk-'.repeat(87_000))),
    ];
    const body = zlib.gzipSync(JSON.stringify(items), { level: 9 });
    console.log(`redaction attack: ${(body.length / 1024).toFixed(1)} KiB gzip`);
    const run = await probed(() =>
      post('/v1/telemetry/usage/batch', body, {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
        'x-otm-capture': 'redact',
      }),
    );
    expect(run.result.status, run.result.text).toBe(202);
    expect(run.result.body.accepted).toBe(items.length);
    console.log(`redaction attack answered in ${run.attackMs.toFixed(0)} ms`);
    expect(run.attackMs).toBeLessThan(2_000);
    expectProbesAnswered(run, 'redaction attack');
  });
});

describe('3. every OTLP span counted before it is decoded', () => {
  const root = loadOtlpRoot();
  const request = root.lookupType(OTLP_TYPES.request);
  const spansExport = (spans: number) => {
    // As small as a span can be on the wire (2 bytes) when there are many: it is never read.
    const span =
      spans > 1000 ? {} : { traceId: Buffer.alloc(16, 1), spanId: Buffer.alloc(8, 2), name: 's', startTimeUnixNano: 1, endTimeUnixNano: 2 };
    return Buffer.from(
      request.encode(request.fromObject({ resourceSpans: [{ scopeSpans: [{ spans: Array(spans).fill(span) }] }] })).finish(),
    );
  };
  const sendExport = (body: Buffer, key = apiKey) =>
    httpRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip', 'x-api-key': key },
      body: zlib.gzipSync(body, { level: 9 }),
    });

  it('174,760 non-GenAI spans in a few KiB of gzip are refused 413 without decoding them', async () => {
    const before = processFacts(gateway);
    const body = spansExport(174_760);
    console.log(`OTLP export: ${body.length} bytes, ${zlib.gzipSync(body, { level: 9 }).length} gzip`);
    const run = await probed(() => sendExport(body));
    expect(run.result.status, run.result.text).toBe(413);
    expect(run.result.text).toMatch(/at most 1000 spans; this one holds 174760/);
    expect(run.attackMs).toBeLessThan(1_000);
    expectProbesAnswered(run, 'OTLP amplification');
    const after = processFacts(gateway);
    console.log(`RSS ${before.rssMb.toFixed(0)} -> ${after.rssMb.toFixed(0)} MB`);
    expect(after.rssMb - before.rssMb).toBeLessThan(100);
  });

  it('spans that are not GenAI are charged to the key like any other', async () => {
    const key = (await createTestKey(keyPrefix, 'qa', 'otlp-rate')).key;
    const body = spansExport(900);
    const statuses: number[] = [];
    // 2,000 a second with bursts of 4,000: the fifth export of 900 spans is past the burst.
    for (let i = 0; i < 5; i++) statuses.push((await sendExport(body, key)).status);
    expect(statuses.slice(0, 4)).toEqual([200, 200, 200, 200]);
    expect(statuses[4]).toBe(429);
  });

  it("the decoder's own words are not echoed to the client", async () => {
    const answer = await httpRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': apiKey },
      body: JSON.stringify({ resourceSpans: [{ scopeSpans: [{ spans: [{ traceId: 'zz' }] }] }] }),
    });
    expect(answer.status).toBe(400);
    const garbage = await undiciRequest(`${gateway.url}/v1/otlp/v1/traces`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-protobuf', 'x-api-key': apiKey },
      body: Buffer.from([0x0a, 0x72, 0x01, 0x02, 0x03]),
      dispatcher: new Agent({ connect: { ca: fs.readFileSync((await testCertificate()).certFile) } }),
    });
    const status = root.lookupType(OTLP_TYPES.status).decode(Buffer.from(await garbage.body.arrayBuffer())) as unknown as {
      message: string;
    };
    expect(garbage.statusCode).toBe(400);
    expect(status.message).toBe('The body is not a protobuf ExportTraceServiceRequest.');
    expect(status.message).not.toMatch(/index out of range/);
  });
});

describe('4. sockets released after an error answer, whatever the client does', () => {
  /**
   * Opens `count` connections that send a partial request head, then a header line every
   * 2 s whatever the server says (the FIN ignored): resolves with, per connection, the
   * time from the server's answer to the connection's end (reset or close), bounded at 30 s.
   */
  async function stubbornClients(connect: () => net.Socket, count: number): Promise<{ answers: string[]; heldMs: number[] }> {
    const one = () =>
      new Promise<{ answer: string; heldMs: number }>((resolve) => {
        const socket = connect();
        let answer = '';
        let answeredAt = 0;
        let timer: NodeJS.Timeout | undefined;
        const done = () => {
          clearInterval(timer);
          clearTimeout(limit);
          socket.destroy();
          resolve({ answer, heldMs: answeredAt ? Date.now() - answeredAt : Infinity });
        };
        const limit = setTimeout(done, 30_000);
        socket.on('data', (chunk) => {
          if (!answeredAt) answeredAt = Date.now();
          answer += chunk.toString();
        });
        socket.on('error', done);
        socket.on('close', done);
        socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', () => {
          socket.write('POST /v1/telemetry/usage HTTP/1.1\r\nHost: localhost\r\n');
          timer = setInterval(() => socket.write(`X-Trickle: ${Date.now()}\r\n`), 2_000);
        });
      });
    const results = await Promise.all(Array.from({ length: count }, one));
    return { answers: results.map((r) => r.answer), heldMs: results.map((r) => r.heldMs) };
  }

  it('gateway: 100 connections that ignore the 408 and keep sending are closed within 15 s of the answer; the descriptors are released', async () => {
    const { certFile } = await testCertificate();
    const ca = fs.readFileSync(certFile);
    const before = processFacts(gateway).fds;
    const run = await probed(() =>
      stubbornClients(
        () => tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost', allowHalfOpen: true } as tls.ConnectionOptions),
        100,
      ),
    );
    expect(run.result.answers.every((answer) => answer.startsWith('HTTP/1.1 408'))).toBe(true);
    const slowest = Math.max(...run.result.heldMs);
    console.log(`gateway: slowest connection released ${slowest} ms after its 408`);
    expect(slowest).toBeLessThan(15_000);
    expectProbesAnswered(run, 'stubborn connections');
    await sleep(500);
    expect(processFacts(gateway).fds).toBeLessThanOrEqual(before + 5);
  }, 60_000);

  it('admin service: a request whose body never completes is answered 408 RequestTimeout with the documented body, then closed', async () => {
    const adminPort = Number(new URL(admin.url).port);
    const started = Date.now();
    const answer = await new Promise<string>((resolve) => {
      const socket = net.connect({ host: '127.0.0.1', port: adminPort }, () =>
        // Whole headers announcing 100 bytes, 2 of them sent, then nothing.
        socket.write(
          `POST /v1/keys HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer ${adminToken}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"`,
        ),
      );
      let text = '';
      socket.on('data', (chunk) => (text += chunk.toString()));
      socket.on('error', () => undefined);
      socket.once('close', () => resolve(text));
    });
    const closedAfterMs = Date.now() - started;
    console.log(`admin, unfinished body: closed after ${closedAfterMs} ms: ${answer.split('\r\n')[0]}`);
    expect(answer).toMatch(/^HTTP\/1.1 408/);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ statusCode: 408, errorType: 'RequestTimeout' });
    expect(closedAfterMs).toBeLessThan(15_000);
  }, 30_000);

  it('admin service: the same, on its plain-HTTP port', async () => {
    const adminPort = Number(new URL(admin.url).port);
    const before = processFacts(admin).fds;
    const { answers, heldMs } = await stubbornClients(() => net.connect({ host: '127.0.0.1', port: adminPort, allowHalfOpen: true }), 30);
    expect(answers.every((answer) => answer.startsWith('HTTP/1.1 408'))).toBe(true);
    console.log(`admin: slowest connection released ${Math.max(...heldMs)} ms after its 408`);
    expect(Math.max(...heldMs)).toBeLessThan(15_000);
    await sleep(500);
    expect(processFacts(admin).fds).toBeLessThanOrEqual(before + 5);
  }, 60_000);

  /** Sends one GET /healthz on a kept-alive connection, then nothing: when the server closes it after the answer. */
  async function idleAfterAnswer(connect: () => net.Socket): Promise<{ answer: string; closedAfterMs: number }> {
    return new Promise((resolve, reject) => {
      const socket = connect();
      let answer = '';
      let answeredAt = 0;
      const limit = setTimeout(() => {
        socket.destroy();
        reject(new Error('the connection stayed open 20 s after its answer'));
      }, 20_000);
      socket.on('data', (chunk) => {
        answeredAt ||= Date.now();
        answer += chunk.toString();
      });
      socket.on('error', () => undefined);
      socket.once(socket instanceof tls.TLSSocket ? 'secureConnect' : 'connect', () =>
        socket.write('GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n'),
      );
      socket.once('close', () => {
        clearTimeout(limit);
        resolve({ answer, closedAfterMs: Date.now() - answeredAt });
      });
    });
  }

  it('gateway and admin service: a kept-alive connection idle after its answer is closed after the keep-alive limit (5 s)', async () => {
    const { certFile } = await testCertificate();
    const ca = fs.readFileSync(certFile);
    const adminPort = Number(new URL(admin.url).port);
    const [ofGateway, ofAdmin] = await Promise.all([
      idleAfterAnswer(() => tls.connect({ host: '127.0.0.1', port, ca, servername: 'localhost' })),
      idleAfterAnswer(() => net.connect({ host: '127.0.0.1', port: adminPort })),
    ]);
    console.log(`idle after the answer: gateway closed after ${ofGateway.closedAfterMs} ms, admin after ${ofAdmin.closedAfterMs} ms`);
    for (const idle of [ofGateway, ofAdmin]) {
      expect(idle.answer).toMatch(/^HTTP\/1.1 200/);
      expect(idle.answer).toMatch(/keep-alive/i);
      expect(idle.closedAfterMs).toBeGreaterThanOrEqual(4_000);
      expect(idle.closedAfterMs).toBeLessThan(8_000);
    }
  }, 30_000);
});

describe('6. answers bounded', () => {
  const unknownMembers = (count: number) => {
    const record = fixture('valid/success.json');
    for (let i = 0; i < count; i++) record[`m${i.toString(36)}`] = 1;
    return record;
  };

  it('a record with 104,791 unknown members is refused before validation with one error, not 4.5 MiB of them', async () => {
    const body = JSON.stringify(unknownMembers(104_791));
    // What parsing these members costs this machine at this moment (here, before and
    // after): the one step the gateway cannot skip, and most of its answer's time.
    const parseMs = () => {
      const started = performance.now();
      JSON.parse(body);
      return performance.now() - started;
    };
    const before = parseMs();
    const run = await probed(() => post('/v1/telemetry/usage', body, { 'content-type': 'application/json' }));
    const baselineMs = Math.max(before, parseMs());
    expect(run.result.status).toBe(400);
    expect(run.result.body.errors).toEqual([
      { path: '/', message: expect.stringMatching(/has 10479\d members; no object of a usage record holds more than 64/) },
    ]);
    expect(run.result.text.length).toBeLessThan(1024);
    // 150–430 ms against a parse of about 70 ms on a quiet machine; a bound in milliseconds
    // alone failed on a busy one (1,173 ms).
    console.log(`unknown members: ${run.attackMs.toFixed(0)} ms; parsing them here ${baselineMs.toFixed(0)} ms`);
    expect(run.attackMs).toBeLessThan(Math.max(1_000, 8 * baselineMs));
    expectProbesAnswered(run, 'unknown members');
  });

  it('a record with 200 unknown members gets 20 errors and truncated', async () => {
    const answer = await post('/v1/telemetry/usage', JSON.stringify(unknownMembers(200)), { 'content-type': 'application/json' });
    expect(answer.status).toBe(400);
    expect(answer.body.errors).toHaveLength(20);
    expect(answer.body.errors[0]).toEqual({ path: expect.stringMatching(/^\/m/), message: 'is not allowed' });
    expect(answer.body.truncated).toBe(true);
  });

  it('a batch answer holds at most 64 KiB of errors: 1,000 items of 200 unknown members each', async () => {
    const items = Array.from({ length: 1000 }, () => unknownMembers(200));
    const run = await probed(() =>
      post('/v1/telemetry/usage/batch', zlib.gzipSync(JSON.stringify(items)), {
        'content-type': 'application/json',
        'content-encoding': 'gzip',
      }),
    );
    expect(run.result.status, run.result.text.slice(0, 300)).toBe(400);
    expect(run.result.body.truncated).toBe(true);
    expect(JSON.stringify(run.result.body.errors).length).toBeLessThanOrEqual(64 * 1024);
    expect(run.result.body.results).toHaveLength(1000);
    expect(run.result.body.results[0]).toEqual({ index: 0, status: 400, errorType: 'ValidationError', message: expect.any(String) });
    console.log(`1,000 refused items: answer of ${(run.result.text.length / 1024).toFixed(0)} KiB in ${run.attackMs.toFixed(0)} ms`);
    expect(run.attackMs).toBeLessThan(2_000);
    expectProbesAnswered(run, 'unknown members in a batch');
  });

  it('a 207 answer spends the same budget: items past it keep their status and say truncated', async () => {
    const items = [fixture('valid/success.json'), ...Array.from({ length: 999 }, () => unknownMembers(200))];
    const answer = await post('/v1/telemetry/usage/batch', zlib.gzipSync(JSON.stringify(items)), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });
    expect(answer.status).toBe(207);
    const results = answer.body.results as { errors?: unknown[]; truncated?: boolean; status: number }[];
    const spent = results.reduce((sum, result) => sum + (result.errors ? JSON.stringify(result.errors).length : 0), 0);
    expect(spent).toBeLessThanOrEqual(64 * 1024);
    expect(results.at(-1)).toMatchObject({ status: 400, truncated: true });
    expect(results.at(-1)!.errors).toBeUndefined();
  });
});

describe('8. smaller', () => {
  it('a 404 says nosniff', async () => {
    const answer = await httpRequest(`${gateway.url}/<script>alert(1)</script>`);
    expect(answer.status).toBe(404);
    expect(answer.headers['x-content-type-options']).toBe('nosniff');
    expect(answer.headers['content-type']).toMatch(/^application\/json/);
  });

  it('an HTTP/0.9-shaped request line is refused, not answered 200', async () => {
    const { certFile } = await testCertificate();
    const text = await new Promise<string>((resolve) => {
      const socket = tls.connect({ host: '127.0.0.1', port, ca: fs.readFileSync(certFile), servername: 'localhost' }, () =>
        socket.write('GET /healthz\r\n\r\n'),
      );
      let answer = '';
      socket.on('data', (chunk) => (answer += chunk.toString()));
      socket.on('error', () => resolve(answer));
      socket.on('close', () => resolve(answer));
      setTimeout(() => socket.destroy(), 5_000);
    });
    expect(text).not.toMatch(/^HTTP\/1\.[01] 200/);
    expect(text).not.toMatch(/"status":"ok"/);
  });
});

// Last: it leaves this address past its limit for a minute (keys not held get 429).
describe('5. unknown keys are cheap', () => {
  it('past 600 failed authentications a minute an address gets 429 for keys the gateway does not hold, while a valid key keeps working', async () => {
    const unknownKey = () =>
      `otm_qa_${uniqueName('x')
        .replace(/[^A-Za-z0-9]/g, '')
        .padEnd(43, 'x')
        .slice(0, 43)}`;
    const run = await probed(async () => {
      const statuses: number[] = [];
      for (let round = 0; round < 40; round++) {
        const answers = await Promise.all(
          Array.from({ length: 20 }, () =>
            httpRequest(`${gateway.url}/v1/telemetry/usage`, { method: 'POST', headers: { 'x-api-key': unknownKey() } }),
          ),
        );
        statuses.push(...answers.map((answer) => answer.status));
      }
      return statuses;
    });
    const refused = run.result.filter((status) => status === 401).length;
    const limited = run.result.filter((status) => status === 429).length;
    console.log(`800 unknown keys: ${refused} answered 401, ${limited} answered 429`);
    expect(refused).toBeGreaterThanOrEqual(600);
    expect(refused).toBeLessThan(650);
    expect(refused + limited).toBe(800);
    console.log(`800 unknown keys answered in ${run.attackMs.toFixed(0)} ms`);
    expect(run.attackMs).toBeLessThan(10_000);
    expectProbesAnswered(run, 'unknown-key flood'); // the probe's valid key, from the same address
    const limitedAnswer = await httpRequest(`${gateway.url}/v1/telemetry/usage`, {
      method: 'POST',
      headers: { 'x-api-key': unknownKey() },
    });
    expect(limitedAnswer.status).toBe(429);
    expect(limitedAnswer.body).toMatchObject({ errorType: 'RateLimited', message: expect.stringMatching(/failed authentications/) });
    expect(Number(limitedAnswer.headers['retry-after'])).toBeGreaterThan(0);
  });
});
