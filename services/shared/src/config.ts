// Configuration is parsed once, at startup, from the environment, validated and
// frozen. A bad value stops startup with a message naming the variable. Nothing
// else in the project reads process.env.
import { cleanEnv, makeValidator, num, port, str, bool, url, type CleanedEnv } from 'envalid';

export { bool, num, port, str, url };

export const positiveInt = makeValidator<number>((input) => {
  const value = Number(input);
  if (!Number.isInteger(value) || value < 1) throw new Error(`must be a positive integer, got "${input}"`);
  return value;
});

export const nonNegativeInt = makeValidator<number>((input) => {
  const value = Number(input);
  if (!Number.isInteger(value) || value < 0) throw new Error(`must be a non-negative integer, got "${input}"`);
  return value;
});

/** A whole percentage, 0 to 100. */
export const percentInt = makeValidator<number>((input) => {
  const value = Number(input);
  if (!Number.isInteger(value) || value < 0 || value > 100) throw new Error(`must be a whole percentage from 0 to 100, got "${input}"`);
  return value;
});

export const csv = makeValidator<string[]>((input) => {
  const items = input
    .split(',')
    .map((item) => item.trim())
    .filter(Boolean);
  if (items.length === 0) throw new Error('must be a comma-separated list with at least one item');
  return items;
});

/** The metrics port of a service that serves `/metrics` apart from its API (`serves`: what else is on it). */
export function metricsPortSpec(defaultPort: number, serves = 'Prometheus metrics') {
  return {
    METRICS_HOST: str({ default: '127.0.0.1', desc: `Bind address of the ${serves} port` }),
    METRICS_PORT: nonNegativeInt({ default: defaultPort, desc: `${serves} port; 0 picks a free one` }),
    METRICS_TOKEN: str({
      default: '',
      desc: 'Bearer token `/metrics` requires (Prometheus: `authorization: { credentials: <token> }`); empty: none. The health checks need none',
    }),
  };
}

/** Validators shared by every service that talks to the stack. */
/**
 * What one call can plausibly report (docs/limits.md, "Plausible values"): the gateway
 * refuses a record beyond them; the ingester stores a record beyond them that came
 * another way with the value nulled and named in its anomalies. Keep both services alike.
 */
export const plausibleSpec = {
  TOKENS_MAX: positiveInt({ default: 100_000_000, desc: 'Each token count of a record at most (input, output, total and their detail)' }),
  CALL_DURATION_MAX_HOURS: positiveInt({
    default: 48,
    desc: 'timing.latencyMs, and the time from timing.startTime to the first and to the last token, at most',
  }),
};

