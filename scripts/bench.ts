// npm run bench [-- --quick] [-- --runs N]   (npm run bench --quick works too)
// Measures the pipeline on this machine against baselines measured in the same run,
// each figure the median of several runs (min and max kept), and writes
// bench/results/latest.json and BENCHMARKS.md. Never fails on a number. All load
// targets loopback and is bounded in count and time.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { buildSync } from 'esbuild';
import { Agent, request } from 'undici';
import { buildQueuedRecordSchema, type QueuedUsageRecord } from '@otm/schemas';
import { consumerLag, createDurableProducer, createKafka, ensureTopic } from '@otm/shared/kafka';
import { createRegistry, decodeWire, encodeWire, registerJsonSchema } from '@otm/shared/registry';
import { createRedis } from '@otm/shared/redis';
import { createClickHouse, serverVersion } from '@otm/shared/clickhouse';
import { KeyStore } from '@otm/shared/keys/key-store';
import { ProduceBatcher } from '../services/gateway/src/produce-batcher.js';
import { ProducerHandle } from '../services/gateway/src/producer-handle.js';
import { enrich } from '../services/ingester/src/enrich-step.js';
import { migrate } from '../services/ingester/src/migrate.js';
import { PriceTable } from '../services/ingester/src/prices.js';
import { loadStackConfig, stackAddresses } from './stack/config.js';
import { stackUp } from './stack/services.js';
import { ensureLocalCertificate } from './local-tls.js';
import { renderSummary, summarise } from './profile-summary.js';
import { queuedRecords, sampleUsageRecords } from './lib/sample-records.js';
import { startProcess, startService, type ServiceProcess } from './lib/service-process.js';

const options = new Command('bench')
  .option('--quick', 'short runs (about 2 minutes with the stack up)')
  .option('--runs <n>', 'runs per figure (median, min, max)', '3')
  .option(
    '--profile',
    'CPU-profile the gateway (batch section) and the ingester (ingester section, first run) and write summaries to bench/profiles/',
  )
  .option(
    '--only <sections>',
    'comma-separated subset: gateway,batch,produce,ingester,scaleOut,freshness,endToEnd,revocation (latest.json keeps the other figures)',
  )
  .parse(process.argv)
  .opts<{ quick?: boolean; runs: string; only?: string; profile?: boolean }>();
const only = options.only ? new Set(options.only.split(',')) : undefined;
const section = (name: string) => !only || only.has(name);
// `npm run bench --quick` (without --) reaches us as npm_config_quick.
const quick = Boolean(options.quick) || process.env.npm_config_quick === 'true';
const runs = Math.max(3, Number(options.runs));
const scale = quick
  ? {
      loadSeconds: 1.5,
      latencySeconds: 1,
      warmupSeconds: 0.5,
      produceRecords: 10_000,
      ingestRecords: 10_000,
      freshnessSeconds: 1.5,
      revokedKeys: 10,
    }
  : {
      loadSeconds: 10,
      latencySeconds: 8,
      warmupSeconds: 2,
      produceRecords: 60_000,
      ingestRecords: Number(process.env.BENCH_INGEST_RECORDS ?? 200_000),
      freshnessSeconds: 10,
      revokedKeys: 100,
    };

const stack = loadStackConfig(process.env);
const addresses = stackAddresses(stack);
const root = stack.root;
const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
const work = path.join(stack.dir, 'bench');
fs.mkdirSync(work, { recursive: true });
const log = (line: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

interface Figure {
  median: number;
  min: number;
  max: number;
  samples: number[];
}
function figure(samples: number[]): Figure {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)]!, min: sorted[0]!, max: sorted[sorted.length - 1]!, samples };
}
function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** Peak resident memory of a process so far, in MB (VmHWM). */
function peakRssMb(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const match = fs.readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmHWM:\s+(\d+) kB/);
    return match ? Number(match[1]) / 1024 : NaN;
  } catch {
    return NaN;
  }
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
function cpuSeconds(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
  } catch {
    return NaN;
  }
}

interface LoadResult {
  accepted: number;
  non2xx: number;
  errors: number;
  perSec: number;
  p50Ms: number;
  p99Ms: number;
  p999Ms: number;
}

// The load generators are compiled once per bench run and started with plain node: a
// generator is started about 40 times, and the TypeScript loader took 0.4 s a start.
const generators = Object.fromEntries(
  ['load', 'rate-load', 'sdk-load'].map((name) => {
    const outfile = path.join(work, `${name}.mjs`);
    buildSync({
      entryPoints: [path.join(root, `scripts/bench/${name}.ts`)],
      outfile,
      bundle: true,
      packages: 'external',
      platform: 'node',
      format: 'esm',
      target: 'node20',
      logLevel: 'warning',
    });
    return [name, outfile];
  }),
);

interface SdkLoadResult {
  accepted: number;
  perSec: number;
  failed: number;
  dropped: number;
  retries: number;
  batches: number;
  p50Ms: number;
  p99Ms: number;
}

/** Closed-loop maximum (autocannon), or with `rate` an open-loop fixed rate (rate-load.ts). */
function runLoad(spec: Record<string, unknown>): Promise<LoadResult> {
  return runGenerator(spec.rate ? generators['rate-load']! : generators.load!, spec);
}

/** Batches through the client SDK as fast as the endpoint accepts them (sdk-load.ts). */
function runSdkLoad(spec: Record<string, unknown>): Promise<SdkLoadResult> {
  return runGenerator(generators['sdk-load']!, spec);
}

function runGenerator<T>(script: string, spec: Record<string, unknown>): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify(spec)], {
      // The local certificate is self-signed; the load stays on loopback.
      env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0', NODE_NO_WARNINGS: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => {
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`load generator exited ${code}: ${out}`));
      resolve(JSON.parse(line) as T);
    });
  });
}

const tls = await ensureLocalCertificate(path.join(stack.dir, 'tls'));
const serviceEnv = (extra: Record<string, string | number>): NodeJS.ProcessEnv => {
  // Dedupe keys of a bench run need not outlive it (200,000 per ingester run add up in Redis).
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...addresses, DEDUPE_TTL_SECONDS: '600' };
  // Tuning variables given to the bench reach the services under test.
  for (const [name, value] of Object.entries(process.env)) if (/^(INGEST|PRODUCE|KEY_CACHE|DEDUPE)_/.test(name)) env[name] = value;
  for (const [name, value] of Object.entries(extra)) env[name] = String(value);
  return env;
};
/** A gateway on `port` for `topic`, with keys under `prefix`, TLS with the local certificate. */
const gatewayServiceEnv = (topic: string, prefix: string, port: number): NodeJS.ProcessEnv =>
  serviceEnv({
    USAGE_TOPIC: topic,
    REDIS_KEY_PREFIX: prefix,
    GATEWAY_PORT: port,
    METRICS_PORT: 0,
    TLS_CERT_FILE: tls.certFile,
    TLS_KEY_FILE: tls.keyFile,
    // One key offers the whole load: the per-key limit would measure itself.
    RATE_LIMIT_PER_SECOND: 0,
  });

/** The bare Fastify server with the same TLS (scripts/bench/baseline-server.ts). */
function startBaseline(port: number): Promise<ServiceProcess> {
  return startProcess(
    'baseline',
    [path.join(root, 'scripts/bench/baseline-server.ts'), String(port), tls.certFile, tls.keyFile],
    process.env,
    /baseline listening/,
  );
}

