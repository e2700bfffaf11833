// The secure profile's material: a CA of its own, a server certificate for loopback
// (localhost, 127.0.0.1, ::1) that every dependency presents, a client certificate for
// Kafka's mTLS listener, and one random password per user. Made once under the
// profile's folder (openssl, from Debian) and kept; `npm run stack -- down` leaves them.
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { stackAddresses, type StackConfig } from './config.js';

export interface SecureMaterial {
  /** PEM files. */
  caFile: string;
  serverCertFile: string;
  serverKeyFile: string;
  /** Key and certificate chain in one PEM file: Kafka's PEM keystore. */
  serverKeystoreFile: string;
  clientCertFile: string;
  clientKeyFile: string;
  passwords: SecurePasswords;
}

/**
 * Every user of the profile. Kafka: SCRAM users `otm` (the operator: tooling, the
 * tests' own clients), `otm-broker` (the broker itself), one per service with only its
 * rights (`otm-gateway`, `otm-ingester`, `otm-admin`: kafka-acls.ts), PLAIN user `otm-plain`.
 */
export interface SecurePasswords {
  kafkaBroker: string;
  kafkaServices: string;
  kafkaGateway: string;
  kafkaIngester: string;
  kafkaAdmin: string;
  kafkaPlain: string;
  registry: string;
  redis: string;
  /** A Redis Cluster's administrator (scripts/stack/redis-cluster.ts: it makes the cluster). */
  redisAdmin: string;
  clickhouseDefault: string;
  clickhouseMigrator: string;
  clickhouseWriter: string;
  clickhouseReader: string;
}

export const SECURE_USERS = {
  kafkaBroker: 'otm-broker',
  kafkaServices: 'otm',
  kafkaGateway: 'otm-gateway',
  kafkaIngester: 'otm-ingester',
  kafkaAdmin: 'otm-admin',
  kafkaPlain: 'otm-plain',
  registry: 'otm',
  redis: 'otm',
  redisAdmin: 'otm-redis-admin',
  clickhouseMigrator: 'otm_migrator',
  clickhouseWriter: 'otm_writer',
  clickhouseReader: 'otm_reader',
} as const;

