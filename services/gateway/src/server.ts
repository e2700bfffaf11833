// The gateway process: connect dependencies in order, register the contract in the
// schema registry, listen; on SIGTERM stop accepting, answer in-flight requests,
// flush the producer and close clients in reverse order.
import fs from 'node:fs';
import v8 from 'node:v8';
import { buildQueuedRecordSchema, compileValidators, parseTimestamp, QUEUED_CONTENT_TYPE } from '@otm/schemas';
import { connectionLimitsFrom, readinessOf } from '@otm/shared/http-edge';
import { createLogger } from '@otm/shared/logger';
import { createKafka, ensureTopic, kafkaSettingsFrom, openKafkaInspector } from '@otm/shared/kafka';
import { openRecordSender, type ProducerClient } from '@otm/shared/kafka-senders';
import { createRegistry, fetchJsonSchema, schemaIdFor, registryAccessFrom } from '@otm/shared/registry';
import { createRedis, redisPrefixFrom, redisOptionsFrom } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { buildApp } from './app.js';
import { ReplayMemory } from './replay-memory.js';
import { loadGatewayConfig } from './config.js';
import { KeyCache } from './key-cache.js';
import { serveMetrics } from '@otm/shared/metrics-server';
import { createGatewayMetrics } from './metrics.js';
import { ProduceBatcher } from './produce-batcher.js';
import { ProducerHandle } from './producer-handle.js';
import { redactorFrom } from './redact.js';
import { setErrorReportLimits } from '@otm/shared/errors';
import type { CompressionName } from '@otm/shared/kafka';
import { DependencyError, connectRedis, kafkaFailure, redisFailure, registryFailure, startStep } from '@otm/shared/dependency-failure';

