// The admin process: key management, analytics API and dashboard on 127.0.0.1:8480.
import fs from 'node:fs';
import { createLogger } from '@otm/shared/logger';
import { connectionLimitsFrom, readinessOf } from '@otm/shared/http-edge';
import { createRedis, redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { AuditLog } from '@otm/shared/audit';
import { RollupFence } from '@otm/shared/rollups/fence';
import { GuardLedger } from '@otm/shared/rollups/guard-ledger';
import { dayLevelsLedger } from '@otm/shared/rollups/day-levels';
import { ErasureJobs } from '@otm/shared/rollups/erasure';
import { registerErasureRoutes } from './erasure-routes.js';
import { registerRemovalRoutes } from './removal-routes.js';
import { RemovalJobs } from '@otm/shared/rollups/removal';
import { ErasureAnnouncer } from '@otm/shared/erasure-announcements';
import { createRegistry, registryAccessFrom } from '@otm/shared/registry';
import { migrate, requireMigrated } from '@otm/shared/migrate';
import { MIGRATION_TIMEOUT_MS, clickhouseSettingsFrom, createClickHouse } from '@otm/shared/clickhouse';
import { registerAnalyticsRoutes } from './analytics-routes.js';
import { backfillState } from './analytics.js';
import { registerDashboard } from './dashboard.js';
import { registerPipelineRoutes } from './pipeline-routes.js';
import { createKafka, kafkaSettingsFrom, openKafkaInspector } from '@otm/shared/kafka';
import { buildAdminApp } from './app.js';
import { collectDefaultMetrics, Registry } from 'prom-client';
import { loadAdminConfig } from './config.js';
import { serveMetrics } from '@otm/shared/metrics-server';
import { DependencyError, clickhouseFailure, connectRedis, exitIfRefused, redisFailure, startStep } from '@otm/shared/dependency-failure';

const config = loadAdminConfig(process.env);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);
const logger = createLogger('admin', config.LOG_LEVEL);
const redis = createRedis(config.REDIS_URL, redisOptionsFrom(config, 'admin'));
// A dependency that cannot be used at start ends the process with one line naming it
// and the variables to fix (dependency-failure.ts).
await startStep(
  logger,
  () => connectRedis(redis, config.REDIS_URL),
  (error) => (error instanceof DependencyError ? error : redisFailure(error, config.REDIS_URL)),
);

const clickhouse = createClickHouse(clickhouseSettingsFrom(config));
// The analytics API reads as a user of its own when one is given (a read-only one:
// docs/production.md); the jobs (erasure, audit log) write as CLICKHOUSE_USER.
const analyticsReader = config.ANALYTICS_CLICKHOUSE_USER
  ? createClickHouse({
      ...clickhouseSettingsFrom(config),
      username: config.ANALYTICS_CLICKHOUSE_USER,
      password: config.ANALYTICS_CLICKHOUSE_PASSWORD,
    })
  : clickhouse;
// The schema (the audit log's table among it) is migrated here too, as by every
// ingester: idempotent, and safe when several run at once. ClickHouse away at start
// does not stop the admin service: it tries again every 5 s, and until then changes
// of keys and policies are refused (503: no audit entry, no change).
const migrationServer = createClickHouse(clickhouseSettingsFrom(config), { database: null, requestTimeoutMs: MIGRATION_TIMEOUT_MS });
const migrating = createClickHouse(clickhouseSettingsFrom(config), {
  database: config.CLICKHOUSE_DATABASE,
  requestTimeoutMs: MIGRATION_TIMEOUT_MS,
});
const migrated = (async () => {
  for (;;) {
    try {
      // The ingesters report the migrations they apply; here they are only debug lines.
      if (config.MIGRATE_ON_START) {
        await migrate(migrationServer, migrating, config.CLICKHOUSE_DATABASE, (line) => logger.debug(line), config.CLICKHOUSE_CLUSTER);
      } else {
        await requireMigrated(clickhouse, config.CLICKHOUSE_DATABASE);
      }
      return;
    } catch (error) {
      // Away is waited for; refused credentials are not a state to wait out.
      exitIfRefused(
        logger,
        error instanceof DependencyError ? error : clickhouseFailure(error, config.CLICKHOUSE_URL, config.CLICKHOUSE_DATABASE),
        'migrations failed; trying again in 5 s',
      );
      await new Promise((resolve) => setTimeout(resolve, 5000));
    }
  }
})();
// Waited for up to 10 s, so a started admin service normally has its tables.
await Promise.race([migrated, new Promise((resolve) => setTimeout(resolve, 10_000).unref())]);
const metrics = new Registry();
collectDefaultMetrics({ register: metrics });