// The ready lines are logged at info; debug adds the ingester's "unit loaded" timings.
async function startQuiet(
  entry: 'gateway' | 'ingester' | 'gateway-cluster',
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  level: 'info' | 'debug' = 'info',
  profileDir?: string,
): Promise<ServiceProcess> {
  const flags = profileDir ? { SERVICE_NODE_FLAGS: `--cpu-prof --cpu-prof-dir=${profileDir}` } : {};
  return startService(entry, { ...env, LOG_LEVEL: level, ...flags }, ready, 90_000);
}

/** Fills `topic` with `count` queued records in the gateway's wire format, keyed by `keyOf`, in chunks of 10,000. */
async function prefillTopic(topic: string, partitions: number, count: number, keyOf: (index: number) => string): Promise<void> {
  await ensureTopic(kafka, topic, partitions);
  const registry = createRegistry(addresses.SCHEMA_REGISTRY_URL);
  const schemaId = await registerJsonSchema(registry, 'telemetry.usage.v1-value', buildQueuedRecordSchema());
  const producer = createDurableProducer(kafka, { retries: 5, maxRetryTimeMs: 30_000 });
  await producer.connect();
  const chunk = 10_000;
  for (let start = 0; start < count; start += chunk) {
    const records: QueuedUsageRecord[] = queuedRecords(
      sampleUsageRecords(Math.min(chunk, count - start), { seed: start + 1, startMs: Date.now() - 3600_000 }),
      { eventKey: (i) => keyOf(start + i) },
    );
    const encoded = records.map((record) => ({ key: record.meta.eventKey, value: encodeWire(schemaId, JSON.stringify(record)) }));
    for (let offset = 0; offset < encoded.length; offset += 1000) {
      await producer.send({ topic, acks: -1, messages: encoded.slice(offset, offset + 1000) });
    }
  }
  await producer.disconnect();
}

/** Waits until usage_events holds `count` rows (the database appears with the ingester's migration); throws after 10 minutes. */
async function waitForRows(clickhouse: ReturnType<typeof createClickHouse>, count: number, what: string): Promise<void> {
  const started = performance.now();
  for (;;) {
    const [row] =
      (await (
        await clickhouse.query({ query: 'SELECT count() AS n FROM usage_events', format: 'JSONEachRow' }).catch(() => undefined)
      )?.json<{ n: string }>()) ?? [];
    if (Number(row?.n) >= count) return;
    if (performance.now() - started > 600_000) throw new Error(`${what} did not finish within 10 minutes`);
    await sleep(100);
  }
}

/** One ingester and one gateway on the same topic, keys and database: the pipeline under test. */
async function startPipeline(spec: {
  topic: string;
  database: string;
  groupId: string;
  prefix: string;
  port: number;
  level: 'info' | 'debug';
}): Promise<{ ingester: ServiceProcess; gateway: ServiceProcess }> {
  const { topic, database, groupId, prefix, port, level } = spec;
  const [ingester, gateway] = await Promise.all([
    startQuiet(
      'ingester',
      serviceEnv({
        USAGE_TOPIC: topic,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: groupId,
        REDIS_KEY_PREFIX: prefix,
        METRICS_PORT: 0,
      }),
      /ingester consuming/,
      level,
    ),
    startQuiet('gateway', gatewayServiceEnv(topic, prefix, port), /gateway listening/),
  ]);
  return { ingester, gateway };
}

/** With --profile: a fresh folder for one service's profile, summarised into bench/profiles/ at the end. */
const profiles: { dir: string; name: string; title: string; records: () => number }[] = [];
function profileDir(name: string, title: string, records: () => number): string | undefined {
  if (!options.profile) return undefined;
  const dir = path.join(work, 'profiles', `${name}-${runId}`);
  fs.mkdirSync(dir, { recursive: true });
  profiles.push({ dir, name, title, records });
  return dir;
}

/** The ingester's load units as its debug log reports them: whole unit, and the ClickHouse part. */
function unitTimings(logs: readonly string[]): { unitMs: number[]; clickhouseMs: number[]; rows: number[] } {
  const units = logs
    .filter((line) => line.includes('"unit loaded"'))
    .map((line) => JSON.parse(line) as { rows: number; ms: { dedupe: number; load: number; mark: number } });
  return {
    unitMs: units.map((unit) => unit.ms.dedupe + unit.ms.load + unit.ms.mark),
    clickhouseMs: units.map((unit) => unit.ms.load),
    rows: units.map((unit) => unit.rows),
  };
}

log(`starting the local stack (${quick ? 'quick' : 'full'} run, ${runs} runs per figure)`);
await stackUp(stack);

// Realistic bodies: success records with prompts of 0.5-4 KB and error records, from a seed.
const bodies = sampleUsageRecords(1000, { seed: 2026 }).map((record) => JSON.stringify(record));
const bodiesFile = path.join(work, 'bodies.json');
fs.writeFileSync(bodiesFile, JSON.stringify(bodies));
const meanBodyBytes = Math.round(bodies.reduce((sum, body) => sum + body.length, 0) / bodies.length);

const redis = createRedis(addresses.REDIS_URL);
await redis.connect();
const keyPrefix = `bench-${runId}:`;
const keyStore = new KeyStore(redis, keyPrefix);
const benchKey = await keyStore.create({ environment: 'prod', name: 'bench' });
const kafka = createKafka({ brokers: addresses.KAFKA_BROKERS.split(','), clientId: 'bench' });

// A partial run (--only) keeps the other figures of the last run.
const latestFile = path.join(root, 'bench/results/latest.json');
const previous = only && fs.existsSync(latestFile) ? (JSON.parse(fs.readFileSync(latestFile, 'utf8')) as Record<string, any>) : {};
const results: Record<string, Record<string, number | string | Figure | Record<string, unknown>[]>> = Object.fromEntries(
  ['gateway', 'batch', 'produce', 'clickhouseCeiling', 'ingester', 'scaleOut', 'freshness', 'endToEnd', 'revocation', 'memory']
    .filter((key) => previous[key])
    .map((key) => [key, previous[key]]),
);

