// 7. Hostile requests -------------------------------------------------------------
// What each attack shape of the request-cost budgets (docs/limits.md, docs/security.md)
// costs one gateway: its CPU per request (from /proc), its peak resident memory while
// the attack runs (sampled every 20 ms), and how long a probe from another client (a
// valid record every 50 ms, its own connections) waited meanwhile; beside a normal
// gzip batch of the same wire size, measured the same way in the same run. Then how far
// the gateway's memory came back within a minute of the last attack.
import fs from 'node:fs';
import tlsSocket from 'node:tls';
import zlib from 'node:zlib';
import { Agent, request } from 'undici';
import { KeyStore } from '@otm/shared/keys/key-store';
import { loadOtlpRoot, OTLP_TYPES } from '../../../services/gateway/src/otlp.js';
import { sampleUsageRecords } from '../../../test/fixtures/sample-records.js';
import { metricValue } from '../../lib/histogram.js';
import type { ServiceProcess } from '../../lib/service-process.js';
import { cpuSeconds, gatewayServiceEnv, log, percentile, quick, redis, results, runId, sleep, startQuiet, tls } from '../context.js';

interface Shape {
  name: string;
  /** One request's bytes on the wire (the body, compressed where it is). */
  wireBytes: number;
  /** Sends one attack; resolves with its status. */
  send(): Promise<number>;
}

interface Measured {
  requests: number;
  statuses: number[];
  cpuMsPerRequest: number;
  peakRssMb: number;
  probeMaxMs: number;
  probeP99Ms: number;
}

/** The gateway's V8 heap (total, used) and external memory in MB, from its metrics. */
async function heapMb(gateway: ServiceProcess): Promise<{ heapTotal: number; heapUsed: number; external: number }> {
  const text = await (await fetch(`http://127.0.0.1:${gateway.metricsPort}/metrics`)).text();
  const read = (name: string) => metricValue(text, name) / 1_048_576;
  return {
    heapTotal: read('nodejs_heap_size_total_bytes'),
    heapUsed: read('nodejs_heap_size_used_bytes'),
    external: read('nodejs_external_memory_bytes'),
  };
}

function rssMb(pid: number): number {
  const match = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  return match ? Number(match[1]) / 1024 : NaN;
}

