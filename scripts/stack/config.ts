// Ports and folders of the local stack, read once from the environment.
// Defaults stay clear of the standard ports so a Redis or ClickHouse already on
// the machine never collides with ours.
import path from 'node:path';
import { projectRoot } from '../lib/project-root.js';

export interface StackConfig {
  readonly root: string;
  readonly dir: string;
  /** Where the downloaded Kafka jars and Apicurio app live: the default profile's folder, shared by every profile. */
  readonly installDir: string;
  /**
   * The secure profile: every service with TLS and authentication only (Kafka SASL_SSL with
   * SCRAM, and an mTLS listener; the registry over HTTPS with basic auth; ClickHouse over HTTPS
   * with a migrating, a writing and a reading user; Redis over TLS with an ACL user), its own
   * CA and passwords under `dir` (scripts/stack/secure.ts).
   */
  readonly secure: boolean;
  /** Secure profile: the broker's mTLS (SSL, client certificate required) listener. */
  readonly kafkaMtlsPort: number;
  readonly host: string;
  /** Kafka brokers (KRaft, each also a controller): 1, or 3 for the replicated profile. */
  readonly kafkaBrokers: 1 | 3;
  /** The first broker's port; broker n listens on kafkaPort + 2 (n - 1). */
  readonly kafkaPort: number;
  readonly kafkaControllerPort: number;
  readonly kafkaHeapMb: number;
  readonly registryPort: number;
  readonly registryHeapMb: number;
  readonly redisPort: number;
  readonly clickhouseHttpPort: number;
  readonly clickhouseTcpPort: number;
  readonly clickhouseDatabase: string;
  /**
   * GiB of the single ClickHouse server's own journaled volume (scripts/stack/volume.ts;
   * a sparse image, so the most it may take); 0 keeps its data on the machine's filesystem.
   */
  readonly clickhouseVolumeGiB: number;
}

function port(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 1 || value > 65535) {
    throw new Error(`${name} must be a TCP port (1-65535), got "${raw}"`);
  }
  return value;
}

function brokerCount(env: NodeJS.ProcessEnv): 1 | 3 {
  const raw = env.OTM_STACK_KAFKA_BROKERS;
  if (raw === undefined || raw === '' || raw === '1') return 1;
  if (raw === '3') return 3;
  throw new Error(`OTM_STACK_KAFKA_BROKERS must be 1 or 3, got "${raw}"`);
}

function volumeGiB(env: NodeJS.ProcessEnv): number {
  const raw = env.OTM_STACK_CLICKHOUSE_VOLUME_GB;
  if (raw === undefined || raw === '') return 64;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0)
    throw new Error(`OTM_STACK_CLICKHOUSE_VOLUME_GB must be a whole number of GiB (0: none), got "${raw}"`);
  return value;
}

export function loadStackConfig(env: NodeJS.ProcessEnv): StackConfig {
  const kafkaBrokers = brokerCount(env);
  const secure = env.OTM_STACK_SECURE === '1' || env.OTM_STACK_SECURE === 'true';
  if (secure && kafkaBrokers !== 1) throw new Error('the secure profile runs one Kafka broker (OTM_STACK_KAFKA_BROKERS=1)');
  // The replicated and the secure profiles have ports and folders of their own, so one
  // never answers for another when several have run on this machine.
  const kafkaBase = secure ? 19292 : kafkaBrokers === 1 ? 19092 : 19192;
  const installDir = path.resolve(projectRoot, env.OTM_STACK_INSTALL_DIR || '.stack');
  return Object.freeze({
    root: projectRoot,
    dir: path.resolve(projectRoot, env.OTM_STACK_DIR || (secure ? '.stack/secure' : '.stack')),
    installDir,
    secure,
    host: '127.0.0.1',
    kafkaBrokers,
    kafkaPort: port(env, 'OTM_STACK_KAFKA_PORT', kafkaBase),
    kafkaControllerPort: port(env, 'OTM_STACK_KAFKA_CONTROLLER_PORT', kafkaBase + 1),
    kafkaMtlsPort: port(env, 'OTM_STACK_KAFKA_MTLS_PORT', kafkaBase + 2),
    kafkaHeapMb: port(env, 'OTM_STACK_KAFKA_HEAP_MB', 512),
    registryPort: port(env, 'OTM_STACK_REGISTRY_PORT', secure ? 18482 : 18081),
    registryHeapMb: port(env, 'OTM_STACK_REGISTRY_HEAP_MB', 384),
    redisPort: port(env, 'OTM_STACK_REDIS_PORT', secure ? 16380 : 16379),
    clickhouseHttpPort: port(env, 'OTM_STACK_CLICKHOUSE_HTTP_PORT', secure ? 18443 : 18123),
    clickhouseTcpPort: port(env, 'OTM_STACK_CLICKHOUSE_TCP_PORT', secure ? 19440 : 19000),
    clickhouseDatabase: env.OTM_STACK_CLICKHOUSE_DATABASE || 'otm',
    clickhouseVolumeGiB: volumeGiB(env),
  });
}

/** Broker `node` (1-based): its client and controller ports. */
export function kafkaNodePorts(config: StackConfig, node: number): { broker: number; controller: number } {
  return { broker: config.kafkaPort + 2 * (node - 1), controller: config.kafkaControllerPort + 2 * (node - 1) };
}

/** The addresses services and tests use to reach this stack. */
export function stackAddresses(config: StackConfig) {
  const brokers = Array.from({ length: config.kafkaBrokers }, (_, index) => `${config.host}:${kafkaNodePorts(config, index + 1).broker}`);
  // The secure profile's schemes (its credentials and CA: secureServiceEnv in secure.ts).
  const tls = config.secure ? 's' : '';
  return {
    KAFKA_BROKERS: brokers.join(','),
    SCHEMA_REGISTRY_URL: `http${tls}://${config.host}:${config.registryPort}/apis/ccompat/v7`,
    REDIS_URL: `redis${tls}://${config.host}:${config.redisPort}`,
    CLICKHOUSE_URL: `http${tls}://${config.host}:${config.clickhouseHttpPort}`,
    CLICKHOUSE_DATABASE: config.clickhouseDatabase,
  };
}