function openssl(args: string[], cwd: string): void {
  const result = spawnSync('openssl', args, { cwd, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`openssl ${args[0]} failed: ${result.stderr}`);
}

/** The profile's CA, certificates and passwords, made when missing. */
export function ensureSecureMaterial(config: StackConfig): SecureMaterial {
  const dir = path.join(config.dir, 'certs');
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const file = (name: string) => path.join(dir, name);
  if (!fs.existsSync(file('ca.crt'))) {
    const days = '825';
    openssl(
      [
        'req',
        '-x509',
        '-newkey',
        'rsa:2048',
        '-nodes',
        '-keyout',
        'ca.key',
        '-out',
        'ca.crt',
        '-days',
        days,
        '-subj',
        '/CN=otm-telemetry local CA',
        '-addext',
        'basicConstraints=critical,CA:TRUE',
        '-addext',
        'keyUsage=critical,keyCertSign,cRLSign',
      ],
      dir,
    );
    const issue = (name: string, subject: string, extensions: string) => {
      openssl(['req', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-out', `${name}.csr`, '-subj', subject], dir);
      fs.writeFileSync(file(`${name}.ext`), extensions);
      openssl(
        [
          'x509',
          '-req',
          '-in',
          `${name}.csr`,
          '-CA',
          'ca.crt',
          '-CAkey',
          'ca.key',
          '-CAcreateserial',
          '-out',
          `${name}.crt`,
          '-days',
          days,
          '-extfile',
          `${name}.ext`,
        ],
        dir,
      );
      fs.rmSync(file(`${name}.csr`));
      fs.rmSync(file(`${name}.ext`));
    };
    issue('server', '/CN=localhost', 'subjectAltName=DNS:localhost,IP:127.0.0.1,IP:::1\nextendedKeyUsage=serverAuth,clientAuth\n');
    issue('client', '/CN=otm-client', 'extendedKeyUsage=clientAuth\n');
    fs.writeFileSync(
      file('server-keystore.pem'),
      fs.readFileSync(file('server.key'), 'utf8') + fs.readFileSync(file('server.crt'), 'utf8'),
    );
    for (const name of ['ca.key', 'server.key', 'client.key', 'server-keystore.pem']) fs.chmodSync(file(name), 0o600);
  }
  const passwordsFile = file('passwords.json');
  const random = () => randomBytes(18).toString('base64url');
  if (!fs.existsSync(passwordsFile)) {
    const passwords: SecurePasswords = {
      kafkaBroker: random(),
      kafkaServices: random(),
      kafkaGateway: random(),
      kafkaIngester: random(),
      kafkaAdmin: random(),
      kafkaPlain: random(),
      registry: random(),
      redis: random(),
      redisAdmin: random(),
      clickhouseDefault: random(),
      clickhouseMigrator: random(),
      clickhouseWriter: random(),
      clickhouseReader: random(),
    };
    fs.writeFileSync(passwordsFile, JSON.stringify(passwords, null, 2), { mode: 0o600 });
  }
  return {
    caFile: file('ca.crt'),
    serverCertFile: file('server.crt'),
    serverKeyFile: file('server.key'),
    serverKeystoreFile: file('server-keystore.pem'),
    clientCertFile: file('client.crt'),
    clientKeyFile: file('client.key'),
    passwords: withPasswordsAdded(passwordsFile, random),
  };
}

/** The passwords on file, with one made for each user added since they were written (the file rewritten then). */
function withPasswordsAdded(passwordsFile: string, random: () => string): SecurePasswords {
  const passwords = JSON.parse(fs.readFileSync(passwordsFile, 'utf8')) as Partial<SecurePasswords>;
  const added = (['kafkaGateway', 'kafkaIngester', 'kafkaAdmin', 'redisAdmin'] as const).filter((user) => passwords[user] === undefined);
  for (const user of added) passwords[user] = random();
  if (added.length > 0) fs.writeFileSync(passwordsFile, JSON.stringify(passwords, null, 2), { mode: 0o600 });
  return passwords as SecurePasswords;
}

/** Who a process is: a service (its own Kafka principal), `migrate` (npm run migrate), or `operator` (tooling: the Kafka operator principal, the writing ClickHouse user). */
export type SecureRole = 'migrate' | 'gateway' | 'ingester' | 'admin' | 'operator';

/** The Kafka user each role signs in as. */
const KAFKA_USER_OF: Record<SecureRole, { user: keyof typeof SECURE_USERS & keyof SecurePasswords }> = {
  gateway: { user: 'kafkaGateway' },
  ingester: { user: 'kafkaIngester' },
  admin: { user: 'kafkaAdmin' },
  migrate: { user: 'kafkaServices' },
  operator: { user: 'kafkaServices' },
};

/**
 * The variables a service needs on the secure profile: every dependency over TLS with
 * the profile's CA and credentials; ClickHouse as the user of the service's role (the
 * ingester and admin jobs write, the analytics API reads, only `npm run migrate` changes
 * the schema, so the services start with MIGRATE_ON_START=false).
 */
export function secureServiceEnv(config: StackConfig, role: SecureRole): Record<string, string> {
  const material = ensureSecureMaterial(config);
  const { passwords } = material;
  const addresses = stackAddresses(config);
  const redisUrl = new URL(addresses.REDIS_URL);
  redisUrl.username = SECURE_USERS.redis;
  redisUrl.password = passwords.redis;
  const clickhouseUser =
    role === 'migrate'
      ? { CLICKHOUSE_USER: SECURE_USERS.clickhouseMigrator, CLICKHOUSE_PASSWORD: passwords.clickhouseMigrator }
      : { CLICKHOUSE_USER: SECURE_USERS.clickhouseWriter, CLICKHOUSE_PASSWORD: passwords.clickhouseWriter };
  return {
    ...addresses,
    KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
    KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
    ...kafkaOf(config, role),
    KAFKA_TLS_CA_FILE: material.caFile,
    SCHEMA_REGISTRY_USERNAME: SECURE_USERS.registry,
    SCHEMA_REGISTRY_PASSWORD: passwords.registry,
    SCHEMA_REGISTRY_CA_FILE: material.caFile,
    REDIS_URL: redisUrl.toString(),
    REDIS_TLS_CA_FILE: material.caFile,
    CLICKHOUSE_CA_FILE: material.caFile,
    ...clickhouseUser,
    ...(role === 'migrate' ? {} : { MIGRATE_ON_START: 'false' }),
    ...(role === 'admin'
      ? {
          ANALYTICS_CLICKHOUSE_USER: SECURE_USERS.clickhouseReader,
          ANALYTICS_CLICKHOUSE_PASSWORD: passwords.clickhouseReader,
          ADMIN_TLS_CERT_FILE: material.serverCertFile,
          ADMIN_TLS_KEY_FILE: material.serverKeyFile,
        }
      : {}),
  };
}

/** A role's Kafka user and password. */
function kafkaOf(config: StackConfig, role: SecureRole): { KAFKA_SASL_USERNAME: string; KAFKA_SASL_PASSWORD: string } {
  const { user } = KAFKA_USER_OF[role];
  return { KAFKA_SASL_USERNAME: SECURE_USERS[user], KAFKA_SASL_PASSWORD: ensureSecureMaterial(config).passwords[user] };
}

/** `npm run stack -- env --secure`: what the services need, with the migrating user's settings as a comment. */
export function secureEnvLines(config: StackConfig): string[] {
  const service = { ...secureServiceEnv(config, 'ingester'), ...secureServiceEnv(config, 'admin'), ...kafkaOf(config, 'operator') };
  const migrate = secureServiceEnv(config, 'migrate');
  const principals = (['gateway', 'ingester', 'admin'] as const).map((role) => {
    const kafka = kafkaOf(config, role);
    return `${role}: KAFKA_SASL_USERNAME=${kafka.KAFKA_SASL_USERNAME} KAFKA_SASL_PASSWORD=${kafka.KAFKA_SASL_PASSWORD}`;
  });
  return [
    ...Object.entries(service).map(([name, value]) => `${name}=${value}`),
    `# Kafka: the operator's user above; each service signs in as its own, with only its ACLs: ${principals.join('; ')}`,
    `# npm run migrate runs as the migrating user: CLICKHOUSE_USER=${migrate.CLICKHOUSE_USER} CLICKHOUSE_PASSWORD=${migrate.CLICKHOUSE_PASSWORD}`,
    '# the gateway needs no ClickHouse variables; ADMIN_TLS_* and ANALYTICS_CLICKHOUSE_* are for the admin service',
  ];
}
