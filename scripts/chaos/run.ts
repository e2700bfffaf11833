// The chaos suite's run: a gateway (two workers) and an ingester on a stack, traffic
// at a fixed rate, and one scenario at a time: warm-up, the fault for the hold, the
// fault cleared, traffic on for a while, traffic stopped, the topic drained. Then it
// counts: every acknowledged key must be in ClickHouse once, and the analytics (the
// rollups) must count it once. A scenario fails on any record missing, counted
// twice, stored without ever being sent, or dead-lettered.
import fs from 'node:fs';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { consumerLag, createKafka, deleteTopicsWhere, setTopicSettings, type Admin } from '@otm/shared/kafka';
import { createClickHouse, type ClickHouseClient } from '@otm/shared/clickhouse';
import { sqlString } from '@otm/shared/clickhouse-values';
import { rollupTotals } from '@otm/shared/rollups/repair';
import { createRedis, type Redis } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { loadStackConfig, stackAddresses, type StackConfig } from '../stack/config.js';
import { kafkaServices, stackServices, stackUp } from '../stack/services.js';
import { ensureLocalCertificate } from '../local-tls.js';
import { startService, type ServiceProcess } from '../lib/service-process.js';
import { FaultProxy } from './fault-proxy.js';
import { Traffic, type TrafficCounts } from './traffic.js';
import { LAG_WINDOW_SECONDS, scenarios, type Harness, type Scenario } from './scenarios.js';
import { setTimeout as sleep } from 'node:timers/promises';

export interface ChaosOptions {
  /** Records offered per second. */
  rate: number;
  scenarios: readonly string[];
  warmSeconds: number;
  holdSeconds: number;
  afterSeconds: number;
  /** How long the topic may take to drain after the traffic stops before the scenario fails. */
  drainTimeoutSeconds: number;
  /** The suite's own stack (every scenario), or the addresses of a running one (scenarios that kill nothing of it). */
  stack: { kafkaBrokers: 1 | 3; keep: boolean } | { addresses: StackAddresses };
  /**
   * Tests only: a deliberately broken ingester (INGEST_FAULT_INJECTION) the suite must
   * fail: one that commits offsets before the insert (records lost), or one that loads
   * every record as new (a redelivered record counted twice).
   */
  brokenBuild?: BrokenBuild;
  log?: (line: string) => void;
}

export type BrokenBuild = 'commit-before-load' | 'skip-dedupe';

export interface StackAddresses {
  KAFKA_BROKERS: string;
  SCHEMA_REGISTRY_URL: string;
  REDIS_URL: string;
  CLICKHOUSE_URL: string;
}

export interface ScenarioResult {
  scenario: string;
  title: string;
  offeredPerS: number;
  /** Acknowledged records per second of traffic. */
  achievedPerS: number;
  offered: number;
  acknowledged: number;
  attempted: number;
  replays: number;
  /** Distinct event keys of this scenario in usage_events. */
  stored: number;
  /** Acknowledged and not stored: must be 0. */
  missing: number;
  /** Rows the rollups count beyond the distinct stored ones: must be 0. */
  doubleCounted: number;
  /** Load units whose rollups the ingester recounted after an insert that ended without an answer. */
  rollupRecounts?: number;
  /** Rollups (and usage_events_by_user) whose count moved by other than the records stored: table to difference. */
  rollupsOff?: Record<string, number>;
  /** Stored although never sent: must be 0. */
  unexpected: number;
  /** Messages dead-lettered during the scenario (every record sent is valid): must be 0. */
  deadLetters: number;
  refusals: Record<string, number>;
  longestRefusalSeconds: number;
  /** The longest all-refusals stretch the scenario allows here (s), when it bounds it. */
  refusalBoundSeconds?: number;
  slowestAnswerSeconds: number;
  maxLag: number;
  /** The mean lag over the hold's last LAG_WINDOW_SECONDS less that over its first (messages); absent for a hold shorter than both. */
  lagGrowth?: number;
  /** What the scenario allows it to be (maxLagGrowthSeconds of offered traffic). */
  lagGrowthBound?: number;
  /** Fault cleared until the lag is under two seconds of offered traffic and stays there; null if it never was. */
  recoverySeconds: number | null;
  /** Traffic stopped until the lag is 0 and every acknowledged record stored (or it was clear some never would be). */
  drainSeconds: number;
  /** The consumer lag reached 0 after the traffic stopped. */
  drained: boolean;
  ingesterRestarts: number;
  passed: boolean;
  failure?: string;
}

