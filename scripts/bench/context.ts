// The bench run's shared state and helpers: the options, the stack's addresses, the
// load generators, service starters, the sample bodies, the key and the results that
// each section (scripts/bench/sections/) fills in. Imported once by scripts/bench.ts.
import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { buildSync } from 'esbuild';
import { quote as quoteShellWords } from 'shell-quote';
import { buildQueuedRecordSchema, type QueuedUsageRecord } from '@otm/schemas';
import { COMPRESSION_TYPES, createDurableProducer, createKafka, deleteTopicsWhere, ensureTopic } from '@otm/shared/kafka';
import { createRegistry, encodeWire, registerJsonSchema } from '@otm/shared/registry';
import { createRedis } from '@otm/shared/redis';
import type { Redis as RedisNode } from 'ioredis';
import { deleteBenchKeys, leftOverByEarlierRun } from './redis-sweep.js';
import { KAFKA_BYTES_BY_SECTION, diskNeed, diskShortfall, freeBytesUnder } from './disk-need.js';
import { createClickHouse } from '@otm/shared/clickhouse';
import { KeyStore } from '@otm/shared/keys/key-store';
import { loadStackConfig, stackAddresses } from '../stack/config.js';
import { ProcessService, stackServices, stackUp } from '../stack/services.js';
import { ClickHouseService } from '../stack/clickhouse.js';
import { ensureLocalCertificate } from '../local-tls.js';
import { dropStaleTestDatabases } from '../lib/stale-databases.js';
import { queuedRecords, sampleUsageRecords } from '../../test/fixtures/sample-records.js';
import { metricValue } from '../lib/histogram.js';
import { startProcess, startService, type ServiceProcess } from '../lib/service-process.js';
import { setTimeout as sleep } from 'node:timers/promises';

export const options = new Command('bench')
  .option('--quick', 'short runs (about 2 minutes with the stack up)')
  .option('--runs <n>', 'runs per figure (median, min, max)', '3')
  .option(
    '--profile',
    'CPU-profile the gateway (gateway section: single records; batch section) and the ingester (ingester section, first run) and write summaries to bench/profiles/',
  )
  .option(
    '--allocations',
    "sample where the same services allocate (V8's sampling heap profiler, freed objects counted) and write summaries to bench/profiles/ (<name>-allocations.md)",
  )
  .option(
    '--only <sections>',
    'comma-separated subset: gateway,batch,produce,ingester,scaleOut,freshness,endToEnd,revocation,redaction,hostile,codecs,analytics,kafkaClients (latest.json keeps the other figures)',
  )
  .parse(process.argv)
  .opts<{ quick?: boolean; runs: string; only?: string; profile?: boolean; allocations?: boolean }>();
export const only = options.only ? new Set(options.only.split(',')) : undefined;
export const section = (name: string) => !only || only.has(name);
// `npm run bench --quick` (without --) reaches us as npm_config_quick.
export const quick = Boolean(options.quick) || process.env.npm_config_quick === 'true';
export const runs = Math.max(3, Number(options.runs));
export const scale = quick
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

/** The analytics section's generated events. */
export const analyticsEvents = Number(process.env.BENCH_ANALYTICS_EVENTS ?? (quick ? 2_000_000 : 100_000_000));

export const stack = loadStackConfig(process.env);
export const addresses = stackAddresses(stack);
export const root = stack.root;
export const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
export const work = path.join(stack.dir, 'bench');
fs.mkdirSync(work, { recursive: true });
export const log = (line: string) => console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

export interface Figure {
  median: number;
  min: number;
  max: number;
  samples: number[];
}
export function figure(samples: number[]): Figure {
  const sorted = [...samples].sort((a, b) => a - b);
  return { median: sorted[Math.floor(sorted.length / 2)]!, min: sorted[0]!, max: sorted[sorted.length - 1]!, samples };
}
export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}
export { sleep };

export { peakRssMb, takePeakRssMb } from './peak-rss.js';