// 1. Gateway throughput and latency ------------------------------------------------
if (section('gateway')) {
  log('1. gateway throughput and latency (baseline: bare Fastify with TLS)');
  const baseline: number[] = [];
  const single: number[] = [];
  const perCore: number[] = [];
  const p50at50: number[] = [];
  const p99at50: number[] = [];
  const p999at50: number[] = [];
  const p99at80: number[] = [];
  const baselineP99at50: number[] = [];
  const non2xx: number[] = [];
  const rss: number[] = [];
  const port = 18443;
  const load = (url: string, extra: Record<string, unknown> = {}) =>
    runLoad({
      url,
      bodiesFile,
      headers: { 'x-api-key': benchKey.key },
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      durationSeconds: scale.loadSeconds,
      ...extra,
    });
  // The three servers start once and stay up; each run loads them in turn, so
  // every run's figures share the machine's conditions of that moment.
  const gatewayEnv = (gatewayPort: number) => gatewayServiceEnv(`bench.gateway.${runId}`, keyPrefix, gatewayPort);
  const [baselineServer, gateway, cluster] = await Promise.all([
    startBaseline(port),
    startQuiet('gateway', gatewayEnv(port + 4), /gateway listening/),
    startQuiet('gateway-cluster', { ...gatewayEnv(port + 5), GATEWAY_WORKERS: String(os.availableParallelism()) }, /gateway listening/),
  ]);
  await sleep(1500); // let every worker listen
  const url = (serverPort: number) => `https://127.0.0.1:${serverPort}/v1/telemetry/usage`;
  for (let run = 0; run < runs; run++) {
    baseline.push((await load(url(port))).perSec);
    const max = await load(url(port + 4));
    single.push(max.perSec);
    non2xx.push(max.non2xx + max.errors);
    // Fixed rates: measured after a warm-up at the same rate (connections, JIT).
    const fixed = (share: number) => ({
      rate: Math.max(1, Math.floor(max.perSec * share)),
      durationSeconds: scale.latencySeconds,
      warmupSeconds: scale.warmupSeconds,
    });
    const at50 = await load(url(port + 4), fixed(0.5));
    p50at50.push(at50.p50Ms);
    p99at50.push(at50.p99Ms);
    p999at50.push(at50.p999Ms);
    const at80 = await load(url(port + 4), fixed(0.8));
    p99at80.push(at80.p99Ms);
    // The floor under those latencies: the bare server at the same rate, same generator.
    baselineP99at50.push((await load(url(port), fixed(0.5))).p99Ms);
    rss.push(peakRssMb(gateway.child.pid));
    perCore.push((await load(url(port + 5))).perSec);
    log(
      `   run ${run + 1}: baseline ${baseline.at(-1)!.toFixed(0)}/s, gateway ${single.at(-1)!.toFixed(0)}/s, per-core ${perCore.at(-1)!.toFixed(0)}/s, p99@50% ${p99at50.at(-1)!.toFixed(1)} ms`,
    );
  }
  await Promise.all([baselineServer.stop(), gateway.stop(), cluster.stop()]);
  const singleFigure = figure(single);
  const base = figure(baseline);
  results.gateway = {
    recordsPerSec: singleFigure.median,
    baselinePerSec: base.median,
    ratio: singleFigure.median / base.median,
    perCoreRecordsPerSec: figure(perCore).median,
    p50Ms: figure(p50at50).median,
    p99Ms: figure(p99at50).median,
    p999Ms: figure(p999at50).median,
    p99MsAt80: figure(p99at80).median,
    baselineP99Ms: figure(baselineP99at50).median,
    non2xxAtMax: figure(non2xx).median,
    meanBodyBytes,
    single: singleFigure,
    baseline: base,
    perCore: figure(perCore),
    p99At50: figure(p99at50),
    p99At80: figure(p99at80),
    baselineP99At50: figure(baselineP99at50),
  };
  results.memory = { ...results.memory, gatewayRssMb: figure(rss).median, gatewayRss: figure(rss) };
}

// 1b. Batch ingest through the SDK ------------------------------------------------
if (section('batch')) {
  const flushAt = 500;
  const concurrency = 4;
  log(
    `1b. batch ingest: the SDK (batches of ${flushAt}, gzip, ${concurrency} in flight) into Kafka, ingester stopped; single endpoint beside it`,
  );
  const port = 18450;
  const [baselineServer, gateway, cluster] = await Promise.all([
    startBaseline(port),
    startQuiet(
      'gateway',
      gatewayServiceEnv(`bench.batch.${runId}`, keyPrefix, port + 1),
      /gateway listening/,
      'info',
      profileDir('gateway', 'Gateway under the batch section (batch and single-record load, every run)', () => gatewayRecords),
    ),
    startQuiet(
      'gateway-cluster',
      { ...gatewayServiceEnv(`bench.batch.${runId}`, keyPrefix, port + 2), GATEWAY_WORKERS: String(os.availableParallelism()) },
      /gateway listening/,
    ),
  ]);
  await sleep(1500); // let every worker listen
  const sdkLoad = (endpoint: string) =>
    runSdkLoad({
      endpoint,
      apiKey: benchKey.key,
      bodiesFile,
      durationSeconds: scale.loadSeconds,
      warmupSeconds: scale.warmupSeconds,
      flushAt,
      maxConcurrentRequests: concurrency,
    });
  let gatewayRecords = 0;
  const batchRates: number[] = [];
  const batchP99: number[] = [];
  const batchP50: number[] = [];
  const baselineRates: number[] = [];
  const singleRates: number[] = [];
  const cpuPerRecord: number[] = [];
  const singleCpuPerRecord: number[] = [];
  const clusterRates: number[] = [];
  let refused = 0;
  for (let run = 0; run < runs; run++) {
    baselineRates.push((await sdkLoad(`https://127.0.0.1:${port}`)).perSec);
    let cpu = cpuSeconds(gateway.child.pid);
    const batch = await sdkLoad(`https://127.0.0.1:${port + 1}`);
    cpuPerRecord.push(((cpuSeconds(gateway.child.pid) - cpu) * 1e6) / batch.accepted);
    batchRates.push(batch.perSec);
    gatewayRecords += batch.accepted;
    batchP99.push(batch.p99Ms);
    batchP50.push(batch.p50Ms);
    refused += batch.failed + batch.dropped;
    cpu = cpuSeconds(gateway.child.pid);
    const single = await runLoad({
      url: `https://127.0.0.1:${port + 1}/v1/telemetry/usage`,
      bodiesFile,
      headers: { 'x-api-key': benchKey.key },
      connections: Number(process.env.BENCH_CONNECTIONS ?? 50),
      durationSeconds: scale.loadSeconds,
    });
    singleCpuPerRecord.push(((cpuSeconds(gateway.child.pid) - cpu) * 1e6) / single.accepted);
    gatewayRecords += single.accepted;
    singleRates.push(single.perSec);
    clusterRates.push((await sdkLoad(`https://127.0.0.1:${port + 2}`)).perSec);
    log(
      `   run ${run + 1}: batch ${batchRates.at(-1)!.toFixed(0)} records/s (p99 ${batch.p99Ms.toFixed(0)} ms per batch, ${cpuPerRecord.at(-1)!.toFixed(0)} µs CPU per record), bare Fastify ${baselineRates.at(-1)!.toFixed(0)}/s, single ${singleRates.at(-1)!.toFixed(0)}/s, batch one process per core ${clusterRates.at(-1)!.toFixed(0)}/s`,
    );
  }
  const gatewayRss = peakRssMb(gateway.child.pid);
  await Promise.all([baselineServer.stop(), gateway.stop(), cluster.stop()]);
  const batched = figure(batchRates);
  const base = figure(baselineRates);
  results.batch = {
    recordsPerS: batched.median,
    p99Ms: figure(batchP99).median,
    p50Ms: figure(batchP50).median,
    baselineRecordsPerS: base.median,
    ratio: batched.median / base.median,
    singleRecordsPerS: figure(singleRates).median,
    perCoreRecordsPerS: figure(clusterRates).median,
    gatewayCpuUsPerRecord: figure(cpuPerRecord).median,
    singleGatewayCpuUsPerRecord: figure(singleCpuPerRecord).median,
    gatewayRssMb: gatewayRss,
    notAccepted: refused,
    flushAt,
    requestsInFlight: concurrency,
    meanBodyBytes,
    batch: batched,
    baseline: base,
    single: figure(singleRates),
    perCore: figure(clusterRates),
    p99: figure(batchP99),
  };
}