export interface ChaosReport {
  startedAt: string;
  finishedAt: string;
  kafkaBrokers: number;
  rate: number;
  warmSeconds: number;
  holdSeconds: number;
  afterSeconds: number;
  /** The deliberately broken ingester run, if any. */
  brokenBuild: BrokenBuild | null;
  scenarios: ScenarioResult[];
  passed: boolean;
}

/** The suite's own stack: its own folder and ports, so a fault never touches the stack `npm start` uses. */
export function chaosStackConfig(kafkaBrokers: 1 | 3): StackConfig {
  return loadStackConfig({
    OTM_STACK_DIR: '.stack/chaos',
    OTM_STACK_KAFKA_BROKERS: String(kafkaBrokers),
    // The two Kafka profiles on ports of their own (either may still run from a --keep-stack run).
    OTM_STACK_KAFKA_PORT: kafkaBrokers === 1 ? '27092' : '27192',
    OTM_STACK_KAFKA_CONTROLLER_PORT: kafkaBrokers === 1 ? '27093' : '27193',
    OTM_STACK_KAFKA_HEAP_MB: '384',
    OTM_STACK_REGISTRY_PORT: '27081',
    OTM_STACK_REDIS_PORT: '27379',
    OTM_STACK_CLICKHOUSE_HTTP_PORT: '27123',
    OTM_STACK_CLICKHOUSE_TCP_PORT: '27900',
  });
}