export interface MemorySample {
  rssMb: number;
  heapTotalMb: number;
  heapUsedMb: number;
  /** Memory of objects outside V8's heap: Buffers, ArrayBuffers, native handles. */
  externalMb: number;
  /** The ingester's records taken and not yet loaded, as fetched (NaN for another service). */
  pendingMb: number;
}

/**
 * A service's metrics as Prometheus text, from its own metrics endpoint (the port from
 * its start line's `metricsPort`): undefined when it cannot be read.
 */
async function metricsText(service: { logs: readonly string[] }): Promise<string | undefined> {
  const line = service.logs.find((text) => text.includes('"metricsPort":'));
  const port = line ? (JSON.parse(line) as { metricsPort?: number }).metricsPort : undefined;
  if (!port) return undefined;
  try {
    return await (await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(2000) })).text();
  } catch {
    return undefined;
  }
}

/** Where a service's memory is (prom-client's default metrics): undefined when it cannot be read. */
export async function memorySample(service: { logs: readonly string[] }): Promise<MemorySample | undefined> {
  const text = await metricsText(service);
  if (text === undefined) return undefined;
  const value = (name: string) => metricValue(text, name) / 1024 / 1024;
  return {
    rssMb: value('process_resident_memory_bytes'),
    heapTotalMb: value('nodejs_heap_size_total_bytes'),
    heapUsedMb: value('nodejs_heap_size_used_bytes'),
    externalMb: value('nodejs_external_memory_bytes'),
    pendingMb: value('otm_ingester_pending_bytes'),
  };
}

/** The ingester's load units so far, and the rows they inserted (its otm_ingester_batch_rows histogram): undefined when they cannot be read. */
export async function loadUnitTotals(ingester: { logs: readonly string[] }): Promise<{ units: number; rows: number } | undefined> {
  const text = await metricsText(ingester);
  if (text === undefined) return undefined;
  const units = metricValue(text, 'otm_ingester_batch_rows_count');
  const rows = metricValue(text, 'otm_ingester_batch_rows_sum');
  return Number.isFinite(units) && Number.isFinite(rows) ? { units, rows } : undefined;
}

/** The larger of each figure. */
export function maxMemory(a: MemorySample | undefined, b: MemorySample | undefined): MemorySample | undefined {
  if (!a || !b) return a ?? b;
  return {
    rssMb: Math.max(a.rssMb, b.rssMb),
    heapTotalMb: Math.max(a.heapTotalMb, b.heapTotalMb),
    heapUsedMb: Math.max(a.heapUsedMb, b.heapUsedMb),
    externalMb: Math.max(a.externalMb, b.externalMb),
    pendingMb: Math.max(a.pendingMb, b.pendingMb),
  };
}

/** CPU seconds (user + system) a process has used so far, from /proc. */
export function cpuSeconds(pid: number | undefined): number {
  if (!pid) return NaN;
  try {
    const fields = fs.readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // utime, stime in clock ticks (100 Hz)
  } catch {
    return NaN;
  }
}

/**
 * The machine's CPU seconds since boot, from /proc/stat: busy (user, nice, system,
 * interrupts, steal), in all, and of the busy time the steal: time a virtual machine's
 * CPUs wanted to run and the hypervisor ran something else (it comes in slices of
 * milliseconds, which show as latency no code of ours can remove).
 */
export function machineCpuSeconds(): { busy: number; total: number; steal: number } {
  try {
    const fields = fs.readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
    const [user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0] = fields;
    const busy = user + nice + system + irq + softirq + steal;
    return { busy: busy / 100, total: (busy + idle + iowait) / 100, steal: steal / 100 };
  } catch {
    return { busy: NaN, total: NaN, steal: NaN };
  }
}

/** The stack's own processes by service (Kafka, the registry, Redis, ClickHouse), for their CPU. */
export function stackPids(): Record<string, number | undefined> {
  return Object.fromEntries(
    stackServices(stack).map((service) => [service.name, service instanceof ProcessService ? service.pid() : undefined]),
  );
}

/** The stack's ClickHouse server process (its CPU is read from /proc), undefined when not known. */
export function clickhousePid(): number | undefined {
  return new ClickHouseService(stack).pid();
}