export const infrastructureSpec = {
  KAFKA_BROKERS: csv({ default: ['127.0.0.1:19092'], desc: 'Kafka bootstrap brokers, comma-separated' }),
  KAFKA_CLIENT_ID: str({ default: 'otm-telemetry', desc: 'Prefix of the Kafka client ids (the service name is appended)' }),
  KAFKA_SECURITY_PROTOCOL: str({
    default: 'PLAINTEXT',
    choices: ['PLAINTEXT', 'SSL', 'SASL_PLAINTEXT', 'SASL_SSL'],
    desc: "Kafka listener security, as Kafka's own clients name it: SSL (TLS, with a client certificate for mTLS), SASL_SSL (TLS and a SASL login)",
  }),
  KAFKA_SASL_MECHANISM: str({
    default: '',
    choices: ['', 'PLAIN', 'SCRAM-SHA-256', 'SCRAM-SHA-512', 'OAUTHBEARER', 'AWS_MSK_IAM'],
    desc: "SASL mechanism with SASL_SSL or SASL_PLAINTEXT; AWS_MSK_IAM: Amazon MSK's IAM authentication (OAUTHBEARER tokens signed with the default AWS credential chain, in KAFKA_AWS_REGION)",
  }),
  KAFKA_AWS_REGION: str({
    default: '',
    desc: "AWS_MSK_IAM: the MSK cluster's region (e.g. eu-west-1), which its tokens are signed for",
  }),
  KAFKA_SASL_USERNAME: str({ default: '', desc: 'SASL user (PLAIN, SCRAM); a managed Kafka calls it the API key' }),
  KAFKA_SASL_PASSWORD: str({ default: '', desc: 'SASL password (PLAIN, SCRAM); a managed Kafka calls it the API secret' }),
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: str({
    default: '',
    desc: 'OAUTHBEARER: a file holding the token, read again at every authentication (a sidecar may refresh it)',
  }),
  KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: str({
    default: '',
    desc: 'OAUTHBEARER: a shell command printing a fresh token on its first line, run at every authentication',
  }),
  KAFKA_TLS_CA_FILE: str({ default: '', desc: "PEM file of the CAs that sign the brokers' certificates; empty: the system's" }),
  KAFKA_TLS_CERT_FILE: str({ default: '', desc: 'PEM client certificate (mTLS), with KAFKA_TLS_KEY_FILE' }),
  KAFKA_TLS_KEY_FILE: str({ default: '', desc: 'PEM key of the client certificate' }),
  USAGE_TOPIC: str({ default: 'telemetry.usage.v1', desc: 'Kafka topic of queued usage records' }),
  USAGE_TOPIC_PARTITIONS: positiveInt({ default: 6, desc: 'Partitions when the topic is created' }),
  ERASURE_TOPIC: str({
    default: 'telemetry.usage.v1.erasures',
    desc: "Compacted Kafka topic announcing every erasure of a user's data, keyed by environment and user (docs/topic-contract.md)",
  }),
  DLQ_TOPIC: str({ default: 'telemetry.usage.v1.dlq', desc: 'Kafka topic of dead-lettered records, with the reason in headers' }),
  SCHEMA_REGISTRY_URL: url({ default: 'http://127.0.0.1:18081/apis/ccompat/v7', desc: 'Confluent-compatible schema registry API' }),
  SCHEMA_REGISTRY_USERNAME: str({ default: '', desc: 'Registry basic-auth user (a managed registry calls it the API key); empty: none' }),
  SCHEMA_REGISTRY_PASSWORD: str({ default: '', desc: 'Registry basic-auth password' }),
  SCHEMA_REGISTRY_CA_FILE: str({ default: '', desc: "PEM file of the CAs that sign an https registry's certificate; empty: the system's" }),
  SCHEMA_SUBJECT: str({ default: 'telemetry.usage.v1-value', desc: 'Registry subject of the queued-record schema' }),
  SCHEMA_REGISTRY_REGISTER: bool({
    default: true,
    desc: "Register the schemas this release writes and set their subjects' compatibility at start (rights to write the registry); false: only look them up (rights to read), and fail at start naming the subject when one is not registered (npm run register-schemas registers them)",
  }),
  REDIS_URL: url({ default: 'redis://127.0.0.1:16379', desc: 'Redis: API keys, revocation messages, dedupe keys' }),
  REDIS_TLS_CA_FILE: str({
    default: '',
    desc: "PEM file of the CAs that sign a rediss:// server's certificate; empty: the system's. User and password go in REDIS_URL (rediss://user:password@host:port)",
  }),
  REDIS_KEY_PREFIX: str({ default: 'otm:', desc: 'Prefix of every Redis key and channel' }),
  REDIS_SENTINEL_MASTER: str({
    default: '',
    desc: "The master's name at a Redis Sentinel: REDIS_URL then names the Sentinel (its user and password are the master's), and the connection follows a failover",
  }),
  REDIS_CLUSTER: bool({
    default: false,
    desc: 'REDIS_URL names a node (or the configuration endpoint) of a Redis Cluster: the other nodes are found from it, and the keys go under REDIS_KEY_PREFIX in braces (a hash tag)',
  }),
  CLICKHOUSE_URL: url({ default: 'http://127.0.0.1:18123', desc: 'ClickHouse HTTP interface' }),
  CLICKHOUSE_DATABASE: str({ default: 'otm', desc: 'Database of the usage tables and rollups (created by the migrations)' }),
  CLICKHOUSE_USER: str({ default: 'default', desc: 'ClickHouse user' }),
  CLICKHOUSE_PASSWORD: str({ default: '', desc: 'ClickHouse password' }),
  CLICKHOUSE_CA_FILE: str({
    default: '',
    desc: "PEM file of the CAs that sign an https CLICKHOUSE_URL's certificate; empty: the system's",
  }),
  CLICKHOUSE_CLUSTER: str({
    default: '',
    desc: 'Cluster mode: the cluster (remote_servers) whose replicated local tables and Distributed tables the migrations make and the services use (docs/clickhouse-cluster.md); empty for one server',
  }),
  MIGRATE_ON_START: bool({
    default: true,
    desc: 'Apply the ClickHouse migrations at start (needs DDL rights); false: only check that `npm run migrate` has applied them all, and stop when not (services running as least-privilege users)',
  }),
  LOG_LEVEL: str({ default: 'info', choices: ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] }),
};

export class ConfigError extends Error {}

/** Parses env against spec; throws ConfigError naming each bad variable. */
export function parseConfig<S extends Record<string, unknown>>(env: NodeJS.ProcessEnv, spec: S): Readonly<CleanedEnv<S>> {
  // envalid's default reporter exits the process; ours throws so callers and tests decide.
  return cleanEnv(env, spec as never, {
    reporter: ({ errors }) => {
      const names = Object.entries(errors);
      if (names.length === 0) return;
      throw new ConfigError(`invalid configuration: ${names.map(([name, error]) => `${name}: ${(error as Error).message}`).join('; ')}`);
    },
  }) as Readonly<CleanedEnv<S>>;
}