// 2. Produce path ------------------------------------------------------------------
if (section('produce')) {
  log('2. produce path: the gateway batcher vs kafkajs sendBatch in large batches');
  const registry = createRegistry(addresses.SCHEMA_REGISTRY_URL);
  const schemaId = await registerJsonSchema(registry, 'telemetry.usage.v1-value', buildQueuedRecordSchema());
  const messages = queuedRecords(sampleUsageRecords(scale.produceRecords, { seed: 7 }), { eventKey: (i) => `p-${runId}-${i}` }).map(
    (record) => ({
      key: record.meta.eventKey,
      value: encodeWire(schemaId, JSON.stringify(record)),
    }),
  );
  const batcherRates: number[] = [];
  const baselineRates: number[] = [];
  for (let run = 0; run < runs; run++) {
    const topic = `bench.produce.${runId}.${run}`;
    await ensureTopic(kafka, topic, 6);
    // As the gateway runs it: three producers, one batch in flight on each.
    const handles = Array.from({ length: 3 }, () => new ProducerHandle(kafka, { retries: 2, maxRetryTimeMs: 5000 }));
    await Promise.all(handles.map((handle) => handle.current()));
    const batcher = new ProduceBatcher(handles, {
      topic,
      maxInFlightBatches: handles.length,
      lingerMs: 2,
      maxBatchRecords: 1000,
      maxBatchBytes: 4 * 1024 * 1024,
      maxQueuedRecords: messages.length,
      sendTimeoutMs: 30_000,
    });
    let started = performance.now();
    await Promise.all(messages.map((message) => batcher.enqueue(message)));
    batcherRates.push(messages.length / ((performance.now() - started) / 1000));
    await Promise.all(handles.map((handle) => handle.reset()));

    const baselineTopic = `${topic}.baseline`;
    await ensureTopic(kafka, baselineTopic, 6);
    const producer = createDurableProducer(kafka, { retries: 2, maxRetryTimeMs: 5000 });
    await producer.connect();
    started = performance.now();
    for (let start = 0; start < messages.length; start += 1000) {
      await producer.sendBatch({ acks: -1, topicMessages: [{ topic: baselineTopic, messages: messages.slice(start, start + 1000) }] });
    }
    baselineRates.push(messages.length / ((performance.now() - started) / 1000));
    await producer.disconnect();
    log(`   run ${run + 1}: batcher ${batcherRates.at(-1)!.toFixed(0)}/s, sendBatch ${baselineRates.at(-1)!.toFixed(0)}/s`);
  }
  const batched = figure(batcherRates);
  const base = figure(baselineRates);
  results.produce = {
    recordsPerSec: batched.median,
    baselinePerSec: base.median,
    ratio: batched.median / base.median,
    batcher: batched,
    baseline: base,
  };
}