// Kafka is asked only for the pipeline's lag; connected at the first request (and
// again after a failure), so the admin service starts without it.
const kafka = createKafka(kafkaSettingsFrom(config, 'admin'));
const kafkaInspector = openKafkaInspector(kafka);

const audit = new AuditLog(clickhouse);
const erasureAnnouncer = new ErasureAnnouncer(
  kafka,
  createRegistry(config.SCHEMA_REGISTRY_URL, registryAccessFrom(config)),
  config.ERASURE_TOPIC,
  config.SCHEMA_REGISTRY_REGISTER,
);
// One fence for every job of this service: in Redis and its copy in ClickHouse.
const fence = new RollupFence(redis, redisPrefix, new GuardLedger(clickhouse), dayLevelsLedger(clickhouse));
const erasureJobs = new ErasureJobs(
  redis,
  redisPrefix,
  clickhouse,
  fence,
  audit,
  logger,
  {
    tombstoneSeconds: config.ERASURE_TOMBSTONE_DAYS * 86_400,
    mutationTimeoutMs: config.ERASURE_MUTATION_TIMEOUT_MS,
    cluster: config.CLICKHOUSE_CLUSTER,
  },
  // Connected at the first erasure: the admin service starts without Kafka.
  erasureAnnouncer,
);

const removalJobs = new RemovalJobs(redis, redisPrefix, clickhouse, fence, audit, logger, {
  mutationTimeoutMs: config.ERASURE_MUTATION_TIMEOUT_MS,
  cluster: config.CLICKHOUSE_CLUSTER,
});

const app = await buildAdminApp(
  {
    adminTokens: [config.ADMIN_TOKEN, config.ADMIN_TOKEN_NEXT],
    connectionLimits: connectionLimitsFrom(config),
    jsonMaxDepth: config.JSON_MAX_DEPTH,
    // The query's own limit rounded up to seconds, plus the client's 2 s of grace.
    longestAnswerMs: Math.ceil(config.ANALYTICS_QUERY_TIMEOUT_MS / 1000) * 1000 + 2000,
    ...(config.ADMIN_TLS_CERT_FILE
      ? { https: { cert: fs.readFileSync(config.ADMIN_TLS_CERT_FILE), key: fs.readFileSync(config.ADMIN_TLS_KEY_FILE) } }
      : {}),
  },
  {
    logger,
    keyStore: new KeyStore(redis, redisPrefix),
    audit,
    protectedRoutes: [
      (secured) =>
        registerAnalyticsRoutes(secured, {
          clickhouse: analyticsReader,
          limits: {
            timeoutMs: config.ANALYTICS_QUERY_TIMEOUT_MS,
            maxRowsToRead: config.ANALYTICS_MAX_ROWS_TO_READ,
            twoLevelGroups: config.ANALYTICS_GROUP_BY_TWO_LEVEL_THRESHOLD,
            priority: config.ANALYTICS_CLICKHOUSE_PRIORITY,
          },
          backfilled: backfillState(analyticsReader),
        }),
      (secured) => registerPipelineRoutes(secured, kafkaInspector, config.USAGE_TOPIC, config.INGEST_GROUP_ID),
      (secured) => registerErasureRoutes(secured, erasureJobs),
      (secured) => registerRemovalRoutes(secured, removalJobs),
    ],
    publicRoutes: [registerDashboard],
    metrics,
    ready: readinessOf([
      () => redis.ping(),
      () =>
        clickhouse.ping().then((result) => {
          if (!result.success) throw result.error;
        }),
    ]),
  },
);
const address = await app.listen({ host: config.ADMIN_HOST, port: config.ADMIN_PORT });
const metricsServer = await serveMetrics(metrics, config.METRICS_HOST, config.METRICS_PORT, undefined, config.METRICS_TOKEN);
const metricsAddress = metricsServer.address();
logger.info({ address, metricsPort: typeof metricsAddress === 'object' ? metricsAddress?.port : undefined }, 'admin listening');

async function shutdown(): Promise<void> {
  await app.close();
  metricsServer.close();
  await kafkaInspector.close().catch(() => undefined);
  await erasureAnnouncer.close().catch(() => undefined);
  redis.disconnect();
  await clickhouse.close();
  await migrationServer.close();
  await migrating.close();
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown());
process.on('SIGINT', () => void shutdown());