export async function runChaos(options: ChaosOptions): Promise<ChaosReport> {
  const log = options.log ?? ((line: string) => console.log(`[chaos ${new Date().toISOString().slice(11, 19)}] ${line}`));
  const chosen = options.scenarios.map((name) => {
    const found = scenarios.find((scenario) => scenario.name === name);
    if (!found) throw new Error(`unknown scenario ${name}; known: ${scenarios.map((scenario) => scenario.name).join(', ')}`);
    return found;
  });
  const startedAt = new Date().toISOString();
  const cleanups: (() => Promise<unknown>)[] = [];
  let stackConfig: StackConfig | undefined;
  let addresses: StackAddresses;
  let services: Harness['services'];
  if ('addresses' in options.stack) {
    addresses = options.stack.addresses;
    const needing = chosen.filter((scenario) => scenario.privateStackOnly).map((scenario) => scenario.name);
    if (needing.length > 0) throw new Error(`${needing.join(', ')} need the chaos suite's own stack`);
  } else {
    stackConfig = chaosStackConfig(options.stack.kafkaBrokers);
    log(`starting the chaos stack (${stackConfig.kafkaBrokers} Kafka broker${stackConfig.kafkaBrokers === 1 ? '' : 's'}) ...`);
    await stackUp(stackConfig);
    addresses = stackAddresses(stackConfig);
    services = new Map(
      stackServices(stackConfig).map((service) => [
        service.name,
        {
          signal: (signal: NodeJS.Signals) => service.signal(signal),
          start: async () => {
            await service.start();
            await service.waitHealthy(service.startTimeoutMs);
          },
        },
      ]),
    );
    if (!options.stack.keep) {
      const config = stackConfig;
      cleanups.push(async () => {
        for (const service of [...stackServices(config)].reverse()) await service.down();
      });
    }
  }

  const kafkaBrokers = stackConfig?.kafkaBrokers ?? addresses.KAFKA_BROKERS.split(',').length;
  const runId = `${Date.now().toString(36)}${randomBytes(2).toString('hex')}`;
  const names = {
    topic: `chaos.${runId}`,
    dlq: `chaos.${runId}.dlq`,
    database: `chaos_${runId}`,
    prefix: `chaos-${runId}:`,
    group: `chaos-${runId}`,
  };
  const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
  const tls = await ensureLocalCertificate(path.join(root, '.stack', 'tls'));
  const clickhouseUrl = new URL(addresses.CLICKHOUSE_URL);
  const proxy = new FaultProxy({ host: clickhouseUrl.hostname, port: Number(clickhouseUrl.port) });
  const proxyAddress = await proxy.listen();
  cleanups.push(() => proxy.close());

  const baseEnv: NodeJS.ProcessEnv = {
    PATH: process.env.PATH,
    HOME: process.env.HOME,
    ...addresses,
    CLICKHOUSE_DATABASE: names.database,
    USAGE_TOPIC: names.topic,
    USAGE_TOPIC_PARTITIONS: '6',
    DLQ_TOPIC: names.dlq,
    REDIS_KEY_PREFIX: names.prefix,
    LOG_LEVEL: 'warn',
  };
  const kafka = createKafka({ brokers: addresses.KAFKA_BROKERS.split(','), clientId: 'otm-chaos' });
  const admin: Admin = kafka.admin();
  await admin.connect();
  cleanups.push(() => admin.disconnect());
  // The scenario's topics go with it, as its database does: a run writes hundreds of megabytes into them.
  cleanups.push(() => deleteTopicsWhere(admin, (topic) => topic === names.topic || topic === names.dlq));
  const redis: Redis = createRedis(addresses.REDIS_URL, { name: 'chaos' });
  redis.on('error', () => undefined); // down in the Redis scenarios, on purpose
  await redis.connect();
  cleanups.push(async () => redis.disconnect());
  const clickhouseSettings = { url: addresses.CLICKHOUSE_URL, database: names.database, username: 'default', password: '' };
  const clickhouse: ClickHouseClient = createClickHouse(clickhouseSettings);
  cleanups.push(() => clickhouse.close());
  cleanups.push(async () => {
    const server = createClickHouse(clickhouseSettings, { database: null });
    try {
      await server.command({ query: `DROP DATABASE IF EXISTS ${names.database}` });
    } finally {
      await server.close();
    }
  });

  // The ingester, supervised as `npm start` does: restarted 1 s after an exit the suite did not cause.
  let ingester: ServiceProcess | undefined;
  const ingesters: ServiceProcess[] = [];
  /** Units whose rollups an ingester recounted after an unanswered insert (their log lines, every ingester so far). */
  const recounts = () => ingesters.reduce((sum, one) => sum + one.logs.filter((line) => line.includes('rollups recounted')).length, 0);
  let ingesterRestarts = 0;
  let ingesterWanted = true;
  const startIngester = async (): Promise<void> => {
    ingesterWanted = true;
    const started = await startService(
      'ingester',
      {
        ...baseEnv,
        CLICKHOUSE_URL: `http://${proxyAddress}`,
        INGEST_GROUP_ID: names.group,
        METRICS_PORT: '0',
        INGEST_RETRY_MAX_MS: '2000',
        DEDUPE_TTL_SECONDS: '3600',
        LOG_LEVEL: 'info',
        ...(options.brokenBuild ? { INGEST_FAULT_INJECTION: options.brokenBuild } : {}),
      },
      /ingester consuming/,
      180_000,
    );
    ingester = started;
    ingesters.push(started);
    started.child.once('exit', (code, signal) => {
      if (!ingesterWanted || ingester !== started) return;
      log(`ingester exited (${signal ?? code}) on its own; restarting in 1 s; its last log lines:\n${started.logs.slice(-30).join('\n')}`);
      ingesterRestarts++;
      setTimeout(() => void startIngester().catch((error: Error) => log(`ingester restart failed: ${error.message}`)), 1000);
    });
  };
  const killIngester = async (): Promise<void> => {
    ingesterWanted = false;
    await ingester?.kill();
  };
  cleanups.push(async () => {
    ingesterWanted = false;
    await ingester?.stop();
  });

  log(`topic ${names.topic}, database ${names.database}; ClickHouse behind the fault proxy at ${proxyAddress}`);
  await startIngester();
  const gatewayPort = 18490;
  const gateway = await startService(
    'gateway-cluster',
    {
      ...baseEnv,
      GATEWAY_WORKERS: '2',
      GATEWAY_PORT: String(gatewayPort),
      METRICS_PORT: '0',
      TLS_CERT_FILE: tls.certFile,
      TLS_KEY_FILE: tls.keyFile,
      RATE_LIMIT_PER_SECOND: '0',
      LOG_LEVEL: 'info',
    },
    /gateway listening/,
    120_000,
  );
  cleanups.push(() => gateway.stop());

  const harness: Harness = {
    proxy,
    services,
    killIngester,
    startIngester,
    async killGatewayWorker() {
      const pid = gateway.child.pid!;
      const workers = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
      if (workers.length === 0) throw new Error('the gateway has no workers');
      process.kill(workers[0]!, 'SIGKILL');
    },
    async leaderBroker() {
      if (!stackConfig || stackConfig.kafkaBrokers === 1) return 'kafka';
      const { topics } = await admin.fetchTopicMetadata({ topics: [names.topic] });
      const leader = topics[0]?.partitions.find((partition) => partition.partitionId === 0)?.leader ?? 1;
      return kafkaServices(stackConfig)[leader - 1]?.name ?? 'kafka-1';
    },
    redisCommand: (...args: string[]) => redis.call(args[0]!, ...args.slice(1)),
    async setTopicConfig(name, value) {
      await setTopicSettings(kafka, names.topic, { [name]: value });
      log(`topic ${names.topic}: ${name}=${value}`);
    },
    log,
  };

  // The consumer lag, sampled every 500 ms (a sample is skipped while Kafka does not answer).
  let lag = 0;
  let lagKnown = false;
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      try {
        lag = (await consumerLag(admin, names.group, names.topic)).reduce((sum, partition) => sum + partition.lag, 0);
        lagKnown = true;
      } catch {
        lagKnown = false;
      }
      await sleep(500);
    }
  })();
  cleanups.push(async () => {
    sampling = false;
    await sampler;
  });

  const store = new KeyStore(redis, names.prefix);
  const ca = fs.readFileSync(tls.certFile, 'utf8');
  const results: ScenarioResult[] = [];
  try {
    for (const scenario of chosen) {
      results.push(await runScenario(scenario));
    }
  } finally {
    // Every cleanup runs; one that fails is said (a database or topic left behind), not hidden.
    for (const cleanup of cleanups.reverse()) await cleanup().catch((error: Error) => log(`cleanup failed: ${error.message}`));
  }
  const report: ChaosReport = {
    startedAt,
    finishedAt: new Date().toISOString(),
    kafkaBrokers,
    rate: options.rate,
    warmSeconds: options.warmSeconds,
    holdSeconds: options.holdSeconds,
    afterSeconds: options.afterSeconds,
    brokenBuild: options.brokenBuild ?? null,
    scenarios: results,
    passed: results.length > 0 && results.every((result) => result.passed),
  };
  return report;

  async function runScenario(scenario: Scenario): Promise<ScenarioResult> {
    log(`${scenario.name}: ${scenario.title}`);
    const key = await store.create({ environment: 'prod', name: `chaos-${scenario.name}` });
    const dlqBefore = await topicEnd(admin, names.dlq);
    const restartsBefore = ingesterRestarts;
    const totalsBefore = await rollupTotals(clickhouse);
    const recountsBefore = recounts();
    const traffic = new Traffic({
      url: `https://127.0.0.1:${gatewayPort}`,
      apiKey: key.key,
      ca,
      rate: options.rate,
      keyPrefix: `${scenario.name}-${runId}`,
      seed: results.length + 1,
    });
    let maxLag = 0;
    const watch = setInterval(() => (maxLag = Math.max(maxLag, lag)), 250);
    const trafficStarted = performance.now();
    traffic.start();
    let failure: string | undefined;
    let lagGrowth = Number.NaN;
    let clearedAt = performance.now();
    try {
      await sleep(options.warmSeconds * 1000);
      const injected = performance.now();
      const holdMs = (scenario.holdSeconds ?? options.holdSeconds) * 1000;
      // The lag over the hold, sampled as the max lag is (lag growth, below).
      const holdLags: { atMs: number; lag: number }[] = [];
      const holdWatch = setInterval(() => lagKnown && holdLags.push({ atMs: performance.now() - injected, lag }), 250);
      try {
        await scenario.inject(harness, holdMs);
        await sleep(Math.max(0, holdMs - (performance.now() - injected)));
      } finally {
        clearInterval(holdWatch);
      }
      // Two windows that do not overlap, or no figure.
      if (holdMs >= 2 * LAG_WINDOW_SECONDS * 1000) {
        lagGrowth = meanLag(holdLags, holdMs - LAG_WINDOW_SECONDS * 1000, holdMs) - meanLag(holdLags, 0, LAG_WINDOW_SECONDS * 1000);
      }
      await scenario.clear(harness);
      clearedAt = performance.now();
    } catch (error) {
      failure = `fault injection failed: ${(error as Error).message}`;
      log(`${scenario.name}: ${failure}`);
    }
    // Recovery: from the fault cleared until the lag is back under two seconds of offered
    // traffic for good (a burst of retried records after the fault counts as not recovered).
    const caughtUp = Math.max(1000, options.rate * 2);
    let recoverySeconds: number | null = 0;
    const observeRecovery = () => {
      if (!lagKnown || lag > caughtUp) recoverySeconds = null;
      else recoverySeconds ??= (performance.now() - clearedAt) / 1000;
    };
    const afterUntil = clearedAt + options.afterSeconds * 1000;
    while (performance.now() < afterUntil) {
      observeRecovery();
      await sleep(250);
    }
    const counts: TrafficCounts = await traffic.stop();
    const trafficSeconds = (performance.now() - trafficStarted) / 1000;

    // Drain: the lag at 0 and every acknowledged key stored; or the lag at 0 and nothing
    // new stored for 10 s (what is missing then stays missing); or the timeout.
    const drainStarted = performance.now();
    let drained = false;
    let storedKeys = new Set<string>();
    let stableSince = performance.now();
    while (performance.now() - drainStarted < options.drainTimeoutSeconds * 1000) {
      observeRecovery();
      if (lagKnown && lag === 0) {
        const before = storedKeys.size;
        storedKeys = await storedIdempotencyKeys(clickhouse, key.id).catch(() => storedKeys);
        if (storedKeys.size !== before) stableSince = performance.now();
        drained = true;
        if ([...traffic.acknowledged].every((acked) => storedKeys.has(acked))) break;
        if (performance.now() - stableSince > 10_000) break;
      } else {
        drained = false;
        stableSince = performance.now();
      }
      await sleep(500);
    }
    const drainSeconds = (performance.now() - drainStarted) / 1000;
    clearInterval(watch);
    maxLag = Math.max(maxLag, lag);
    // The rollups are filled by the same insert; a moment for the last unit's commit.
    await sleep(1000);
    storedKeys = await storedIdempotencyKeys(clickhouse, key.id);
    const counted = await rollupRequests(clickhouse, key.id);
    const missing = [...traffic.acknowledged].filter((acked) => !storedKeys.has(acked)).length;
    const unexpected = [...storedKeys].filter((stored) => !traffic.attempted.has(stored)).length;
    const deadLetters = (await topicEnd(admin, names.dlq)) - dlqBefore;
    const doubleCounted = counted - storedKeys.size;
    if (!failure && !drained) failure = `not drained within ${options.drainTimeoutSeconds} s (lag ${lag})`;
    if (missing > 0) failure = `${missing} acknowledged records missing`;
    if (doubleCounted > 0) failure = `${doubleCounted} records counted twice by the rollups`;
    if (doubleCounted < 0) failure = `${-doubleCounted} stored records not counted by the rollups`;
    // Every rollup (and the copy ordered by user), across the whole database: what it
    // counts beyond (or short of) the records stored during the scenario.
    const totalsAfter = await rollupTotals(clickhouse);
    const rollupsOff: Record<string, number> = {};
    for (const after of totalsAfter) {
      const before = totalsBefore.find((total) => total.table === after.table) ?? { stored: 0, counted: 0 };
      const off = after.counted - before.counted - (after.stored - before.stored);
      if (off !== 0) rollupsOff[after.table] = off;
    }
    for (const [table, off] of Object.entries(rollupsOff)) {
      failure = off > 0 ? `${off} records counted twice by ${table}` : `${-off} stored records not counted by ${table}`;
    }
    if (unexpected > 0) failure = `${unexpected} stored records were never sent`;
    if (deadLetters > 0) failure = `${deadLetters} valid records dead-lettered`;
    const refused = Object.values(counts.refusals).reduce((sum, n) => sum + n, 0);
    if (scenario.refusalsAllowed === false && refused > 0) failure ??= `${refused} records refused (none allowed)`;
    const growthBound = scenario.maxLagGrowthSeconds === undefined ? undefined : scenario.maxLagGrowthSeconds * options.rate;
    if (growthBound !== undefined && !(lagGrowth <= growthBound)) {
      failure ??= `the lag grew by ${Math.round(lagGrowth)} messages over the fault, more than ${growthBound} (${scenario.maxLagGrowthSeconds} s of offered traffic)`;
    }
    const refusalBound = scenario.maxRefusalSeconds?.(kafkaBrokers);
    if (refusalBound !== undefined && counts.longestRefusalSeconds > refusalBound) {
      failure ??= `refusals for ${round(counts.longestRefusalSeconds)} s, longer than the ${refusalBound} s allowed`;
    }
    const result: ScenarioResult = {
      scenario: scenario.name,
      title: scenario.title,
      offeredPerS: options.rate,
      achievedPerS: Math.round(counts.acknowledged / trafficSeconds),
      offered: counts.offered,
      acknowledged: counts.acknowledged,
      attempted: counts.attempted,
      replays: counts.replays,
      stored: storedKeys.size,
      missing,
      doubleCounted,
      ...(Object.keys(rollupsOff).length > 0 ? { rollupsOff } : {}),
      unexpected,
      deadLetters,
      refusals: counts.refusals,
      longestRefusalSeconds: round(counts.longestRefusalSeconds),
      ...(refusalBound !== undefined ? { refusalBoundSeconds: refusalBound } : {}),
      slowestAnswerSeconds: round(counts.slowestAnswerSeconds),
      maxLag,
      ...(Number.isFinite(lagGrowth) ? { lagGrowth: Math.round(lagGrowth) } : {}),
      ...(growthBound !== undefined ? { lagGrowthBound: growthBound } : {}),
      recoverySeconds: recoverySeconds === null ? null : round(recoverySeconds),
      drainSeconds: round(drainSeconds),
      drained,
      ingesterRestarts: ingesterRestarts - restartsBefore,
      rollupRecounts: recounts() - recountsBefore,
      passed: failure === undefined,
      ...(failure ? { failure } : {}),
    };
    log(
      `${scenario.name}: ${result.acknowledged} acknowledged, ${result.stored} stored, ${missing} missing, ${doubleCounted} counted twice, ${deadLetters} dead-lettered, ${result.rollupRecounts} recounts; max lag ${maxLag}, lag growth over the fault ${result.lagGrowth ?? '-'}, recovered in ${result.recoverySeconds ?? '-'} s; refusals ${JSON.stringify(result.refusals)}: ${result.passed ? 'passed' : `FAILED (${failure})`}`,
    );
    return result;
  }
}