/**
 * Waits until ClickHouse has run no merge of `database` for `quietMs` (0: until none
 * runs), polling every `pollMs`, at most `timeoutMs`; the seconds waited.
 */
export async function waitForMerges(
  clickhouse: { query: ReturnType<typeof createClickHouse>['query'] },
  database: string,
  { quietMs, pollMs, timeoutMs }: { quietMs: number; pollMs: number; timeoutMs: number },
): Promise<number> {
  const started = Date.now();
  let quietSince = Date.now();
  while (Date.now() - started < timeoutMs) {
    const result = await clickhouse.query({
      query: `SELECT count() AS n FROM system.merges WHERE database = '${database}'`,
      format: 'JSONEachRow',
    });
    if (Number((await result.json<{ n: string }>())[0]?.n ?? 0) > 0) quietSince = Date.now();
    else if (Date.now() - quietSince >= quietMs) break;
    await sleep(pollMs);
  }
  return (Date.now() - started) / 1000;
}

/**
 * Rows of system.query_log: flushes the logs and reads them until `complete` holds, at
 * most 10 s. An HTTP query's entry is written after its answer reaches the client, so
 * one flush at once can come before the last entries.
 */
export async function queryLogRows<T>(
  clickhouse: { query: ReturnType<typeof createClickHouse>['query']; command: ReturnType<typeof createClickHouse>['command'] },
  query: string,
  complete: (rows: T[]) => boolean,
): Promise<T[]> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    await clickhouse.command({ query: 'SYSTEM FLUSH LOGS' });
    const rows = await (await clickhouse.query({ query, format: 'JSONEachRow' })).json<T>();
    if (complete(rows) || Date.now() > deadline) return rows;
    await sleep(200);
  }
}

/**
 * A query_log entry's profile event as SQL: 18.16 keeps them in two arrays
 * (`ProfileEvents.Names`, `ProfileEvents.Values`), current releases in a map.
 */
export async function profileEventSql(clickhouse: {
  query: ReturnType<typeof createClickHouse>['query'];
}): Promise<(name: string) => string> {
  const [nested] = await (
    await clickhouse.query({
      query: `SELECT count() AS n FROM system.columns WHERE database = 'system' AND table = 'query_log' AND name = 'ProfileEvents.Names'`,
      format: 'JSONEachRow',
    })
  ).json<{ n: string }>();
  return Number(nested?.n ?? 0) > 0
    ? (name) => `ProfileEvents.Values[indexOf(ProfileEvents.Names, '${name}')]`
    : (name) => `ProfileEvents['${name}']`;
}

export interface LoadResult {
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
export const generators = Object.fromEntries(
  ['load', 'rate-load', 'sdk-load'].map((name) => {
    const outfile = path.join(work, `${name}.mjs`);
    buildSync({
      entryPoints: [path.join(root, `scripts/bench/${name}.ts`)],
      outfile,
      bundle: true,
      // Third-party packages load from node_modules; the project's workspaces (the
      // client SDK) are bundled from their sources, so the figures are those of the code
      // checked out, not of a dist/ built earlier.
      external: ['autocannon', 'undici'],
      conditions: ['otm-source'],
      platform: 'node',
      format: 'esm',
      target: 'node20',
      logLevel: 'warning',
    });
    return [name, outfile];
  }),
);

export interface SdkLoadResult {
  accepted: number;
  perSec: number;
  failed: number;
  dropped: number;
  retries: number;
  batches: number;
  p50Ms: number;
  p99Ms: number;
  /** Records sent over the whole run, warm-up included. */
  sentTotal: number;
  /** The generator's own CPU per record accepted over the measured part. */
  cpuUsPerRecord: number;
}

/** Closed-loop maximum (autocannon), or with `rate` an open-loop fixed rate (rate-load.ts). */
export function runLoad(spec: Record<string, unknown>): Promise<LoadResult> {
  return runGenerator(spec.rate ? generators['rate-load']! : generators.load!, spec);
}

/** Batches through the client SDK as fast as the endpoint accepts them (sdk-load.ts). */
export function runSdkLoad(spec: Record<string, unknown>): Promise<SdkLoadResult> {
  return runGenerator(generators['sdk-load']!, spec);
}

/**
 * The SDK load generator, stopped when `signal` aborts (before its duration is up): the
 * caller measures what it needs elsewhere; resolves once the generator has ended.
 */
export function runSdkLoadUntil(spec: Record<string, unknown>, signal: AbortSignal): Promise<void> {
  return runGenerator<unknown>(generators['sdk-load']!, spec, signal).then(() => undefined);
}

export function runGenerator<T>(script: string, spec: Record<string, unknown>, signal?: AbortSignal): Promise<T> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, JSON.stringify(spec)], {
      // The local certificate is self-signed; the load stays on loopback.
      env: { ...process.env, NODE_TLS_REJECT_UNAUTHORIZED: '0', NODE_NO_WARNINGS: '1' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    const stop = () => child.kill('SIGTERM');
    signal?.addEventListener('abort', stop, { once: true });
    let out = '';
    child.stdout.on('data', (chunk) => (out += chunk));
    child.on('exit', (code) => {
      signal?.removeEventListener('abort', stop);
      if (signal?.aborted) return resolve(undefined as T);
      const line = out.trim().split('\n').pop() ?? '';
      if (code !== 0) return reject(new Error(`load generator exited ${code}: ${out}`));
      resolve(JSON.parse(line) as T);
    });
  });
}

