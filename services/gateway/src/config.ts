import os from 'node:os';
import { parseTimestamp } from '@otm/schemas';
import {
  bool,
  infrastructureSpec,
  metricsPortSpec,
  nonNegativeInt,
  parseConfig,
  plausibleSpec,
  positiveInt,
  str,
} from '@otm/shared/config';
import { PRODUCER_CLIENTS } from '@otm/shared/kafka-senders';
import { connectionLimitsSpec } from '@otm/shared/http-edge';

export const gatewaySpec = {
  ...infrastructureSpec,
  ...connectionLimitsSpec,
  GATEWAY_HOST: str({ default: '127.0.0.1', desc: 'Bind address of the ingest endpoint' }),
  GATEWAY_PORT: nonNegativeInt({ default: 8443, desc: 'Port of the ingest endpoint; 0 picks a free one' }),
  GATEWAY_PLAIN_HTTP: bool({ default: false, desc: 'Serve plain HTTP (only behind a TLS-terminating proxy)' }),
  TLS_CERT_FILE: str({ default: '', desc: 'PEM certificate; required unless GATEWAY_PLAIN_HTTP' }),
  TLS_KEY_FILE: str({ default: '', desc: 'PEM private key; required unless GATEWAY_PLAIN_HTTP' }),
  GATEWAY_INSTANCE_ID: str({
    default: `${os.hostname()}-${process.pid}`,
    desc: 'Names this gateway in queued records (meta.gatewayId); by default the host name and process id',
  }),
  BODY_LIMIT_BYTES: positiveInt({ default: 1_048_576, desc: 'Bytes of a single-record body at most, after decompression (413 beyond)' }),
  BATCH_MAX_RECORDS: positiveInt({ default: 1000, desc: 'Records in one batch at most (413 beyond)' }),
  BATCH_BODY_LIMIT_BYTES: positiveInt({ default: 5 * 1_048_576, desc: 'Bytes of a batch body at most, after decompression (413 beyond)' }),
  BATCH_MAX_UNREADABLE_LINES: nonNegativeInt({
    default: 20,
    desc: 'NDJSON lines that are not JSON in one batch at most; past it the whole batch is refused (400)',
  }),
  OTLP_MAX_ATTRIBUTES: positiveInt({
    default: 64_000,
    desc: 'Attributes (resource, span and event) in one OTLP export at most, counted before decoding (413 beyond)',
  }),
  AUTH_FAILURES_PER_MINUTE: nonNegativeInt({
    default: 600,
    desc: 'Failed authentications per client address per minute; past it, keys the gateway does not hold get 429 (0: no limit)',
  }),
  ERROR_DETAILS_PER_ITEM: positiveInt({
    default: 20,
    desc: 'Errors listed per record (or request) in an error answer; `truncated` says more were found',
  }),
  ERROR_ANSWER_MAX_BYTES: positiveInt({ default: 65_536, desc: "Bytes of error details in one answer at most (a batch's items together)" }),
  PRODUCE_LINGER_MS: nonNegativeInt({ default: 2, desc: 'How long a record waits for others to share its Produce request' }),
  PRODUCE_MAX_BATCH: positiveInt({ default: 1000, desc: 'Records per Produce request at most' }),
  PRODUCE_MAX_BATCH_BYTES: positiveInt({ default: 4 * 1024 * 1024, desc: 'Bytes per Produce request at most' }),
  PRODUCE_CONCURRENCY: positiveInt({ default: 3, desc: 'Produce requests in flight at once (one idempotent producer each)' }),
  PRODUCE_MAX_QUEUE: positiveInt({ default: 20_000, desc: 'Records waiting for the broker before new ones get 503' }),
  PRODUCE_MAX_QUEUE_BYTES: positiveInt({
    default: 64 * 1024 * 1024,
    desc: 'Bytes of records waiting for the broker before new ones get 503',
  }),
  KAFKA_COMPRESSION: str({
    default: 'snappy',
    choices: ['none', 'gzip', 'snappy', 'lz4', 'zstd'],
    desc: "Codec of the record batches the gateway produces (the ingester reads every codec). snappy by measurement (BENCHMARKS.md): 3.7x fewer bytes on the broker than none for the same CPU in the gateway and the ingester, within a run's noise; zstd stores 6x fewer but costs the ingester about a fifth more CPU per record, lz4 the ingester a tenth more",
  }),
  KAFKA_PRODUCER_CLIENT: str({
    default: 'platformatic',
    choices: [...PRODUCER_CLIENTS],
    desc: "The Kafka client the gateway produces with: platformatic (@platformatic/kafka, about half of kafkajs's CPU per record produced, BENCHMARKS.md) or kafkajs; both idempotent with acks from every in-sync replica, keyed records on the Java client's partitions",
  }),
  PRODUCE_TIMEOUT_MS: positiveInt({ default: 5000, desc: 'Bound on waiting for a broker acknowledgement before 503' }),
  RETRY_AFTER_SECONDS: positiveInt({ default: 5, desc: 'Retry-After of a 503 answer' }),
  RATE_LIMIT_PER_SECOND: nonNegativeInt({ default: 2000, desc: 'Records per key per second, sustained; 0 turns the limit off' }),
  RATE_LIMIT_BURST: positiveInt({
    default: 4000,
    desc: 'Records per key accepted at once: a fixed window of BURST / PER_SECOND seconds, rounded to a whole number (at least 1), holds BURST records, so the sustained rate is BURST / that window (PER_SECOND 3000 with BURST 4000: a 1 s window, 4,000/s)',
  }),
  TIMESTAMP_EARLIEST: str({ default: '2000-01-01T00:00:00Z', desc: 'Timestamps before this are refused (RFC 3339)' }),
  TIMESTAMP_MAX_FUTURE_HOURS: positiveInt({ default: 24, desc: "Timestamps more than this after the gateway's clock are refused" }),
  CONTEXT_MAX_ARRAY_ITEMS: positiveInt({ default: 256, desc: 'Items in one array inside context' }),
  ...plausibleSpec,
  KEY_CACHE_TTL_MS: positiveInt({ default: 1000, desc: 'Lifetime of a cached key look-up (must stay under 2000)' }),
  KEY_CACHE_OUTAGE_TTL_MS: nonNegativeInt({
    default: 600_000,
    desc: 'While Redis does not answer, a known key is still accepted for this long after its last successful look-up (a key deleted meanwhile is refused once Redis answers or this time is up); 0: refused at once (503)',
  }),
  KEY_CACHE_MISS_TTL_MS: positiveInt({ default: 250, desc: 'Lifetime of a cached look-up of an unknown key' }),
  KEY_CACHE_MAX_ENTRIES: positiveInt({ default: 100_000, desc: 'Known keys held in the key cache at most (least recently used go first)' }),
  KEY_CACHE_MAX_UNKNOWN_ENTRIES: positiveInt({
    default: 100_000,
    desc: 'Unknown key digests remembered at most (a flood of unknown keys never pushes out a known one)',
  }),
  IDEMPOTENCY_REPLAY_ENTRIES: nonNegativeInt({ default: 100_000, desc: 'Accepted idempotency keys remembered for replies' }),
  REDACT_PATTERNS: str({
    default: '{}',
    desc: 'Redaction patterns of your own for the capture policy redact: a JSON object of NAME to regular expression ([NAME] replaces a match)',
  }),
  REDACT_PHONE_REGION: str({
    default: 'US',
    desc: 'Region (ISO 3166 code) whose national phone numbers redact recognises without a +country prefix',
  }),
  ...metricsPortSpec(9464),
  GATEWAY_HEAP_GROWING_PERCENT: nonNegativeInt({
    default: 100,
    desc: 'How far V8 lets the old generation grow past what survived its last full collection before collecting again, in percent; 0 leaves it to V8 (up to 300)',
  }),
};