// 3. Ingester throughput -----------------------------------------------------------
if (section('ingester')) {
  log(`3. ingester throughput: ${scale.ingestRecords} records pre-filled (baseline: bare kafkajs consumer + JSON.parse)`);
  const topic = `bench.ingest.${runId}`;
  await prefillTopic(topic, 6, scale.ingestRecords, (i) => `i-${runId}-${i}`);

  const ingestRates: number[] = [];
  const bareRates: number[] = [];
  const ceilingRates: number[] = [];
  const rss: number[] = [];
  const ingesterCpu: number[] = [];
  // ClickHouse's own ceiling: the same rows, enriched once up front, inserted the way a
  // hand-written loader would (HTTP, JSONEachRow, batches of INGEST_BATCH_MAX_ROWS, both
  // tables at once, their materialized views firing) into a scratch database.
  const ceilingRows = sampleUsageRecords(Math.min(scale.ingestRecords, 100_000), { seed: 11, startMs: Date.now() - 3600_000 });
  const prices = PriceTable.load();
  const enriched = queuedRecords(ceilingRows, { eventKey: (i) => `c-${runId}-${i}` }).map((record) => enrich(record, prices));
  const ceilingBatch = Number(process.env.INGEST_BATCH_MAX_ROWS ?? 20_000);
  for (let run = 0; run < runs; run++) {
    const database = `bench_ceiling_${runId}_${run}`;
    const server = createClickHouse({ url: addresses.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
    const scratch = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    await migrate(server, scratch, database);
    const started = performance.now();
    for (let start = 0; start < enriched.length; start += ceilingBatch) {
      const rows = enriched.slice(start, start + ceilingBatch);
      const io = rows.flatMap((row) => (row.io ? [row.io] : []));
      await Promise.all([
        scratch.insert({ table: 'usage_events', values: rows.map((row) => row.event), format: 'JSONEachRow' }),
        io.length > 0 ? scratch.insert({ table: 'usage_io', values: io, format: 'JSONEachRow' }) : undefined,
      ]);
    }
    ceilingRates.push(enriched.length / ((performance.now() - started) / 1000));
    await server.command({ query: `DROP DATABASE IF EXISTS ${database}` });
    await Promise.all([server.close(), scratch.close()]);
    log(
      `   run ${run + 1}: ClickHouse ceiling ${ceilingRates.at(-1)!.toFixed(0)} rows/s (${enriched.length} rows, batches of ${ceilingBatch})`,
    );
  }
  for (let run = 0; run < runs; run++) {
    // Baseline: read and decode the same topic, nothing else.
    const consumer = kafka.consumer({
      groupId: `bench-bare-${runId}-${run}`,
      maxBytesPerPartition: 16 * 1024 * 1024,
      maxWaitTimeInMs: 250,
    });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let seen = 0;
    let started = 0;
    await new Promise<void>((resolve) => {
      void consumer.run({
        eachBatch: async ({ batch }) => {
          if (started === 0) started = performance.now();
          for (const message of batch.messages) {
            const wire = decodeWire(message.value);
            if (wire.ok) JSON.parse(wire.json);
            seen++;
          }
          if (seen >= scale.ingestRecords) resolve();
        },
      });
    });
    bareRates.push(scale.ingestRecords / ((performance.now() - started) / 1000));
    await consumer.disconnect();

    const database = `bench_${runId}_${run}`;
    const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    const ingester = await startQuiet(
      'ingester',
      serviceEnv({
        USAGE_TOPIC: topic,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: `bench-ingest-${runId}-${run}`,
        REDIS_KEY_PREFIX: `bench-${runId}-${run}:`,
        METRICS_PORT: 0,
      }),
      /ingester consuming/,
      'info',
      run === 0
        ? profileDir('ingester', 'Ingester under the ingester section (first run, pre-filled topic)', () => scale.ingestRecords)
        : undefined,
    );
    const ingestStart = performance.now();
    const cpuStart = cpuSeconds(ingester.child.pid);
    await waitForRows(clickhouse, scale.ingestRecords, 'the ingester');
    ingestRates.push(scale.ingestRecords / ((performance.now() - ingestStart) / 1000));
    ingesterCpu.push(((cpuSeconds(ingester.child.pid) - cpuStart) * 1e6) / scale.ingestRecords);
    rss.push(peakRssMb(ingester.child.pid));
    await ingester.stop();
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    log(
      `   run ${run + 1}: ingester ${ingestRates.at(-1)!.toFixed(0)} rows/s, bare consumer ${bareRates.at(-1)!.toFixed(0)}/s, ingester peak RSS ${rss.at(-1)!.toFixed(0)} MB`,
    );
  }
  const ingest = figure(ingestRates);
  const bare = figure(bareRates);
  const ceiling = figure(ceilingRates);
  results.clickhouseCeiling = { rowsPerS: ceiling.median, rows: enriched.length, batchRows: ceilingBatch, ceiling };
  results.ingester = {
    rowsPerSec: ingest.median,
    baselinePerSec: bare.median,
    ratio: ingest.median / bare.median,
    ratioToClickhouse: ingest.median / ceiling.median,
    cpuUsPerRecord: figure(ingesterCpu).median,
    records: scale.ingestRecords,
    ingester: ingest,
    baseline: bare,
  };
  results.memory = { ...results.memory, ingesterRssMb: figure(rss).median, ingesterRss: figure(rss) };
}

// 3b. Scale-out --------------------------------------------------------------------
// The same pre-filled records loaded by one ingester and by two in one consumer
// group, from a topic of 6 partitions and one of 12. Two processes on two cores
// share them with ClickHouse, the broker and Redis: the figure shows whether a second
// member adds rows/s here or only splits the same CPU.
if (section('scaleOut')) {
  const count = quick ? 10_000 : Number(process.env.BENCH_SCALE_RECORDS ?? 60_000);
  log(`3b. scale-out: ${count} records, 1 vs 2 ingesters, 6 vs 12 partitions`);
  const figures: Record<string, number> = {};
  for (const partitions of [6, 12]) {
    const topic = `bench.scale.${runId}.${partitions}`;
    await prefillTopic(topic, partitions, count, (i) => `s-${runId}-${partitions}-${i}`);
    for (const members of [1, 2]) {
      const database = `bench_scale_${runId}_${partitions}_${members}`;
      const env = serviceEnv({
        USAGE_TOPIC: topic,
        USAGE_TOPIC_PARTITIONS: partitions,
        CLICKHOUSE_DATABASE: database,
        INGEST_GROUP_ID: `bench-scale-${runId}-${partitions}-${members}`,
        REDIS_KEY_PREFIX: `bench-scale-${runId}-${partitions}-${members}:`,
        METRICS_PORT: 0,
      });
      // The members join together, so the clock starts once all of them are in the group.
      const ingesters = await Promise.all(Array.from({ length: members }, () => startQuiet('ingester', env, /ingester consuming/)));
      const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
      const started = performance.now();
      await waitForRows(clickhouse, count, 'the scale-out run');
      const rate = count / ((performance.now() - started) / 1000);
      figures[`p${partitions}Ingesters${members}RowsPerS`] = rate;
      await Promise.all(ingesters.map((ingester) => ingester.stop()));
      await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
      await clickhouse.close();
      log(`   ${partitions} partitions, ${members} ingester${members > 1 ? 's' : ''}: ${rate.toFixed(0)} rows/s`);
    }
  }
  results.scaleOut = {
    ...figures,
    records: count,
    twoVsOneAt6: figures.p6Ingesters2RowsPerS! / figures.p6Ingesters1RowsPerS!,
    twoVsOneAt12: figures.p12Ingesters2RowsPerS! / figures.p12Ingesters1RowsPerS!,
  };
}

// 4. Freshness ---------------------------------------------------------------------
if (section('freshness')) {
  log('4. freshness: 202 -> row visible to an analytics query, at fixed rates');
  const port = 18444;
  const agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile) } });
  // --quick measures the target rate only.
  for (const rate of quick ? [5000] : [2000, 5000]) {
    const p50s: number[] = [];
    const p99s: number[] = [];
    const achieved: number[] = [];
    const unitP50s: number[] = [];
    const unitP99s: number[] = [];
    const clickhouseP50s: number[] = [];
    const unitRows: number[] = [];
    // One gateway and one ingester per rate, loaded by each run in turn.
    const topic = `bench.fresh.${runId}.${rate}`;
    const database = `bench_fresh_${runId}_${rate}`;
    const prefix = `bench-fresh-${runId}-${rate}:`;
    const key = await new KeyStore(redis, prefix).create({ environment: 'prod', name: 'freshness' });
    const { ingester, gateway } = await startPipeline({
      topic,
      database,
      groupId: `bench-fresh-${runId}-${rate}`,
      prefix,
      port,
      level: 'debug',
    });
    const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
    const url = `https://127.0.0.1:${port}/v1/telemetry/usage`;
    for (let run = 0; run < runs; run++) {
      const logsBefore = ingester.logs.length;
      // The background load comes through the batch endpoint (the SDK at a fixed
      // offered rate): the single endpoint alone does not reach 5,000/s here. The
      // figure is reported at the rate achieved, beside the rate offered.
      const background = runSdkLoad({
        endpoint: `https://127.0.0.1:${port}`,
        apiKey: key.key,
        bodiesFile,
        durationSeconds: scale.freshnessSeconds,
        warmupSeconds: 0,
        flushAt: 500,
        maxConcurrentRequests: 4,
        rate,
      });
      // Markers: 10 per second, each with a user id of its own, timed from its 202.
      const accepted = new Map<string, number>();
      const visible = new Map<string, number>();
      const markerEnd = Date.now() + scale.freshnessSeconds * 1000 - 500;
      let index = 0;
      const markers = (async () => {
        while (Date.now() < markerEnd) {
          const userId = `fresh-${runId}-${run}-${index++}`;
          const record = JSON.parse(bodies[index % bodies.length]!);
          record.user.id = userId;
          const response = await request(url, {
            method: 'POST',
            dispatcher: agent,
            headers: { 'content-type': 'application/json', 'x-api-key': key.key },
            body: JSON.stringify(record),
          });
          await response.body.text();
          if (response.statusCode === 202) accepted.set(userId, performance.now());
          await sleep(100);
        }
      })();
      const poll = (async () => {
        const deadline = Date.now() + scale.freshnessSeconds * 1000 + 15_000;
        while (Date.now() < deadline) {
          const pending = [...accepted.keys()].filter((id) => !visible.has(id));
          if (pending.length > 0) {
            try {
              const result = await clickhouse.query({
                query: `SELECT user_id FROM usage_rollup_minute WHERE user_id IN (${pending.map((id) => `'${id}'`).join(',')}) GROUP BY user_id`,
                format: 'JSONEachRow',
              });
              const now = performance.now();
              for (const row of await result.json<{ user_id: string }>()) visible.set(row.user_id, now);
            } catch {
              // the database appears with the ingester's first migration
            }
          } else if (Date.now() > markerEnd + 1000) break;
          await sleep(20);
        }
      })();
      const [load] = await Promise.all([background, markers, poll]);
      const delays = [...visible.entries()].map(([id, at]) => at - accepted.get(id)!);
      p50s.push(percentile(delays, 50));
      p99s.push(percentile(delays, 99));
      achieved.push(load.perSec);
      const units = unitTimings(ingester.logs.slice(logsBefore));
      unitP50s.push(percentile(units.unitMs, 50));
      unitP99s.push(percentile(units.unitMs, 99));
      clickhouseP50s.push(percentile(units.clickhouseMs, 50));
      unitRows.push(percentile(units.rows, 50));
      log(
        `   ${rate}/s run ${run + 1}: achieved ${load.perSec.toFixed(0)}/s, ${delays.length}/${accepted.size} markers seen, p50 ${percentile(delays, 50).toFixed(0)} ms, p99 ${percentile(delays, 99).toFixed(0)} ms; load units p50 ${unitP50s.at(-1)!.toFixed(0)} ms (ClickHouse ${clickhouseP50s.at(-1)!.toFixed(0)}), p99 ${unitP99s.at(-1)!.toFixed(0)} ms, ${unitRows.at(-1)} rows`,
      );
    }
    await Promise.all([gateway.stop(), ingester.stop()]);
    await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
    await clickhouse.close();
    results.freshness = {
      ...(results.freshness ?? {}),
      [`p50MsAt${rate}`]: figure(p50s).median,
      [`p99MsAt${rate}`]: figure(p99s).median,
      [`achievedPerSecAt${rate}`]: figure(achieved).median,
      [`p99At${rate}`]: figure(p99s),
      [`unitMsP50At${rate}`]: figure(unitP50s).median,
      [`unitMsP99At${rate}`]: figure(unitP99s).median,
      [`unitClickhouseMsP50At${rate}`]: figure(clickhouseP50s).median,
      [`unitRowsP50At${rate}`]: figure(unitRows).median,
    };
  }
  results.freshness = {
    ...results.freshness,
    p99Ms: results.freshness!.p99MsAt5000 as number,
    p50Ms: results.freshness!.p50MsAt5000 as number,
  };
  await agent.close();
}