const config = loadGatewayConfig(process.env);
// On a Redis Cluster the prefix is a hash tag (services/shared/src/redis.ts).
const redisPrefix = redisPrefixFrom(config);
const logger = createLogger('gateway', config.LOG_LEVEL);
// V8 lets the old generation grow to up to four times what survived its last full
// collection before it collects again: the gateway's garbage (records that waited for
// the broker through two young collections) then held its RSS near 300 MB with 40 MB
// alive. A bound on the growth, not on the heap, costs a collection every second or
// two instead (bench/analysis.md has the measurements). Set before anything is loaded
// that the collector would size itself by; the flag is read at every collection.
if (config.GATEWAY_HEAP_GROWING_PERCENT > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.GATEWAY_HEAP_GROWING_PERCENT}`);

const kafkaSettings = kafkaSettingsFrom(config, 'gateway');
const kafka = createKafka(kafkaSettings, logger);
// A dependency that cannot be used at start ends the process with one line naming it
// and the variables to fix (dependency-failure.ts).
await startStep(
  logger,
  () => ensureTopic(kafka, config.USAGE_TOPIC, config.USAGE_TOPIC_PARTITIONS),
  (error) => kafkaFailure(error, config.KAFKA_BROKERS.join(',')),
);

// The topic's schema is registered (a compatible new version when it changed) and
// read back; bodies are admitted by the full record schema this release ships.
const registry = createRegistry(config.SCHEMA_REGISTRY_URL, registryAccessFrom(config));
const { schemaId, validators } = await startStep(
  logger,
  async () => {
    const id = await schemaIdFor(registry, config.SCHEMA_SUBJECT, buildQueuedRecordSchema(), config.SCHEMA_REGISTRY_REGISTER);
    return { schemaId: id, validators: compileValidators(await fetchJsonSchema(registry, id)) };
  },
  (error) => registryFailure(error, config.SCHEMA_REGISTRY_URL),
);

const redis = createRedis(config.REDIS_URL, redisOptionsFrom(config, 'gateway'));
const subscriber = createRedis(config.REDIS_URL, redisOptionsFrom(config, 'gateway-revocations'));
await startStep(
  logger,
  () => connectRedis(redis, config.REDIS_URL),
  (error) => (error instanceof DependencyError ? error : redisFailure(error, config.REDIS_URL)),
);
const keyStore = new KeyStore(redis, redisPrefix);
setErrorReportLimits({ perItem: config.ERROR_DETAILS_PER_ITEM, answerBytes: config.ERROR_ANSWER_MAX_BYTES });

const keyCache = new KeyCache(keyStore, subscriber, {
  hitTtlMs: config.KEY_CACHE_TTL_MS,
  missTtlMs: config.KEY_CACHE_MISS_TTL_MS,
  maxEntries: config.KEY_CACHE_MAX_ENTRIES,
  maxUnknownEntries: config.KEY_CACHE_MAX_UNKNOWN_ENTRIES,
  outageTtlMs: config.KEY_CACHE_OUTAGE_TTL_MS,
});
await keyCache.start();

const producers = Array.from(
  { length: config.PRODUCE_CONCURRENCY },
  () =>
    new ProducerHandle(() =>
      openRecordSender(config.KAFKA_PRODUCER_CLIENT as ProducerClient, kafka, kafkaSettings, {
        retries: 2,
        maxRetryTimeMs: config.PRODUCE_TIMEOUT_MS,
        compression: config.KAFKA_COMPRESSION as CompressionName,
      }),
    ),
);
await Promise.all(producers.map((producer) => producer.current()));

// The depth gauge reads the batcher when scraped, after it exists.
const metrics = createGatewayMetrics(() => batcher.depth);
const batcher = new ProduceBatcher(
  producers,
  {
    topic: config.USAGE_TOPIC,
    maxInFlightBatches: config.PRODUCE_CONCURRENCY,
    lingerMs: config.PRODUCE_LINGER_MS,
    maxBatchRecords: config.PRODUCE_MAX_BATCH,
    maxBatchBytes: config.PRODUCE_MAX_BATCH_BYTES,
    maxQueuedRecords: config.PRODUCE_MAX_QUEUE,
    // docs/topic-contract.md, "Headers": what the value is and which schema wrote it, readable without decoding it.
    headers: { 'content-type': QUEUED_CONTENT_TYPE, 'x-schema-id': String(schemaId) },
    maxQueuedBytes: config.PRODUCE_MAX_QUEUE_BYTES,
    sendTimeoutMs: config.PRODUCE_TIMEOUT_MS,
  },
  {
    onBatch(records, durationMs, ok) {
      metrics.batchSize.observe(records);
      metrics.produceLatency.observe({ outcome: ok ? 'ok' : 'failed' }, durationMs / 1000);
    },
  },
);

// Readiness asks Kafka through an inspector of its own, whose connection is replaced
// after any failure, so one broken while the broker was away is never reused. Redis is
// not part of it: Kafka is the only dependency a 202 needs, and known keys are answered
// from the key cache while Redis is away (a gateway taken out of its Service then would
// refuse every client instead).
const readyKafka = openKafkaInspector(kafka);
const ready = readinessOf([
  () =>
    fetch(`${config.SCHEMA_REGISTRY_URL}/subjects`, { signal: AbortSignal.timeout(1000) }).then((r) => {
      if (!r.ok) throw new Error(String(r.status));
    }),
  // A check that timed out drops its connection too (it may hang on a broker that went away).
  { check: () => readyKafka.topicReachable(config.USAGE_TOPIC), onFailure: () => void readyKafka.close().catch(() => undefined) },
]);

// Accepted idempotency keys, for 24 hours at most, in fixed-size slots (replay-memory.ts).
const replay = config.IDEMPOTENCY_REPLAY_ENTRIES > 0 ? new ReplayMemory(config.IDEMPOTENCY_REPLAY_ENTRIES, 24 * 3600 * 1000) : undefined;

const app = await buildApp(
  {
    instanceId: config.GATEWAY_INSTANCE_ID,
    bodyLimitBytes: config.BODY_LIMIT_BYTES,
    retryAfterSeconds: config.RETRY_AFTER_SECONDS,
    rateLimit: { perSecond: config.RATE_LIMIT_PER_SECOND, burst: config.RATE_LIMIT_BURST },
    connectionLimits: connectionLimitsFrom(config),
    jsonMaxDepth: config.JSON_MAX_DEPTH,
    batch: {
      maxRecords: config.BATCH_MAX_RECORDS,
      maxBytes: config.BATCH_BODY_LIMIT_BYTES,
      maxUnreadableLines: config.BATCH_MAX_UNREADABLE_LINES,
    },
    authFailuresPerMinute: config.AUTH_FAILURES_PER_MINUTE,
    otlpMaxAttributes: config.OTLP_MAX_ATTRIBUTES,
    recordBounds: {
      earliestMs: parseTimestamp(config.TIMESTAMP_EARLIEST)!,
      maxFutureMs: config.TIMESTAMP_MAX_FUTURE_HOURS * 3_600_000,
      maxContextArrayItems: config.CONTEXT_MAX_ARRAY_ITEMS,
      maxTokens: config.TOKENS_MAX,
      maxCallMs: config.CALL_DURATION_MAX_HOURS * 3_600_000,
    },
    https: config.GATEWAY_PLAIN_HTTP
      ? undefined
      : { cert: fs.readFileSync(config.TLS_CERT_FILE), key: fs.readFileSync(config.TLS_KEY_FILE) },
  },
  { logger, keyCache, validators, schemaId, batcher, metrics, ready, replay, redactor: redactorFrom(config) },
);

const metricsServer = await serveMetrics(metrics.registry, config.METRICS_HOST, config.METRICS_PORT, undefined, config.METRICS_TOKEN);
const address = await app.listen({ host: config.GATEWAY_HOST, port: config.GATEWAY_PORT });
if (config.GATEWAY_PLAIN_HTTP) logger.warn('serving PLAIN HTTP: only for running behind a TLS-terminating proxy');
const metricsAddress = metricsServer.address();
logger.info({ address, schemaId, metricsPort: typeof metricsAddress === 'object' ? metricsAddress?.port : undefined }, 'gateway listening');

let stopping = false;
async function shutdown(signal: string): Promise<void> {
  if (stopping) return;
  stopping = true;
  logger.info({ signal }, 'shutting down');
  // Reverse order of start: stop intake (close waits for in-flight requests, whose
  // records the batcher still delivers), flush the producer, close clients.
  await app.close();
  await batcher.drain();
  await Promise.all(producers.map((producer) => producer.reset()));
  await readyKafka.close().catch(() => undefined);
  metricsServer.close();
  subscriber.disconnect();
  redis.disconnect();
  logger.info('stopped');
  process.exit(0);
}
process.on('SIGTERM', () => void shutdown('SIGTERM'));
process.on('SIGINT', () => void shutdown('SIGINT'));
