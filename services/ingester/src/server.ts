// The ingester process. Start order: ClickHouse schema, topics, Redis, producer
// for dead letters, consumer. SIGTERM stops in reverse: the consumer takes no new
// chunks and loads and commits the ones it took (for at most the session timeout;
// what is not loaded by then is not committed and comes again), then clients close.
import { createLogger } from '@otm/shared/logger';
import { codecs } from '@otm/shared/kafka-codecs';
import {
  cachedConsumerLag,
  openKafkaInspector,
  openKafkajsSource,
  openKafkajsSender,
  createKafka,
  ensureTopic,
  isExpectedKafkaCondition,
  kafkaSettingsFrom,
} from '@otm/shared/kafka';
import { createRegistry, registryAccessFrom } from '@otm/shared/registry';
import { createRedis } from '@otm/shared/redis';
import { BACKFILL_TIMEOUT_MS, MIGRATION_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { serveMetrics } from '@otm/shared/metrics-server';
import { loadIngesterConfig } from './config.js';
import { UsageConsumer } from './consumer.js';
import { SchemaCache } from './decode-step.js';
import { DedupeStep } from './dedupe-step.js';
import { ClickHouseEventStore, KafkaDeadLetters, RegistryDecoder } from './stage-ports.js';
import { createIngesterMetrics } from './metrics.js';
import { RollupFence } from '@otm/shared/rollups/fence';
import { ERASURE_TOPIC_CONFIG } from '@otm/shared/erasure-announcements';
import { backfillRollups, isFullyBackfilled, markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
import { randomUUID } from 'node:crypto';
import { migrate, requireMigrated } from '@otm/shared/migrate';
import {
  DependencyError,
  clickhouseFailure,
  connectRedis,
  exitIfRefused,
  kafkaFailure,
  reachClickHouse,
  startStep,
} from '@otm/shared/dependency-failure';
import { PriceTable } from './prices.js';
import { applyRetention, retentionPolicyFrom } from '@otm/shared/rollups/retention';
import { FreshnessCanary } from './canary.js';
import fs from 'node:fs';
import v8 from 'node:v8';
import { hashKey } from '@otm/shared/keys/key-format';
import { KeyStore } from '@otm/shared/keys/key-store';

const config = loadIngesterConfig(process.env);
const logger = createLogger('ingester', config.LOG_LEVEL);
// Under its 256 MB old-space cap V8 lets the old generation grow by only about half of
// what survived the last full collection (30 MB alive: the next one at 46 MB): every
// record waiting for its load unit is promoted, and under a backlog a full collection
// ran five times a second. Doubling is allowed instead: a fifth less CPU per record at
// about the same RSS (bench/analysis.md). NODE_OPTIONS refuses the flag; it is read at
// every collection.
if (config.INGEST_HEAP_GROWING_PERCENT > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.INGEST_HEAP_GROWING_PERCENT}`);
if (config.INGEST_FAULT_INJECTION === 'undecodable-snappy') {
  codecs.snappy.decompress = () => Promise.reject(new Error('injected fault: this snappy batch cannot be decoded'));
}

const clickhouseSettings = clickhouseSettingsFrom(config);
const server = createClickHouse(clickhouseSettings, null, MIGRATION_TIMEOUT_MS);
const migrating = createClickHouse(clickhouseSettings, clickhouseSettings.database, MIGRATION_TIMEOUT_MS);
const clickhouse = createClickHouse(clickhouseSettings);
// A dependency that cannot be used at start ends the process with one line naming it
// and the variables to fix (dependency-failure.ts).
await startStep(
  logger,
  async () => {
    // Reached first within a bound of seconds: the migration's own statements may take
    // minutes, and a server that never answers would be waited on for as long.
    if (!config.MIGRATE_ON_START) {
      await reachClickHouse(clickhouse, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE);
      return requireMigrated(migrating, config.CLICKHOUSE_DATABASE);
    }
    await reachClickHouse(server, config.CLICKHOUSE_URL);
    await migrate(
      server,
      migrating,
      config.CLICKHOUSE_DATABASE,
      (line) => logger.info(line),
      clickhouseSettings.cluster,
      config.INGEST_MIGRATIONS_UP_TO || undefined,
    );
  },
  (error) => (error instanceof DependencyError ? error : clickhouseFailure(error, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE)),
);
await server.close();
await migrating.close();

const kafka = createKafka(kafkaSettingsFrom(config, 'ingester'), logger);
await startStep(
  logger,
  async () => {
    await ensureTopic(kafka, config.USAGE_TOPIC, config.USAGE_TOPIC_PARTITIONS);
    await ensureTopic(kafka, config.DLQ_TOPIC, 1);
    // Made here too (the admin service writes it), so consumers can subscribe before the first erasure.
    await ensureTopic(kafka, config.ERASURE_TOPIC, 1, 30_000, ERASURE_TOPIC_CONFIG);
  },
  (error) => kafkaFailure(error, config.KAFKA_BROKERS.join(',')),
);

const redis = createRedis(config.REDIS_URL, { name: 'ingester', caFile: config.REDIS_TLS_CA_FILE });
// Away is waited for (the loads retry); refused credentials are not a state to wait out.
await connectRedis(redis, config.REDIS_URL).catch((failure: DependencyError) =>
  exitIfRefused(logger, failure, 'redis not reachable yet; will retry'),
);

const dlqSender = await openKafkajsSender(kafka, { retries: 5, maxRetryTimeMs: 30_000 });

// Ready while the consumer runs in its group. A live process that consumes nothing is
// the worst state: when the source gives up on its consumer (a crash it will not
// restart: an error out of our own code, which would only repeat at the same offset)
// the process exits non-zero, so its supervisor (npm start, Kubernetes) restarts it.
let consuming = false;
let stopping = false;
const source = await openKafkajsSource(
  kafka,
  {
    groupId: config.INGEST_GROUP_ID,
    maxWaitMs: config.INGEST_BATCH_MAX_WAIT_MS,
    maxBytesPerPartition: config.INGEST_FETCH_MAX_BYTES,
    maxBytes: config.INGEST_FETCH_MAX_BYTES * 4,
    // Short enough that a crashed member's partitions move on quickly; our retry
    // loops heartbeat, so a long dependency outage does not cost the membership.
    sessionTimeoutMs: config.INGEST_SESSION_TIMEOUT_MS,
    rebalanceTimeoutMs: config.INGEST_SESSION_TIMEOUT_MS + 5000,
    heartbeatIntervalMs: Math.max(500, Math.floor(config.INGEST_SESSION_TIMEOUT_MS / 10)),
  },
  {
    joined: () => void (consuming = true),
    stopped: () => void (consuming = false),
    crashed(error, restarting) {
      consuming = false;
      if (restarting || stopping) {
        // A group coordinator still loading at start is expected and passes by itself: info, not a warning.
        const expected = isExpectedKafkaCondition(error.message);
        logger[expected ? 'info' : 'warn'](
          { err: error.message },
          expected ? 'consumer restarting while Kafka finishes starting' : 'consumer crashed; it restarts',
        );
        return;
      }
      logger.fatal({ err: error.message, stack: error.stack }, 'consumer crashed and will not restart; exiting');
      process.exit(70);
    },
  },
);

// Lag is read from Kafka when Prometheus scrapes, at most every 5 s.
const lagReader = openKafkaInspector(kafka);
const metrics = createIngesterMetrics({
  lag: cachedConsumerLag(lagReader, config.INGEST_GROUP_ID, config.USAGE_TOPIC, 5000),
  oldestPendingMs: () => usageConsumer.oldestPendingMs(),
});
// The freshness canary's key id, looked up by the key's hash (the key may be created
// after the ingester starts; until it is found, nothing is treated as a probe).
let canaryKeyId: string | undefined;
const keyStore = new KeyStore(redis, config.REDIS_KEY_PREFIX);
async function findCanaryKey(): Promise<boolean> {
  if (canaryKeyId !== undefined) return true;
  const record = await keyStore.findByHash(hashKey(config.CANARY_API_KEY)).catch(() => null);
  canaryKeyId = record?.id;
  return canaryKeyId !== undefined;
}
const erasureStore = new RollupFence(redis, config.REDIS_KEY_PREFIX);
const usageConsumer = new UsageConsumer(
  {
    source,
    decoder: new RegistryDecoder(new SchemaCache(createRegistry(config.SCHEMA_REGISTRY_URL, registryAccessFrom(config)))),
    dedupe: new DedupeStep(redis, config.REDIS_KEY_PREFIX, config.DEDUPE_TTL_SECONDS),
    erasures: erasureStore,
    store: new ClickHouseEventStore(clickhouse, erasureStore, clickhouseSettings.cluster, {
      windowS: config.DEDUPE_TTL_SECONDS,
      keyTable: !config.INGEST_MIGRATIONS_UP_TO || config.INGEST_MIGRATIONS_UP_TO >= '0012',
    }),
    deadLetters: new KafkaDeadLetters(dlqSender, config.DLQ_TOPIC),
    prices: PriceTable.load(config.PRICE_TABLE_FILE || undefined),
    plausible: {
      maxTokens: config.TOKENS_MAX,
      maxCallMs: config.CALL_DURATION_MAX_HOURS * 3_600_000,
      maxOutputTokensPerSec: config.OUTPUT_TOKENS_PER_SEC_MAX,
    },
    metrics,
    logger,
  },
  {
    topic: config.USAGE_TOPIC,
    maxBatchRows: config.INGEST_BATCH_MAX_ROWS,
    maxPendingRows: config.INGEST_MAX_PENDING_ROWS,
    partitionsConcurrently: config.INGEST_CONCURRENCY,
    gatherMs: config.INGEST_GATHER_MS,
    unitIntervalMs: config.INGEST_UNIT_INTERVAL_MS,
    retryInitialMs: 100,
    retryMaxMs: config.INGEST_RETRY_MAX_MS,
    injectCrash: config.INGEST_FAULT_INJECTION === 'consumer-crash',
    unsafeCommitBeforeLoad: config.INGEST_FAULT_INJECTION === 'commit-before-load',
    canaryKeyId: () => canaryKeyId,
  },
);
const canary = config.CANARY_API_KEY
  ? new FreshnessCanary(
      {
        gatewayUrl: config.CANARY_GATEWAY_URL,
        apiKey: config.CANARY_API_KEY,
        ca: config.CANARY_CA_FILE ? fs.readFileSync(config.CANARY_CA_FILE, 'utf8') : undefined,
        intervalMs: config.CANARY_INTERVAL_MS,
        timeoutMs: config.CANARY_TIMEOUT_MS,
        // A probe is sent only once its key's id is known here, so it can never be loaded as usage.
        ready: findCanaryKey,
      },
      clickhouse,
      { freshness: metrics.canaryFreshness, probes: metrics.canaryProbes },
      logger,
    )
  : undefined;

const metricsServer = await serveMetrics(
  metrics.registry,
  config.METRICS_HOST,
  config.METRICS_PORT,
  () => consuming && !stopping,
  config.METRICS_TOKEN,
);
// Every ingester given CANARY_API_KEY recognises the canary's records, including
// probes another instance sent: the key is looked up before consuming starts.
if (config.CANARY_API_KEY) await findCanaryKey();
// A new installation (no record yet) has nothing to backfill: recorded before consuming.
// Either way, once 0008's backfill is done the legacy minute rollup's view is dropped.
if (!config.INGEST_MIGRATIONS_UP_TO) {
  await markBackfilledIfEmpty(clickhouse, clickhouseSettings.cluster, config.MIGRATE_ON_START).catch((error: Error) => {
    logger.warn({ err: error.message }, 'recording the backfill or retiring the legacy rollup failed; tried again by the backfill');
    return false;
  });
}
await usageConsumer.start();
const metricsAddress = metricsServer.address();
logger.info(
  {
    topic: config.USAGE_TOPIC,
    group: config.INGEST_GROUP_ID,
    canary: canary !== undefined,
    metricsPort: typeof metricsAddress === 'object' ? metricsAddress?.port : undefined,
  },
  'ingester consuming',
);
canary?.start();

// Retention (services/shared/src/rollups/retention.ts): a minute after start, then every RETENTION_CHECK_INTERVAL_MS.
const retentionPolicy = retentionPolicyFrom(config);
const retentionRun = async () => {
  try {
    const outcome = await applyRetention(clickhouse, retentionPolicy, Date.now(), false, clickhouseSettings.cluster);
    if (outcome.dropped.length > 0) logger.info({ dropped: outcome.dropped }, 'retention dropped expired partitions');
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'retention failed; tried again at the next interval');
  }
};
const retentionTimers = [
  setTimeout(() => void retentionRun(), 60_000),
  setInterval(() => void retentionRun(), config.RETENTION_CHECK_INTERVAL_MS),
];
for (const timer of retentionTimers) timer.unref();

// The backfill of the rollups of migrations 0008 to 0011
// (services/shared/src/rollups/backfill.ts): by one ingester at a time (a lock in
// Redis), beside consuming, at start and every 10 minutes until done.
const backfillRun = async () => {
  if (await isFullyBackfilled(clickhouse).catch(() => false)) {
    clearInterval(backfillTimer);
    return;
  }
  const lock = `${config.REDIS_KEY_PREFIX}rollup-backfill-lock`;
  const token = randomUUID();
  if ((await redis.set(lock, token, 'PX', 3_600_000, 'NX').catch(() => null)) !== 'OK') return;
  try {
    const outcome = await backfillRollups(backfilling, erasureStore, {
      cluster: clickhouseSettings.cluster,
      retireLegacy: config.MIGRATE_ON_START,
      log: (line) => logger.info(line),
    });
    if (outcome.done) clearInterval(backfillTimer);
  } catch (error) {
    logger.warn({ err: (error as Error).message }, 'rollup backfill failed; it resumes at the next attempt');
  } finally {
    if ((await redis.get(lock).catch(() => null)) === token) await redis.del(lock).catch(() => undefined);
  }
};
const backfilling = createClickHouse(clickhouseSettings, clickhouseSettings.database, BACKFILL_TIMEOUT_MS);
const backfillTimer = setInterval(() => void backfillRun(), 600_000);
backfillTimer.unref();
void backfillRun();

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  // The chunks already taken load and commit first, so a planned restart redelivers nothing.
  await canary?.stop();
  for (const timer of retentionTimers) clearTimeout(timer);
  clearInterval(backfillTimer);
  await usageConsumer.drain(config.INGEST_SESSION_TIMEOUT_MS).catch(() => undefined);
  await source.close().catch(() => undefined);
  await dlqSender.close().catch(() => undefined);
  await lagReader.close().catch(() => undefined);
  metricsServer.close();
  redis.disconnect();
  await clickhouse.close();
  await backfilling.close();
  logger.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