// 4b. End to end ------------------------------------------------------------------
// A ladder of offered rates through the batch endpoint (SDK as the client), gateway
// and ingester co-located with the whole stack. A step passes when the SDK achieved
// at least 95 % of the offered rate with nothing failed or dropped, the consumer lag
// stayed bounded (at most 5 s of records over the step's second half), the topic
// drained within 2 minutes after it, and ClickHouse holds every accepted record once
// (distinct event keys = accepted) and counts it once (the rollup's requests =
// accepted). sustainedPerS is the highest offered rate of a passing step; the ladder
// stops at the first failing step.
if (section('endToEnd')) {
  const stepSeconds = quick ? 10 : Number(process.env.BENCH_E2E_STEP_SECONDS ?? 60);
  const ladder = quick ? [1000] : (process.env.BENCH_E2E_RATES ?? '1000,2000,3000,4000,5000,6000,8000,10000').split(',').map(Number);
  log(`4b. end to end: offered ${ladder.join(', ')} records/s for ${stepSeconds} s each, batch endpoint, until a step fails`);
  const topic = `bench.e2e.${runId}`;
  const database = `bench_e2e_${runId}`;
  const prefix = `bench-e2e-${runId}:`;
  const groupId = `bench-e2e-${runId}`;
  const port = 18460;
  const store = new KeyStore(redis, prefix);
  const { ingester, gateway } = await startPipeline({ topic, database, groupId, prefix, port, level: 'info' });
  const admin = kafka.admin();
  await admin.connect();
  const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database, username: 'default', password: '' });
  const lagNow = async () => (await consumerLag(admin, groupId, topic)).reduce((sum, partition) => sum + partition.lag, 0);
  const steps: Record<string, number | boolean | string>[] = [];
  let sustained = 0;
  let records = 0;
  const cpu = { gateway: cpuSeconds(gateway.child.pid), ingester: cpuSeconds(ingester.child.pid) };
  for (const rate of ladder) {
    const key = await store.create({ environment: 'prod', name: `e2e-${rate}` });
    const lags: { at: number; lag: number }[] = [];
    let sampling = true;
    const started = performance.now();
    const sampler = (async () => {
      while (sampling) {
        lags.push({ at: (performance.now() - started) / 1000, lag: await lagNow() });
        await sleep(1000);
      }
    })();
    const load = (await runSdkLoad({
      endpoint: `https://127.0.0.1:${port}`,
      apiKey: key.key,
      bodiesFile,
      durationSeconds: stepSeconds,
      warmupSeconds: 0,
      flushAt: 500,
      maxConcurrentRequests: 4,
      rate,
    })) as SdkLoadResult & { sentTotal: number; offeredPerSec: number };
    sampling = false;
    await sampler;
    const drainStarted = performance.now();
    let lag = await lagNow();
    while (lag > 0 && performance.now() - drainStarted < 120_000) {
      await sleep(500);
      lag = await lagNow();
    }
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    // The last rows of a unit are marked and committed after the insert: give the
    // rollup a moment to show what the commit already says.
    await sleep(1000);
    const id = key.id.replace(/'/g, '');
    const [stored] = await (
      await clickhouse.query({
        query: `SELECT uniqExact(event_key) AS n FROM usage_events WHERE api_key_id = '${id}'`,
        format: 'JSONEachRow',
      })
    ).json<{ n: string }>();
    const [counted] = await (
      await clickhouse.query({
        query: `SELECT countMerge(requests) AS n FROM usage_rollup_minute WHERE api_key_id = '${id}'`,
        format: 'JSONEachRow',
      })
    ).json<{ n: string }>();
    const accepted = load.sentTotal;
    const lost = accepted - Number(stored?.n ?? 0);
    const duplicates = Number(counted?.n ?? 0) - Number(stored?.n ?? 0);
    const secondHalf = lags.filter((sample) => sample.at >= stepSeconds / 2);
    const maxLag = Math.max(0, ...lags.map((sample) => sample.lag));
    const maxLagSecondHalf = Math.max(0, ...secondHalf.map((sample) => sample.lag));
    const bounded = maxLagSecondHalf <= rate * 5;
    const achievedEnough = load.perSec >= rate * 0.95;
    const passed = bounded && lag === 0 && lost === 0 && duplicates === 0 && load.failed === 0 && load.dropped === 0 && achievedEnough;
    records += accepted;
    steps.push({
      offeredPerS: rate,
      achievedPerS: load.perSec,
      accepted,
      stored: Number(stored?.n ?? 0),
      lost,
      duplicates,
      failed: load.failed,
      dropped: load.dropped,
      maxLag,
      maxLagSecondHalf,
      drainSeconds,
      batchP99Ms: load.p99Ms,
      passed,
      limitedBy: !achievedEnough
        ? 'gateway (offered rate not achieved)'
        : !bounded || lag > 0
          ? 'ingester (lag grew)'
          : passed
            ? ''
            : 'loss or duplicates',
    });
    log(
      `   offered ${rate}/s: achieved ${load.perSec.toFixed(0)}/s, ${accepted} accepted, ${lost} lost, ${duplicates} counted twice, max lag ${maxLag} (${maxLagSecondHalf} in the second half), drained in ${drainSeconds.toFixed(1)} s: ${passed ? 'passed' : `failed (${steps.at(-1)!.limitedBy})`}`,
    );
    if (!passed) break;
    sustained = rate;
  }
  const cpuUs = {
    gateway: ((cpuSeconds(gateway.child.pid) - cpu.gateway) * 1e6) / Math.max(1, records),
    ingester: ((cpuSeconds(ingester.child.pid) - cpu.ingester) * 1e6) / Math.max(1, records),
  };
  const rss = { gateway: peakRssMb(gateway.child.pid), ingester: peakRssMb(ingester.child.pid) };
  await admin.disconnect();
  await Promise.all([gateway.stop(), ingester.stop()]);
  await clickhouse.command({ query: `DROP DATABASE IF EXISTS ${database}` }).catch(() => undefined);
  await clickhouse.close();
  results.endToEnd = {
    sustainedPerS: sustained,
    stepSeconds,
    gatewayCpuUsPerRecord: cpuUs.gateway,
    ingesterCpuUsPerRecord: cpuUs.ingester,
    gatewayRssMb: rss.gateway,
    ingesterRssMb: rss.ingester,
    steps,
  };
}