const round = (value: number) => Math.round(value * 10) / 10;

async function topicEnd(admin: Admin, topic: string): Promise<number> {
  const offsets = await admin.fetchTopicOffsets(topic).catch(() => []);
  return offsets.reduce((sum, partition) => sum + Number(partition.high), 0);
}

async function storedIdempotencyKeys(clickhouse: ClickHouseClient, apiKeyId: string): Promise<Set<string>> {
  const result = await clickhouse.query({
    query: `SELECT idempotency_key AS k FROM usage_events WHERE api_key_id = ${sqlString(apiKeyId)} GROUP BY idempotency_key`,
    format: 'JSONEachRow',
  });
  return new Set((await result.json<{ k: string }>()).map((row) => row.k));
}

async function rollupRequests(clickhouse: ClickHouseClient, apiKeyId: string): Promise<number> {
  const result = await clickhouse.query({
    query: `SELECT countMerge(requests) AS n FROM usage_rollup_key_totals_by_minute WHERE api_key_id = ${sqlString(apiKeyId)}`,
    format: 'JSONEachRow',
  });
  const [row] = await result.json<{ n: string }>();
  return Number(row?.n ?? 0);
}

/** The mean of the lags sampled from `fromMs` to `toMs` into the hold; NaN when none was. */
function meanLag(samples: readonly { atMs: number; lag: number }[], fromMs: number, toMs: number): number {
  const inside = samples.filter((sample) => sample.atMs >= fromMs && sample.atMs < toMs);
  return inside.length === 0 ? Number.NaN : inside.reduce((sum, sample) => sum + sample.lag, 0) / inside.length;
}