/** The cluster entry (cluster.ts): how many gateway processes, and where their metrics ports start. */
export const gatewayClusterSpec = {
  GATEWAY_WORKERS: nonNegativeInt({ default: 0, desc: 'Gateway processes of `cluster.ts`; 0 means one per core' }),
  METRICS_PORT: nonNegativeInt({ default: 9464, desc: 'Metrics port of the first worker; worker i serves on METRICS_PORT + i' }),
};

export type GatewayConfig = ReturnType<typeof loadGatewayConfig>;

export function loadGatewayConfig(env: NodeJS.ProcessEnv) {
  const config = parseConfig(env, gatewaySpec);
  if (config.KEY_CACHE_TTL_MS >= 2000) throw new Error('KEY_CACHE_TTL_MS: must be under 2000 (deleted keys are refused within 2 s)');
  if (!config.GATEWAY_PLAIN_HTTP && (!config.TLS_CERT_FILE || !config.TLS_KEY_FILE)) {
    throw new Error('TLS_CERT_FILE, TLS_KEY_FILE: required unless GATEWAY_PLAIN_HTTP=true');
  }
  if (parseTimestamp(config.TIMESTAMP_EARLIEST) === null) throw new Error('TIMESTAMP_EARLIEST: must be an RFC 3339 date-time');
  if (config.RATE_LIMIT_PER_SECOND > 0 && config.RATE_LIMIT_BURST < config.RATE_LIMIT_PER_SECOND) {
    throw new Error('RATE_LIMIT_BURST: must be at least RATE_LIMIT_PER_SECOND');
  }
  return config;
}