export const tls = await ensureLocalCertificate(path.join(stack.dir, 'tls'));
export const serviceEnv = (extra: Record<string, string | number>): NodeJS.ProcessEnv => {
  // Dedupe keys of a bench run need not outlive it (200,000 per ingester run add up in Redis).
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, ...addresses, DEDUPE_TTL_SECONDS: '600' };
  // Tuning variables given to the bench reach the services under test (glibc's MALLOC_ARENA_MAX among them, and
  // LD_PRELOAD: another allocator, e.g. jemalloc).
  for (const [name, value] of Object.entries(process.env))
    if (/^(INGEST|PRODUCE|KEY_CACHE|DEDUPE|IDEMPOTENCY|MALLOC)_|^KAFKA_(COMPRESSION|PRODUCER_CLIENT)$|^LD_PRELOAD$/.test(name))
      env[name] = value;
  for (const [name, value] of Object.entries(extra)) env[name] = String(value);
  return env;
};
/** A gateway on `port` for `topic`, with keys under `prefix`, TLS with the local certificate. */
export const gatewayServiceEnv = (topic: string, prefix: string, port: number): NodeJS.ProcessEnv =>
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
export function startBaseline(port: number): Promise<ServiceProcess> {
  return startProcess(
    'baseline',
    [path.join(root, 'scripts/bench/baseline-server.ts'), String(port), tls.certFile, tls.keyFile],
    process.env,
    /baseline listening/,
  );
}

// The ready lines are logged at info; debug adds the ingester's "unit loaded" timings.
export async function startQuiet(
  entry: 'gateway' | 'ingester' | 'gateway-cluster',
  env: NodeJS.ProcessEnv,
  ready: RegExp,
  level: 'info' | 'debug' = 'info',
  profileDir?: string,
): Promise<ServiceProcess> {
  return startService(entry, { ...env, LOG_LEVEL: level, ...profileFlags(profileDir) }, ready, 90_000, { built: true });
}

/** Fills `topic` with `count` queued records in the gateway's wire format, keyed by `keyOf`, in chunks of 10,000. */
let wireSchemaId: Promise<number> | undefined;
/**
 * `count` sample records as the gateway produces them: keyed by their event key, the
 * value in the schema registry's wire format.
 */
export async function wireMessages(
  count: number,
  options: { seed: number; startMs?: number },
  keyOf: (index: number) => string,
): Promise<{ key: string; value: Buffer }[]> {
  const schemaId = await (wireSchemaId ??= registerJsonSchema(
    createRegistry(addresses.SCHEMA_REGISTRY_URL),
    'telemetry.usage.v1-value',
    buildQueuedRecordSchema(),
  ));
  // Received now (an error record's event time), beside successes of the hour before.
  const records: QueuedUsageRecord[] = queuedRecords(sampleUsageRecords(count, options), { eventKey: keyOf, receivedAtMs: Date.now() });
  return records.map((record) => ({ key: record.meta.eventKey, value: encodeWire(schemaId, JSON.stringify(record)) }));
}