// 5. Revocation --------------------------------------------------------------------
if (section('revocation')) {
  log(`5. revocation: ${scale.revokedKeys} keys deleted while 2 gateways serve traffic`);
  const topic = `bench.revoke.${runId}`;
  const prefix = `bench-revoke-${runId}:`;
  const store = new KeyStore(redis, prefix);
  const gateways = await Promise.all(
    [18445, 18446].map((port) => startQuiet('gateway', gatewayServiceEnv(topic, prefix, port), /gateway listening/)),
  );
  const agent = new Agent({ connect: { ca: fs.readFileSync(tls.certFile) } });
  const post = async (gateway: ServiceProcess, key: string) => {
    const response = await request(`${gateway.url}/v1/telemetry/usage`, {
      method: 'POST',
      dispatcher: agent,
      headers: { 'content-type': 'application/json', 'x-api-key': key },
      body: bodies[0],
    });
    await response.body.text();
    return response.statusCode;
  };
  const samples: number[] = [];
  for (let run = 0; run < runs; run++) {
    const keys = await Promise.all(
      Array.from({ length: scale.revokedKeys }, (_, i) => store.create({ environment: 'dev', name: `revoke-${run}-${i}` })),
    );
    for (const key of keys) for (const gateway of gateways) await post(gateway, key.key); // warm both caches
    // Background traffic on both instances with a key that stays valid.
    const steady = await store.create({ environment: 'prod', name: 'steady' });
    const traffic = gateways.map((gateway) =>
      runLoad({
        url: `${gateway.url}/v1/telemetry/usage`,
        bodiesFile,
        headers: { 'x-api-key': steady.key },
        connections: 4,
        durationSeconds: quick ? 1.5 : 10,
        warmupSeconds: scale.warmupSeconds,
        rate: 300,
      }),
    );
    await sleep(500);
    for (const key of keys) {
      await store.delete(key.id);
      const deletedAt = performance.now();
      await Promise.all(
        gateways.map(async (gateway) => {
          while ((await post(gateway, key.key)) !== 401) {
            if (performance.now() - deletedAt > 5000) break;
          }
          samples.push(performance.now() - deletedAt);
        }),
      );
    }
    await Promise.allSettled(traffic);
    log(`   run ${run + 1}: p50 ${percentile(samples, 50).toFixed(1)} ms, max ${Math.max(...samples).toFixed(1)} ms`);
  }
  await Promise.all(gateways.map((gateway) => gateway.stop()));
  await agent.close();
  results.revocation = {
    p50Ms: percentile(samples, 50),
    p99Ms: percentile(samples, 99),
    maxMs: Math.max(...samples),
    samples: samples.length,
  };
}

// Write the figures down ---------------------------------------------------------
const clickhouse = createClickHouse({ url: addresses.CLICKHOUSE_URL, database: 'default', username: 'default', password: '' });
const [chMajor, chMinor] = await serverVersion(clickhouse);
await clickhouse.close();
const pom = fs.readFileSync(path.join(root, 'deploy/maven/pom.xml'), 'utf8');
const machine = {
  cores: os.availableParallelism(),
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  cpu: os.cpus()[0]?.model ?? 'unknown',
  node: process.version,
  kafka: pom.match(/<kafka.version>([^<]+)/)?.[1] ?? '?',
  clickhouse: `${chMajor}.${chMinor}`,
};

// --profile: one Markdown summary per profiled service (the raw profiles stay in the stack folder).
for (const profile of profiles) {
  const files = fs.readdirSync(profile.dir).filter((file) => file.endsWith('.cpuprofile'));
  // The main thread's profile is the largest; workers (pino's transport) write small ones.
  const main = files.map((file) => path.join(profile.dir, file)).sort((a, b) => fs.statSync(b).size - fs.statSync(a).size)[0];
  if (!main) continue;
  const summary = summarise(JSON.parse(fs.readFileSync(main, 'utf8')), 30);
  const out = path.join(root, 'bench/profiles', `${profile.name}.md`);
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(
    out,
    renderSummary(summary, `${profile.title}, ${new Date().toISOString().slice(0, 10)}`, { count: profile.records(), unit: 'records' }),
  );
  log(`wrote ${path.relative(root, out)}`);
}

const output: { date: string; mode: string; runs: number; machine: typeof machine } & Record<string, any> = {
  date: new Date().toISOString(),
  mode: quick ? 'quick' : 'full',
  // With --only, the other sections' figures are the previous run's.
  sections: only ? [...only] : 'all',
  runs,
  machine,
  ...results,
};
fs.mkdirSync(path.join(root, 'bench/results'), { recursive: true });
fs.writeFileSync(path.join(root, 'bench/results/latest.json'), `${JSON.stringify(output, null, 2)}\n`);
fs.writeFileSync(path.join(root, 'BENCHMARKS.md'), renderMarkdown(output));
log('wrote bench/results/latest.json and BENCHMARKS.md');
redis.disconnect();
process.exit(0);

