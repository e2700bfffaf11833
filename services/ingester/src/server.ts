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
import { createRedis, redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import { MIGRATION_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { serveMetrics } from '@otm/shared/metrics-server';
import {
  consumerOptionsFrom,
  loadIngesterConfig,
  loadsQuerySettings,
  migrationApplies,
  plausibleBoundsFrom,
  withoutRedisFrom,
} from './config.js';
import { UsageConsumer } from './consumer.js';
import { SchemaCache } from './decode-step.js';
import { DedupeStep, forgetfulDedupe } from './dedupe-step.js';
import { ClickHouseEventStore, KafkaDeadLetters, RegistryDecoder } from './adapters.js';
import { createIngesterMetrics } from './metrics.js';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { redisStages } from './without-redis.js';
import { ERASURE_TOPIC_CONFIG } from '@otm/shared/erasure-announcements';
import { markBackfilledIfEmpty } from '@otm/shared/rollups/backfill';
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
import { CanaryKey, FreshnessCanary } from './canary.js';
import { startBackgroundJobs } from './background-jobs.js';
import { dayLevelsLedger } from '@otm/shared/rollups/day-levels';
import fs from 'node:fs';
import v8 from 'node:v8';
import { hashKey } from '@otm/shared/keys/key-format';
import { KeyStore } from '@otm/shared/keys/key-store';

const config = loadIngesterConfig(process.env);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);
const logger = createLogger('ingester', config.LOG_LEVEL);
// Under its 256 MB cap V8 lets the old generation grow by only half of what survived a
// full collection: under a backlog one ran five times a second. Doubling costs a fifth
// less CPU per record at the same RSS (docs/ingester.md, "Memory"); NODE_OPTIONS refuses the flag.
if (config.INGEST_HEAP_GROWING_PERCENT > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.INGEST_HEAP_GROWING_PERCENT}`);
if (config.INGEST_FAULT_INJECTION === 'undecodable-snappy') {
  codecs.snappy.decompress = () => Promise.reject(new Error('injected fault: this snappy batch cannot be decoded'));
}

const clickhouseSettings = clickhouseSettingsFrom(config);
const server = createClickHouse(clickhouseSettings, { database: null, requestTimeoutMs: MIGRATION_TIMEOUT_MS });
const migrating = createClickHouse(clickhouseSettings, { requestTimeoutMs: MIGRATION_TIMEOUT_MS });
// The loads' client: an insert into usage_events feeds its materialized views in
// parallel rather than one after the other (INGEST_PARALLEL_VIEWS; the same work, sooner),
// and every query yields to the analytics API's (INGEST_CLICKHOUSE_PRIORITY).
const clickhouse = createClickHouse(clickhouseSettings, { querySettings: loadsQuerySettings(config) });
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

const redis = createRedis(config.REDIS_URL, redisOptionsFrom(config, 'ingester'));
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
  unitIntervalMs: () => usageConsumer.unitIntervalMs(),
  pending: () => usageConsumer.pendingRecords(),
});
const keyStore = new KeyStore(redis, redisPrefix);
const canaryKey = new CanaryKey(async () => (await keyStore.findByHash(hashKey(config.CANARY_API_KEY)))?.id);
// The erasure fence, also in ClickHouse (migration 0013, where applied): read there while Redis is down.
const guardLedger = new GuardLedger(clickhouse);
// With the day rollups built by a job (migration 0014): the watermark read with the lease, late days marked.
const erasureStore = new RollupFence(
  redis,
  redisPrefix,
  migrationApplies(config, '0013') ? guardLedger : null,
  migrationApplies(config, '0014') ? dayLevelsLedger(clickhouse) : null,
);
const skipDedupe = config.INGEST_FAULT_INJECTION === 'skip-dedupe';
const marks = new DedupeStep(redis, config.REDIS_KEY_PREFIX, config.DEDUPE_TTL_SECONDS);
const dedupe = skipDedupe ? forgetfulDedupe(marks) : marks;
const redisSteps = redisStages({ dedupe, erasures: erasureStore }, guardLedger, withoutRedisFrom(config), metrics, logger);
const usageConsumer = new UsageConsumer(
  {
    source,
    decoder: new RegistryDecoder(new SchemaCache(createRegistry(config.SCHEMA_REGISTRY_URL, registryAccessFrom(config)))),
    ...redisSteps,
    store: new ClickHouseEventStore(clickhouse, erasureStore, clickhouseSettings.cluster, {
      windowS: config.DEDUPE_TTL_SECONDS,
      keyTable: migrationApplies(config, '0012'),
      unsafeSkip: skipDedupe,
    }),
    deadLetters: new KafkaDeadLetters(dlqSender, config.DLQ_TOPIC),
    prices: PriceTable.load(config.PRICE_TABLE_FILE || undefined),
    plausible: plausibleBoundsFrom(config),
    metrics,
    logger,
  },
  { ...consumerOptionsFrom(config), canaryKeyId: () => canaryKey.id },
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
        ready: () => canaryKey.found(),
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
if (config.CANARY_API_KEY) await canaryKey.found();
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

// Tombstones written before their copy in ClickHouse existed (migration 0013) are copied
// there, so loading without Redis knows those erasures too; each start looks again.
if (withoutRedisFrom(config).enabled) {
  void erasureStore.copyTombstonesToLedger().then(
    (copied) => {
      if (copied > 0) logger.info({ copied }, 'erasure tombstones copied to ClickHouse');
    },
    (error: unknown) =>
      logger.warn({ err: (error as Error).message }, 'erasure tombstones not copied to ClickHouse; tried again at the next start'),
  );
}

// Retention and the rollup backfill run beside consuming (background-jobs.ts).
const jobs = startBackgroundJobs({
  clickhouse,
  redis,
  fence: erasureStore,
  settings: clickhouseSettings,
  config: { ...config, buildDays: migrationApplies(config, '0014') },
  logger,
});

async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  // The chunks already taken load and commit first, so a planned restart redelivers nothing.
  await canary?.stop();
  await usageConsumer.drain(config.INGEST_SESSION_TIMEOUT_MS).catch(() => undefined);
  await source.close().catch(() => undefined);
  await dlqSender.close().catch(() => undefined);
  await lagReader.close().catch(() => undefined);
  metricsServer.close();
  redis.disconnect();
  await clickhouse.close();
  await jobs.stop();
  logger.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