/** The codec of the pre-filled topics' record batches: the gateway's default. */
export const PREFILL_CODEC = 'snappy';

/**
 * Fills `topic` with `count` records as the gateway produces them: in snappy record
 * batches (its default codec), so the ingester and the bare consumer read what they read
 * in production, decompression included.
 */
export async function prefillTopic(topic: string, partitions: number, count: number, keyOf: (index: number) => string): Promise<void> {
  await ensureTopic(kafka, topic, partitions);
  const producer = createDurableProducer(kafka, { retries: 5, maxRetryTimeMs: 30_000 });
  await producer.connect();
  const chunk = 10_000;
  for (let start = 0; start < count; start += chunk) {
    const encoded = await wireMessages(Math.min(chunk, count - start), { seed: start + 1, startMs: Date.now() - 3600_000 }, (i) =>
      keyOf(start + i),
    );
    for (let offset = 0; offset < encoded.length; offset += 1000) {
      await producer.send({
        topic,
        acks: -1,
        compression: COMPRESSION_TYPES[PREFILL_CODEC],
        messages: encoded.slice(offset, offset + 1000),
      });
    }
  }
  await producer.disconnect();
}

/** Waits until usage_events holds `count` rows (the database appears with the ingester's migration); throws after 10 minutes. */
export async function waitForRows(clickhouse: ReturnType<typeof createClickHouse>, count: number, what: string): Promise<void> {
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
export async function startPipeline(spec: {
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

/**
 * The environment that profiles a service into `dir`: with --profile its CPU (node's
 * --cpu-prof), with --allocations where it allocates (scripts/allocation-sampler.mjs,
 * preloaded; it writes its profile at the process's exit).
 */
export function profileFlags(dir: string | undefined): NodeJS.ProcessEnv {
  if (!dir) return {};
  const flags = [
    ...(options.profile ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : []),
    ...(options.allocations ? ['--import', path.join(root, 'scripts/allocation-sampler.mjs')] : []),
  ];
  return { SERVICE_NODE_FLAGS: quoteShellWords(flags), ...(options.allocations ? { OTM_ALLOCATION_PROFILE_DIR: dir } : {}) };
}

/** With --profile or --allocations: a fresh folder for one service's profiles, summarised into bench/profiles/ at the end. */
export const profiles: { dir: string; name: string; title: string; records: () => number }[] = [];
export function profileDir(name: string, title: string, records: () => number): string | undefined {
  if (!options.profile && !options.allocations) return undefined;
  const dir = path.join(work, 'profiles', `${name}-${runId}`);
  fs.mkdirSync(dir, { recursive: true });
  profiles.push({ dir, name, title, records });
  return dir;
}

/** The ingester's load units as its debug log reports them: whole unit, and the ClickHouse part. */
export function unitTimings(logs: readonly string[]): { unitMs: number[]; clickhouseMs: number[]; rows: number[] } {
  const units = logs
    .filter((line) => line.includes('"unit loaded"'))
    .map((line) => JSON.parse(line) as { rows: number; ms: { dedupe: number; load: number; mark: number } });
  return {
    unitMs: units.map((unit) => unit.ms.dedupe + unit.ms.load + unit.ms.mark),
    clickhouseMs: units.map((unit) => unit.ms.load),
    rows: units.map((unit) => unit.rows),
  };
}

/** Test databases made longer ago than this (two hours) are an earlier test run's leftovers. */
const STALE_TEST_DATABASE_MS = 2 * 60 * 60 * 1000;

// A run short of disk would fail where it fills it, an hour in, and write no report.
const shortfall = diskShortfall(
  diskNeed(Object.keys(KAFKA_BYTES_BY_SECTION).filter(section), { analyticsEvents, runs, quick }),
  freeBytesUnder(stack.dir),
  stack.clickhouseVolumeGiB,
);
if (shortfall) {
  log(`not started: ${shortfall}`);
  process.exit(1);
}
log(`starting the local stack (${quick ? 'quick' : 'full'} run, ${runs} runs per figure)`);
await stackUp(stack);
// ClickHouse's CPU is read from its process, and a server holding the tables of earlier
// test runs spends some of it on them whatever is inserted: those are dropped first (made
// more than STALE_TEST_DATABASE_MS ago, so never a test run still going).
const swept = await dropStaleTestDatabases(addresses.CLICKHOUSE_URL, Date.now(), STALE_TEST_DATABASE_MS);
if (swept.length > 0) log(`dropped ${swept.length} test databases earlier test runs left`);
// The gateway and the ingester are measured as production runs them: built (startQuiet).
log('building the services (npm run build)');
execFileSync('npm', ['run', '--silent', 'build'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });

// Realistic bodies: success records with prompts of 0.5-4 KB and error records, from a seed.
// Their calls started in the 17 minutes before the run, as a producer sends records
// (an error record's event time is its receipt): one month's partition per insert, as
// production writes, where records of another month would double the parts an insert
// writes into every table.
export const bodies = sampleUsageRecords(1000, { seed: 2026, startMs: Date.now() - 1_000_000 }).map((record) => JSON.stringify(record));
export const bodiesFile = path.join(work, 'bodies.json');
fs.writeFileSync(bodiesFile, JSON.stringify(bodies));
export const meanBodyBytes = Math.round(bodies.reduce((sum, body) => sum + body.length, 0) / bodies.length);

export const redis = createRedis(addresses.REDIS_URL);
await redis.connect();
export const keyPrefix = `bench-${runId}:`;
// The local stack's Redis is one server (redis-sweep.ts says why the keys are deleted).
const sweptKeys = await deleteBenchKeys(redis as RedisNode, (key) => leftOverByEarlierRun(key, runId, Date.now(), STALE_TEST_DATABASE_MS));
if (sweptKeys > 0) log(`deleted ${sweptKeys} Redis keys earlier bench runs left`);

/** Deletes this run's Redis keys when a section ends, but the key store's, which the whole run uses (or those too: `everything`). */
export async function deleteRunRedisKeys(everything = false): Promise<void> {
  const deleted = await deleteBenchKeys(redis as RedisNode, (key) => key.includes(runId) && (everything || !key.startsWith(keyPrefix)));
  if (deleted > 0) log(`deleted ${deleted} Redis keys of this run`);
}
export const keyStore = new KeyStore(redis, keyPrefix);
export const benchKey = await keyStore.create({ environment: 'prod', name: 'bench' });
export const kafka = createKafka({ brokers: addresses.KAFKA_BROKERS.split(','), clientId: 'bench' });

// A partial run (--only) keeps the other figures of the last run.
export const latestFile = path.join(root, 'bench/results/latest.json');
export const previous = only && fs.existsSync(latestFile) ? (JSON.parse(fs.readFileSync(latestFile, 'utf8')) as Record<string, any>) : {};
export const results: Record<string, Record<string, number | string | Figure | Record<string, unknown>[]>> = Object.fromEntries(
  [
    'gateway',
    'batch',
    'produce',
    'clickhouseCeiling',
    'clickhouseCeilingJson',
    'ingester',
    'lookup',
    'scaleOut',
    'freshness',
    'endToEnd',
    'revocation',
    'redaction',
    'memory',
    'hostile',
    'codecs',
    'analytics',
    'kafkaClients',
  ]
    .filter((key) => previous[key])
    .map((key) => [key, previous[key]]),
);

/**
 * Deletes the Kafka topics this run made (every one is named `bench.…` with the run id in
 * it, dead-letter topics included): a full run writes gigabytes into them, which the
 * broker would otherwise keep for its retention (a week), run after run.
 */
export async function deleteRunTopics(): Promise<void> {
  const admin = kafka.admin();
  await admin.connect();
  try {
    const topics = await deleteTopicsWhere(admin, (topic) => topic.startsWith('bench.') && topic.includes(runId));
    log(`deleted this run's ${topics.length} Kafka topics`);
  } finally {
    await admin.disconnect();
  }
}
