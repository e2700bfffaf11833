import { retentionSpec } from '@otm/shared/rollups/retention';
import {
  bool,
  infrastructureSpec,
  metricsPortSpec,
  nonNegativeInt,
  parseConfig,
  percentInt,
  plausibleSpec,
  positiveInt,
  str,
} from '@otm/shared/config';

export const ingesterSpec = {
  ...infrastructureSpec,
  INGEST_GROUP_ID: str({ default: 'otm-ingester', desc: 'Kafka consumer group' }),
  INGEST_BATCH_MAX_ROWS: positiveInt({ default: 20_000, desc: 'Rows per load unit (one ClickHouse insert per table) at most' }),
  INGEST_MAX_PENDING_ROWS: positiveInt({
    default: 10_000,
    desc: 'Rows decoded and not yet loaded, at most: the unit loading plus the next one gathering (bounds memory)',
  }),
  INGEST_MAX_PENDING_BYTES: positiveInt({
    default: 32 * 1024 * 1024,
    desc: "Bytes of those rows' records as fetched, at most (records run from a few hundred bytes to a megabyte: the bound in rows alone would not bound memory); a single larger record still loads, alone",
  }),
  INGEST_GATHER_MS: positiveInt({ default: 50, desc: 'How long a load unit waits for the chunks of other partitions' }),
  INGEST_UNIT_INTERVAL_MS: nonNegativeInt({
    default: 1000,
    desc: "The least time between the starts of two load units, unless the second is full, at its longest (fewer, larger inserts: less of ClickHouse's CPU per record, up to this much more delay)",
  }),
  INGEST_UNIT_INTERVAL_MIN_MS: nonNegativeInt({
    default: 250,
    desc: 'The shortest the least time between the starts of two load units falls to while loads are quick (at most INGEST_UNIT_INTERVAL_MS)',
  }),
  INGEST_UNIT_LOAD_SHARE: percentInt({
    default: 70,
    desc: "The interval between load units is the recent units' load time divided by this share, in percent, between INGEST_UNIT_INTERVAL_MIN_MS and INGEST_UNIT_INTERVAL_MS: shorter intervals (fresher data) while ClickHouse answers quickly, longer as its loads grow; 0 keeps INGEST_UNIT_INTERVAL_MS",
  }),
  INGEST_UNIT_FULL_RATE: nonNegativeInt({
    default: 6000,
    desc: "Rows a second at which the interval between load units is INGEST_UNIT_INTERVAL_MS whatever the load time; below it the interval is at least INGEST_UNIT_INTERVAL_MS times the recent rows a second divided by this, so units grow with the rate (short and fresh at a moderate rate, as large as the longest interval makes them near the pipeline's top rate, where each insert's fixed part costs the most); 0: the load time alone",
  }),
  INGEST_PARALLEL_VIEWS: bool({
    default: true,
    desc: "ClickHouse feeds an insert's materialized views (the rollups) at once rather than one after the other (parallel_view_processing): the same work, an insert answered sooner; false for a ClickHouse short of cores",
  }),
  INGEST_CLICKHOUSE_PRIORITY: nonNegativeInt({
    default: 2,
    desc: "The priority of the ingester's queries in ClickHouse (its priority setting: the smaller number first; 0 takes no part). Above the analytics API's (ANALYTICS_CLICKHOUSE_PRIORITY, 1), the look-up before a load unit's inserts and the jobs' queries wait while an analytics query runs, a second at a time (an insert already running goes on): a dashboard answers sooner on a busy server, the records wait in Kafka meanwhile. 0: loads never wait",
  }),
  INGEST_BATCH_MAX_WAIT_MS: positiveInt({ default: 250, desc: 'How long a fetch waits to fill a batch' }),
  INGEST_FETCH_MAX_BYTES: positiveInt({ default: 1024 * 1024, desc: 'Bytes fetched per partition at most (bounds memory)' }),
  INGEST_CONCURRENCY: positiveInt({ default: 6, desc: 'Partition batches taken at once (and loaded together)' }),
  INGEST_RETRY_MAX_MS: positiveInt({ default: 5000, desc: 'Longest pause between retries of a failed dependency' }),
  INGEST_SESSION_TIMEOUT_MS: positiveInt({ default: 10_000, desc: 'Consumer group session timeout' }),
  DEDUPE_TTL_SECONDS: positiveInt({ default: 86_400, desc: 'How long an event key is remembered in Redis' }),
  INGEST_WITHOUT_REDIS: bool({
    default: true,
    desc: 'Keep loading while Redis is unreachable: duplicates dropped by ClickHouse\'s key look-up alone, the erasure fence read from ClickHouse (docs/ingester.md, "When Redis is down"); false waits for Redis. Off in cluster mode',
  }),
  INGEST_PENDING_MARKS_MAX: positiveInt({
    default: 200_000,
    desc: 'Dedupe marks of records loaded while Redis was down, kept to be written when it answers again, at most (the oldest go first; bounds memory)',
  }),
  PRICE_TABLE_FILE: str({
    default: '',
    desc: 'JSON file of price overrides (negotiated or private prices, optionally dated) that win over the price database: docs/pricing.md',
  }),
  ...plausibleSpec,
  OUTPUT_TOKENS_PER_SEC_MAX: positiveInt({
    default: 100_000,
    desc: 'Derived output tokens per second at most; beyond it the value is stored as null and named in anomalies (the record is kept)',
  }),
  ...retentionSpec,
  ROLLUP_DAY_BUILD_DELAY_MS: positiveInt({
    default: 900_000,
    desc: "How long after a UTC day ends the ingesters' job builds its day rollups from the hours (one ingester at a time, checked every 5 minutes); a record of a built day that arrives later marks the day, which analytics read from its hours until the job builds it again",
  }),
  ...metricsPortSpec(9465, 'Prometheus metrics, /healthz and /readyz'),
  INGEST_HEAP_GROWING_PERCENT: nonNegativeInt({
    default: 100,
    desc: 'How far V8 lets the old generation grow past what survived its last full collection before collecting again, in percent; 0 leaves it to V8 (which, under the 256 MB old-space cap, lets it grow by about half: a full collection every fifth of a second under a backlog)',
  }),
  CANARY_API_KEY: str({
    default: '',
    desc: 'API key of the freshness canary (its records never reach analytics); empty turns the canary off',
  }),
  CANARY_GATEWAY_URL: str({ default: 'https://127.0.0.1:8443', desc: "The ingest endpoint's base URL the canary sends to" }),
  CANARY_CA_FILE: str({ default: '', desc: "PEM file the canary trusts for the gateway's certificate (default: the system's)" }),
  CANARY_INTERVAL_MS: positiveInt({ default: 15_000, desc: 'Pause between canary probes' }),
  CANARY_TIMEOUT_MS: positiveInt({ default: 300_000, desc: 'A probe not queryable after this long counts as a timeout' }),
  INGEST_MIGRATIONS_UP_TO: str({
    default: '',
    desc: 'Tests only: apply the ClickHouse migrations up to this file name, as an installation from before the later ones',
  }),
  INGEST_FAULT_INJECTION: str({
    default: '',
    choices: ['', 'consumer-crash', 'commit-before-load', 'skip-dedupe', 'undecodable-snappy'],
    desc: "Tests only: consumer-crash throws a fatal error out of the first batch; commit-before-load commits offsets before the ClickHouse insert; skip-dedupe loads every record as new, asking neither Redis's marks nor ClickHouse's stored keys (two deliberately broken builds, for the chaos suite to catch: one loses records, the other counts a redelivered record twice); undecodable-snappy makes every snappy batch fail to decode.",
  }),
};