function renderMarkdown(data: typeof output): string {
  const f = (value: unknown, digits = 0) =>
    typeof value === 'number' && Number.isFinite(value)
      ? value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: digits })
      : 'n/a';
  const range = (fig: unknown, digits = 0) => {
    const x = fig as Figure | undefined;
    return x ? `${f(x.median, digits)} (${f(x.min, digits)}–${f(x.max, digits)})` : 'n/a';
  };
  const g = data.gateway as Record<string, any>;
  const b = (data.batch ?? {}) as Record<string, any>;
  const p = data.produce as Record<string, any>;
  const i = data.ingester as Record<string, any>;
  const c = (data.clickhouseCeiling ?? {}) as Record<string, any>;
  const fr = data.freshness as Record<string, any>;
  const r = data.revocation as Record<string, any>;
  const m = data.memory as Record<string, any>;
  const e = (data.endToEnd ?? {}) as Record<string, any>;
  const so = (data.scaleOut ?? {}) as Record<string, any>;
  const steps = (e.steps ?? []) as Record<string, any>[];
  const ladder = steps
    .map(
      (step) =>
        `| ${f(step.offeredPerS)} | ${f(step.achievedPerS)} | ${f(step.accepted)} | ${f(step.lost)} | ${f(step.duplicates)} | ${f(step.maxLag)} / ${f(step.maxLagSecondHalf)} | ${f(step.drainSeconds, 1)} s | ${step.passed ? 'passed' : `failed: ${step.limitedBy}`} |`,
    )
    .join('\n');
  const met = (ok: boolean | undefined) => (ok === undefined ? 'not measured' : ok ? '**met**' : '**not met**');
  const num = (value: unknown) => (typeof value === 'number' && Number.isFinite(value) ? value : undefined);
  const check = (value: unknown, test: (x: number) => boolean) => (num(value) === undefined ? undefined : test(num(value)!));
  const targets = [
    [
      'batch endpoint ≥ 20,000 accepted records/s into Kafka',
      `${f(b.recordsPerS)}/s (one process per core ${f(b.perCoreRecordsPerS)}/s)`,
      check(Math.max(b.recordsPerS ?? NaN, b.perCoreRecordsPerS ?? NaN), (x) => x >= 20_000),
    ],
    ["ingester ≥ 0.5 of ClickHouse's own insert rate", f(i.ratioToClickhouse, 2), check(i.ratioToClickhouse, (x) => x >= 0.5)],
    [
      'end to end ≥ 10,000 records/s sustained, zero loss, zero duplicates',
      `${f(e.sustainedPerS)}/s`,
      check(e.sustainedPerS, (x) => x >= 10_000),
    ],
    [
      'freshness p99 < 1,000 ms at 5,000 records/s achieved',
      `${f(fr.p99MsAt5000)} ms at ${f(fr.achievedPerSecAt5000)}/s achieved`,
      check(fr.p99MsAt5000, (x) => x < 1000 && fr.achievedPerSecAt5000 >= 4750),
    ],
    ['gateway single-record ≥ 0.6 of bare Fastify', f(g.ratio, 2), check(g.ratio, (x) => x >= 0.6)],
    ['gateway p99 < 20 ms at half its maximum', `${f(g.p99Ms)} ms`, check(g.p99Ms, (x) => x < 20)],
    ['gateway RSS < 200 MB under the end-to-end run', `${f(e.gatewayRssMb)} MB`, check(e.gatewayRssMb, (x) => x < 200)],
    ['ingester RSS < 300 MB under the end-to-end run', `${f(e.ingesterRssMb)} MB`, check(e.ingesterRssMb, (x) => x < 300)],
  ]
    .map(([target, measured, ok]) => `| ${target} | ${measured} | ${met(ok as boolean | undefined)} |`)
    .join('\n');
  return `# Benchmarks

Measured by \`npm run bench${flags(data)}\` on ${data.date.slice(0, 10)}${
    Array.isArray(data.sections) ? ' (a partial run: the other sections keep the figures of the run before)' : ''
  }; every figure is the
median of ${data.runs} runs with min–max in brackets; ratios are against baselines measured in the same run.
Absolute figures on this shared machine move by 20–40 % between runs; the ratios are what to compare.

Machine: ${data.machine.cores} cores (${data.machine.cpu}), ${data.machine.memoryGiB} GiB, Node ${data.machine.node},
Kafka ${data.machine.kafka} (KRaft, single node), ClickHouse ${data.machine.clickhouse}; Kafka, Apicurio, Redis,
ClickHouse and the load generator all share the machine with the service under test.

| figure | measured | baseline | ratio | target |
| --- | --- | --- | --- | --- |
| gateway accepted records/s (1 process, mean body ${f(g.meanBodyBytes)} B) | ${range(g.single)} | bare Fastify+TLS ${range(g.baseline)} | ${f(g.ratio, 2)} | ≥ 0.6 |
| gateway accepted records/s, one process per core | ${range(g.perCore)} | | ${f(g.perCoreRecordsPerSec / g.baselinePerSec, 2)} | |
| non-202 answers at maximum load | ${f(g.non2xxAtMax)} | | | 0 |
| gateway latency at 50 % of max: p50 / p99 / p99.9 | ${f(g.p50Ms)} / ${range(g.p99At50)} / ${f(g.p999Ms)} ms | bare Fastify+TLS at the same rate: p99 ${range(g.baselineP99At50)} ms | | p99 < 20 ms |
| gateway p99 at 80 % of max | ${range(g.p99At80)} ms | | | |
| batch endpoint accepted records/s into Kafka (SDK, ${f(b.flushAt)} per gzip batch, ${f(b.requestsInFlight)} in flight, ingester stopped) | ${range(b.batch)} | bare Fastify+TLS taking the same batches ${range(b.baseline)} | ${f(b.ratio, 2)} | ≥ 20,000/s |
| … p50 / p99 per batch; gateway CPU per record; gateway peak RSS | ${f(b.p50Ms)} / ${range(b.p99)} ms; ${f(b.gatewayCpuUsPerRecord)} µs; ${f(b.gatewayRssMb)} MB | | | RSS < 200 MB |
| batch endpoint, one gateway process per core (cluster), same generator | ${range(b.perCore)} | | ${f(b.perCoreRecordsPerS / b.baselineRecordsPerS, 2)} | ≥ 20,000/s |
| single endpoint, same gateway, same run (autocannon); gateway CPU per record | ${range(b.single)}; ${f(b.singleGatewayCpuUsPerRecord)} µs | | ${f(b.recordsPerS / b.singleRecordsPerS, 1)}× batch/single | |
| produce path records/s (gateway batcher, no HTTP) | ${range(p.batcher)} | kafkajs sendBatch ×1000 ${range(p.baseline)} | ${f(p.ratio, 2)} | ≥ 0.5 |
| ingester rows/s into ClickHouse (${f(i.records)} records) | ${range(i.ingester)} | bare consumer + JSON.parse ${range(i.baseline)} | ${f(i.ratio, 2)} | |
| ingester rows/s against ClickHouse's own insert rate (same rows, JSONEachRow, ${f(c.batchRows)}-row batches, both tables) | ${range(i.ingester)}; ${f(i.cpuUsPerRecord)} µs CPU per record | ClickHouse ceiling ${range(c.ceiling)} | ${f(i.ratioToClickhouse, 2)} | ≥ 0.5 |
| ingester rows/s / gateway maximum records/s (keeps up when ≥ 1) | ${f(i.rowsPerSec / g.recordsPerSec, 2)} | | | ≥ 1 |
| freshness at 2,000/s: p50 / p99 (achieved ${f(fr.achievedPerSecAt2000)}/s) | ${f(fr.p50MsAt2000)} / ${range(fr.p99At2000)} ms | | | |
| freshness at 5,000/s: p50 / p99 (achieved ${f(fr.achievedPerSecAt5000)}/s) | ${f(fr.p50MsAt5000)} / ${range(fr.p99At5000)} ms | | | p99 < 1 s |
| ingester load unit at 5,000/s: p50 (of which ClickHouse) / p99, rows per unit p50 | ${f(fr.unitMsP50At5000)} (${f(fr.unitClickhouseMsP50At5000)}) / ${f(fr.unitMsP99At5000)} ms, ${f(fr.unitRowsP50At5000)} rows | | | |
| revocation, 2 instances: p50 / p99 / max (${f(r.samples)} samples) | ${f(r.p50Ms, 1)} / ${f(r.p99Ms, 1)} / ${f(r.maxMs, 1)} ms | | | p99 < 100 ms, max < 500 ms |
| peak RSS: gateway / ingester | ${range(m.gatewayRss)} / ${range(m.ingesterRss)} MB | | | < 200 / < 300 MB |
| scale-out, 6 partitions: 1 / 2 ingesters, rows/s (${f(so.records)} records, one run each) | ${f(so.p6Ingesters1RowsPerS)} / ${f(so.p6Ingesters2RowsPerS)} | | ${f(so.twoVsOneAt6, 2)} two vs one | |
| scale-out, 12 partitions: 1 / 2 ingesters, rows/s | ${f(so.p12Ingesters1RowsPerS)} / ${f(so.p12Ingesters2RowsPerS)} | | ${f(so.twoVsOneAt12, 2)} two vs one | |
| end to end sustained (batch endpoint, SDK, all co-located; ${f(e.stepSeconds)} s per step) | ${f(e.sustainedPerS)} records/s | | | ≥ 10,000/s |
| … CPU per record: gateway / ingester; peak RSS: gateway / ingester | ${f(e.gatewayCpuUsPerRecord)} / ${f(e.ingesterCpuUsPerRecord)} µs; ${f(e.gatewayRssMb)} / ${f(e.ingesterRssMb)} MB | | | < 200 / < 300 MB |

End to end, step by step (a step passes when at least 95 % of the offered rate is
achieved with nothing failed or dropped, the consumer lag stays within 5 s of records
over the step's second half, the topic drains after it, and ClickHouse holds and
counts every accepted record exactly once):

| offered/s | achieved/s | accepted | lost | counted twice | max lag / in the second half | drained in | result |
| --- | --- | --- | --- | --- | --- | --- | --- |
${ladder || '| not measured | | | | | | | |'}

Targets (issue "Pipeline throughput" and the batch-ingest issue), as measured by this run:

| target | measured | |
| --- | --- | --- |
${targets}

Raw figures: \`bench/results/latest.json\`.
${analysis()}`;
}

/** The command line a run was made with, as it appears in BENCHMARKS.md. */
function flags(data: typeof output): string {
  const list = [data.mode === 'quick' ? '--quick' : '', Array.isArray(data.sections) ? `--only ${data.sections.join(',')}` : ''].filter(
    Boolean,
  );
  return list.length > 0 ? ` -- ${list.join(' ')}` : '';
}

/** The hand-written reading of the figures (bench/analysis.md), kept across runs. */
function analysis(): string {
  const file = path.join(root, 'bench/analysis.md');
  return fs.existsSync(file) ? `\n${fs.readFileSync(file, 'utf8')}` : '';
}
