import { infrastructureSpec, metricsPortSpec, nonNegativeInt, parseConfig, positiveInt, str } from '@otm/shared/config';
import { connectionLimitsSpec } from '@otm/shared/http-edge';
import { TWO_LEVEL_GROUPS } from './analytics.js';

export const adminSpec = {
  ...infrastructureSpec,
  ...connectionLimitsSpec,
  ADMIN_HOST: str({ default: '127.0.0.1', desc: 'Bind address of the admin API and dashboard' }),
  ADMIN_PORT: nonNegativeInt({ default: 8480, desc: 'Port of the admin API and dashboard; 0 picks a free one' }),
  ADMIN_TLS_CERT_FILE: str({
    default: '',
    desc: 'PEM certificate of the admin API and dashboard (HTTPS), with ADMIN_TLS_KEY_FILE; empty: plain HTTP, for loopback or behind a TLS-terminating proxy',
  }),
  ADMIN_TLS_KEY_FILE: str({ default: '', desc: 'PEM private key of ADMIN_TLS_CERT_FILE' }),
  // Its metrics on a port of their own too (also at GET /metrics on the admin port, behind the admin token).
  ...metricsPortSpec(9466),
  INGEST_GROUP_ID: str({ default: 'otm-ingester', desc: "The ingesters' consumer group, whose lag GET /v1/pipeline reports" }),
  ERASURE_TOMBSTONE_DAYS: positiveInt({
    default: 8,
    desc: "Days an erased user's tombstone lives (ingesters drop their older records still in Kafka): longer than the usage topic's retention",
  }),
  ERASURE_MUTATION_TIMEOUT_MS: positiveInt({
    default: 300_000,
    desc: 'How long an erasure waits for one ClickHouse deletion before the job fails',
  }),
  ANALYTICS_QUERY_TIMEOUT_MS: positiveInt({
    default: 10_000,
    desc: 'Execution limit of one analytics query (ClickHouse max_execution_time, whole seconds); past it the answer is 504 QueryTimeout',
  }),
  ANALYTICS_MAX_ROWS_TO_READ: nonNegativeInt({
    default: 0,
    desc: 'Rows one analytics query may read (ClickHouse max_rows_to_read); past it the answer is 504 QueryTimeout. 0: no limit',
  }),
  ANALYTICS_GROUP_BY_TWO_LEVEL_THRESHOLD: positiveInt({
    default: TWO_LEVEL_GROUPS,
    desc: "Groups one thread of an analytics query aggregates in a plain hash table before it switches to a two-level one (ClickHouse group_by_two_level_threshold; ClickHouse's own 100,000 made top users 1.7 times slower on two cores once every user was active)",
  }),
  ANALYTICS_CLICKHOUSE_PRIORITY: nonNegativeInt({
    default: 1,
    desc: "The priority of analytics queries in ClickHouse (its priority setting: the smaller number first; 0 takes no part): while one runs, the queries of a larger number (the ingester's loads, INGEST_CLICKHOUSE_PRIORITY) wait a second at a time, for as long as analytics queries run (an insert already running goes on). 0: analytics queries make nothing wait",
  }),
  ANALYTICS_CLICKHOUSE_USER: str({
    default: '',
    desc: 'ClickHouse user the analytics API reads as (a read-only one, docs/production.md); empty: CLICKHOUSE_USER',
  }),
  ANALYTICS_CLICKHOUSE_PASSWORD: str({ default: '', desc: 'Password of ANALYTICS_CLICKHOUSE_USER' }),
  ADMIN_TOKEN: str({ desc: 'Bearer token for the admin API and dashboard (at least 32 characters)' }),
  ADMIN_TOKEN_NEXT: str({
    default: '',
    desc: 'A second admin token accepted beside ADMIN_TOKEN while tokens are rotated (at least 32 characters; empty: none)',
  }),
};

export function loadAdminConfig(env: NodeJS.ProcessEnv) {
  const config = parseConfig(env, adminSpec);
  if (config.ADMIN_TOKEN.length < 32) throw new Error('ADMIN_TOKEN: must be at least 32 characters');
  if (config.ADMIN_TOKEN_NEXT !== '' && config.ADMIN_TOKEN_NEXT.length < 32)
    throw new Error('ADMIN_TOKEN_NEXT: must be at least 32 characters');
  if (Boolean(config.ADMIN_TLS_CERT_FILE) !== Boolean(config.ADMIN_TLS_KEY_FILE))
    throw new Error('ADMIN_TLS_CERT_FILE, ADMIN_TLS_KEY_FILE: set both (HTTPS) or neither (plain HTTP)');
  return config;
}