export function loadIngesterConfig(env: NodeJS.ProcessEnv) {
  return parseConfig(env, ingesterSpec);
}

type IngesterConfig = ReturnType<typeof loadIngesterConfig>;

/** What one call can plausibly report; beyond it enrich stores a value as null. */
export function plausibleBoundsFrom(config: IngesterConfig) {
  return {
    maxTokens: config.TOKENS_MAX,
    maxCallMs: config.CALL_DURATION_MAX_HOURS * 3_600_000,
    maxOutputTokensPerSec: config.OUTPUT_TOKENS_PER_SEC_MAX,
  };
}

/** The runner's options (consumer.ts, ConsumerOptions) from the configuration. */
export function consumerOptionsFrom(config: IngesterConfig) {
  return {
    topic: config.USAGE_TOPIC,
    maxBatchRows: config.INGEST_BATCH_MAX_ROWS,
    maxPendingRows: config.INGEST_MAX_PENDING_ROWS,
    maxPendingBytes: config.INGEST_MAX_PENDING_BYTES,
    partitionsConcurrently: config.INGEST_CONCURRENCY,
    gatherMs: config.INGEST_GATHER_MS,
    unitIntervalMs: config.INGEST_UNIT_INTERVAL_MS,
    unitIntervalMinMs: config.INGEST_UNIT_INTERVAL_MIN_MS,
    unitLoadShare: config.INGEST_UNIT_LOAD_SHARE / 100,
    unitFullRate: config.INGEST_UNIT_FULL_RATE,
    retryInitialMs: 100,
    retryMaxMs: config.INGEST_RETRY_MAX_MS,
    injectCrash: config.INGEST_FAULT_INJECTION === 'consumer-crash',
    unsafeCommitBeforeLoad: config.INGEST_FAULT_INJECTION === 'commit-before-load',
  };
}

/** Whether migration `name` (its file name's number, '0013') applies: every one but in tests holding an installation to earlier ones. */
export function migrationApplies(config: IngesterConfig, name: string): boolean {
  return !config.INGEST_MIGRATIONS_UP_TO || config.INGEST_MIGRATIONS_UP_TO >= name;
}

/**
 * Loading without Redis (without-redis.ts): not in cluster mode, where a read of the
 * fence's copy (migration 0013) may reach a replica the last insert has not.
 */
export function withoutRedisFrom(config: IngesterConfig) {
  return {
    enabled: config.INGEST_WITHOUT_REDIS && !config.CLICKHOUSE_CLUSTER && migrationApplies(config, '0013'),
    pendingMarksMax: config.INGEST_PENDING_MARKS_MAX,
  };
}

/**
 * The settings every query of the loads' client carries: ClickHouse feeds an insert's
 * views in parallel (INGEST_PARALLEL_VIEWS), and its queries yield to the analytics API's
 * by their priority (INGEST_CLICKHOUSE_PRIORITY; ClickHouse holds back the look-ups and
 * the jobs' queries, not an insert whose rows come in its body).
 */
export function loadsQuerySettings(config: Pick<IngesterConfig, 'INGEST_PARALLEL_VIEWS' | 'INGEST_CLICKHOUSE_PRIORITY'>) {
  return {
    ...(config.INGEST_PARALLEL_VIEWS ? { parallel_view_processing: 1 } : {}),
    ...(config.INGEST_CLICKHOUSE_PRIORITY > 0 ? { priority: config.INGEST_CLICKHOUSE_PRIORITY } : {}),
  };
}