export async function benchHostile(): Promise<void> {
  log(
    '7. hostile requests: gateway CPU per request, peak RSS and probe latency per attack shape, beside a normal batch of the same wire size',
  );
  const topic = `bench.hostile.${runId}`;
  const prefix = `bench-hostile-${runId}:`;
  const store = new KeyStore(redis, prefix);
  const gateway = await startQuiet(
    'gateway',
    { ...gatewayServiceEnv(topic, prefix, 18447), RATE_LIMIT_PER_SECOND: '0', AUTH_FAILURES_PER_MINUTE: '600' },
    /gateway listening/,
  );
  const pid = gateway.child.pid!;
  const key = (await store.create({ environment: 'dev', name: 'hostile' })).key;
  const probeKey = (await store.create({ environment: 'dev', name: 'probe' })).key;
  const ca = fs.readFileSync(tls.certFile);
  const attackAgent = new Agent({ connect: { ca } });
  const probeAgent = new Agent({ connect: { ca } });
  const post = async (path: string, body: Buffer | string, headers: Record<string, string>, apiKey = key) => {
    const response = await request(`${gateway.url}${path}`, {
      method: 'POST',
      dispatcher: attackAgent,
      headers: { 'x-api-key': apiKey, ...headers },
      body,
    });
    await response.body.text();
    return response.statusCode;
  };
  const gzipJson = { 'content-type': 'application/json', 'content-encoding': 'gzip' };
  const records = sampleUsageRecords(1000, { seed: 7 });

  /** A gzip batch of valid records whose compressed size is about `bytes`. */
  const normalBatchOf = (bytes: number): Buffer => {
    let count = 1;
    let body = zlib.gzipSync(JSON.stringify(records.slice(0, count)));
    while (body.length < bytes && count < records.length) {
      count = Math.min(records.length, Math.max(count + 1, Math.round((count * bytes) / body.length)));
      body = zlib.gzipSync(JSON.stringify(records.slice(0, count)));
    }
    return body;
  };

  const otlp = loadOtlpRoot().lookupType(OTLP_TYPES.request);
  const emptySpans = zlib.gzipSync(
    otlp.encode(otlp.fromObject({ resourceSpans: [{ scopeSpans: [{ spans: Array(174_760).fill({}) }] }] })).finish(),
    { level: 9 },
  );
  const lineBomb = zlib.gzipSync(Buffer.from('x\n'.repeat(2_600_000)), { level: 9 });
  const objectBomb = zlib.gzipSync(Buffer.from('{}\n'.repeat(1_700_000)), { level: 9 });
  const hostilePrompt = (prompt: string) => ({ ...records[0], io: { prompt, response: 'ok' } });
  const redaction = zlib.gzipSync(
    JSON.stringify([
      ...Array.from({ length: 6 }, () => hostilePrompt('-eyJ'.repeat(65_536))),
      ...Array.from({ length: 6 }, () => hostilePrompt('-----BEGIN PRIVATE KEY-----'.repeat(9_000))),
      ...Array.from({ length: 4 }, () => hostilePrompt('sk-'.repeat(87_000))),
    ]),
    { level: 9 },
  );
  const members = { ...records[0] } as Record<string, unknown>;
  for (let i = 0; i < 104_791; i++) members[`m${i.toString(36)}`] = 1;
  const unknownMembers = zlib.gzipSync(JSON.stringify(members));
  let unknownKeys = 0;

  const shapes: Shape[] = [
    {
      name: 'NDJSON line bomb (2.6 M lines)',
      wireBytes: lineBomb.length,
      send: () => post('/v1/telemetry/usage/batch', lineBomb, { 'content-type': 'application/x-ndjson', 'content-encoding': 'gzip' }),
    },
    {
      name: 'NDJSON of 1.7 M empty objects',
      wireBytes: objectBomb.length,
      send: () => post('/v1/telemetry/usage/batch', objectBomb, { 'content-type': 'application/x-ndjson', 'content-encoding': 'gzip' }),
    },
    {
      name: 'redaction backtracking (16 prompts of 256 KiB)',
      wireBytes: redaction.length,
      send: () => post('/v1/telemetry/usage/batch', redaction, { ...gzipJson, 'x-otm-capture': 'redact' }),
    },
    {
      name: 'OTLP: 174,760 non-GenAI spans',
      wireBytes: emptySpans.length,
      send: () => post('/v1/otlp/v1/traces', emptySpans, { 'content-type': 'application/x-protobuf', 'content-encoding': 'gzip' }),
    },
    {
      name: 'record with 104,791 unknown members',
      wireBytes: unknownMembers.length,
      send: () => post('/v1/telemetry/usage', unknownMembers, gzipJson),
    },
    {
      name: 'unknown API key (well-formed)',
      wireBytes: 2,
      send: () =>
        post('/v1/telemetry/usage', '{}', { 'content-type': 'application/json' }, `otm_dev_${String(unknownKeys++).padStart(43, 'u')}`),
    },
    {
      name: 'connection that ignores its 408 (headers trickled)',
      wireBytes: 60,
      send: () => stubbornConnection(gateway, ca),
    },
  ];

  /** Runs `count` of `send` (`parallel` at a time) under a probe; CPU, peak RSS and the probe's waits. */
  const measure = async (send: () => Promise<number>, count: number, parallel = 1): Promise<Measured> => {
    let running = true;
    const waits: number[] = [];
    let peak = rssMb(pid);
    const sampler = setInterval(() => (peak = Math.max(peak, rssMb(pid))), 20);
    const probing = (async () => {
      while (running) {
        const started = performance.now();
        const response = await request(`${gateway.url}/v1/telemetry/usage`, {
          method: 'POST',
          dispatcher: probeAgent,
          headers: { 'content-type': 'application/json', 'x-api-key': probeKey },
          body: JSON.stringify(records[1]),
        });
        await response.body.text();
        waits.push(performance.now() - started);
        await sleep(50);
      }
    })();
    await sleep(100);
    const cpuBefore = cpuSeconds(pid);
    const statuses: number[] = [];
    for (let sent = 0; sent < count; sent += parallel) {
      statuses.push(...(await Promise.all(Array.from({ length: Math.min(parallel, count - sent) }, send))));
    }
    const cpuMs = (cpuSeconds(pid) - cpuBefore) * 1000;
    await sleep(100);
    running = false;
    await probing;
    clearInterval(sampler);
    return {
      requests: count,
      statuses: [...new Set(statuses)],
      cpuMsPerRequest: cpuMs / count,
      peakRssMb: peak,
      probeMaxMs: Math.max(...waits),
      probeP99Ms: percentile(waits, 99),
    };
  };

  // "Where it was": after a warm-up of normal batches (a process just started has not yet grown to its working set).
  const warmUp = normalBatchOf(64 * 1024);
  for (const started = Date.now(); Date.now() - started < (quick ? 2_000 : 5_000);)
    await post('/v1/telemetry/usage/batch', warmUp, gzipJson);
  await sleep(1_000);
  const rssBeforeMb = rssMb(pid);
  const heapBefore = await heapMb(gateway);
  const rows: Record<string, unknown>[] = [];
  const times = quick ? 3 : 10;
  for (const shape of shapes) {
    const stubborn = shape.name.startsWith('connection');
    const attack = await measure(shape.send, stubborn ? 50 : shape.name.startsWith('unknown API') ? 400 : times, stubborn ? 50 : 1);
    const normalBody = normalBatchOf(Math.max(shape.wireBytes, 200));
    const normal = await measure(() => post('/v1/telemetry/usage/batch', normalBody, gzipJson), times);
    rows.push({
      shape: shape.name,
      wireBytes: shape.wireBytes,
      normalWireBytes: normalBody.length,
      attack,
      normal,
      rssAfterMb: rssMb(pid),
    });
    log(
      `   ${shape.name} (${shape.wireBytes} B): ${attack.cpuMsPerRequest.toFixed(2)} ms CPU/request, peak RSS ${attack.peakRssMb.toFixed(0)} MB, probe max ${attack.probeMaxMs.toFixed(0)} ms, answered ${attack.statuses.join('/')}; normal batch ${normal.cpuMsPerRequest.toFixed(2)} ms; RSS now ${rssMb(pid).toFixed(0)} MB`,
    );
  }
  const rssAfterAttacksMb = rssMb(pid);
  // Memory returns: within a minute, to within 50 MB of where it was.
  const settleStarted = Date.now();
  let rssSettledMb = rssAfterAttacksMb;
  while (Date.now() - settleStarted < (quick ? 10_000 : 60_000) && rssSettledMb - rssBeforeMb > 50) {
    await sleep(2_000);
    rssSettledMb = rssMb(pid);
  }
  const heapAfter = await heapMb(gateway);
  log(
    `   heap after: total ${heapAfter.heapTotal.toFixed(0)} MB, used ${heapAfter.heapUsed.toFixed(0)} MB, external ${heapAfter.external.toFixed(0)} MB (before: ${JSON.stringify(heapBefore)})`,
  );
  log(
    `   RSS ${rssBeforeMb.toFixed(0)} MB before, ${rssAfterAttacksMb.toFixed(0)} MB after the attacks, ${rssSettledMb.toFixed(0)} MB after ${((Date.now() - settleStarted) / 1000).toFixed(0)} s`,
  );
  results.hostile = {
    shapes: rows,
    rssBeforeMb,
    rssAfterAttacksMb,
    rssSettledMb,
    settleSeconds: (Date.now() - settleStarted) / 1000,
    heapTotalBeforeMb: heapBefore.heapTotal,
    heapTotalAfterMb: heapAfter.heapTotal,
    externalBeforeMb: heapBefore.external,
    externalAfterMb: heapAfter.external,
  };
  await Promise.all([attackAgent.close(), probeAgent.close()]);
  await gateway.stop();
}

/** A connection that sends a partial head, then a header line every second whatever the server says; resolves with the answer's status once the server has closed it. */
function stubbornConnection(gateway: ServiceProcess, ca: Buffer): Promise<number> {
  const { port } = new URL(gateway.url);
  return new Promise((resolve) => {
    // allowHalfOpen: the client ignores the server's FIN and keeps writing (Node's TLS takes it; its types do not list it).
    const socket = tlsSocket.connect({
      host: '127.0.0.1',
      port: Number(port),
      ca,
      servername: 'localhost',
      allowHalfOpen: true,
    } as tlsSocket.ConnectionOptions);
    let answer = '';
    let timer: NodeJS.Timeout | undefined;
    const done = () => {
      clearInterval(timer);
      clearTimeout(limit);
      socket.destroy();
      resolve(Number(/^HTTP\/1\.1 (\d{3})/.exec(answer)?.[1] ?? 0));
    };
    const limit = setTimeout(done, 30_000);
    socket.on('data', (chunk) => (answer += chunk.toString()));
    socket.on('error', done);
    socket.on('close', done);
    socket.once('secureConnect', () => {
      socket.write('POST /v1/telemetry/usage HTTP/1.1\r\nHost: localhost\r\n');
      timer = setInterval(() => socket.write(`X-Trickle: ${Date.now()}\r\n`), 1_000);
    });
  });
}
