// npm start: bring up the local stack, apply migrations, then run the gateway, the
// ingester and the admin service (API + dashboard) against it until Ctrl-C.
//
//   npm start [-- --kafka-brokers 3 | --secure]
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { prettyFactory } from 'pino-pretty';
import { Command, Option } from 'commander';
import { loadStackConfig, stackAddresses } from './stack/config.js';
import { stackUp } from './stack/services.js';
import { DEFAULT_PIPELINE_NAMES, preparePipelineTopics } from './stack/kafka-acls.js';
import { ensureLocalCertificate } from './local-tls.js';
import { ensureSecureMaterial, secureServiceEnv, type SecureRole } from './stack/secure.js';
import { superviseService, SOURCE_FLAGS, type SupervisedService } from './lib/service-process.js';
import { createRedis } from '@otm/shared/redis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { hashKey } from '@otm/shared/keys/key-format';

const options = new Command('start')
  .description('Start the local stack and the services, supervised, until Ctrl-C')
  .addOption(
    new Option('--kafka-brokers <n>', 'Kafka brokers: 1, or 3 (replication factor 3, min.insync.replicas 2)')
      .choices(['1', '3'])
      .default('1')
      .env('OTM_STACK_KAFKA_BROKERS'),
  )
  .option(
    '--secure',
    'the secure profile: every dependency with TLS and authentication only, the admin service over HTTPS (docs/production.md)',
  )
  .parse(process.argv)
  .opts<{ kafkaBrokers: string; secure?: boolean }>();
const stack = loadStackConfig({
  ...process.env,
  OTM_STACK_KAFKA_BROKERS: options.kafkaBrokers,
  OTM_STACK_SECURE: options.secure ? '1' : '',
});
await stackUp(stack);
const secureMaterial = stack.secure ? ensureSecureMaterial(stack) : undefined;

const tokenFile = path.join(stack.dir, 'admin-token');
if (!fs.existsSync(tokenFile)) fs.writeFileSync(tokenFile, randomBytes(32).toString('base64url'), { mode: 0o600 });
const adminToken = process.env.ADMIN_TOKEN || fs.readFileSync(tokenFile, 'utf8').trim();

// The secure profile's gateway shows the certificate its CA signed (one CA to trust for everything).
const tls =
  process.env.TLS_CERT_FILE && process.env.TLS_KEY_FILE
    ? { certFile: process.env.TLS_CERT_FILE, keyFile: process.env.TLS_KEY_FILE }
    : secureMaterial
      ? { certFile: secureMaterial.serverCertFile, keyFile: secureMaterial.serverKeyFile }
      : await ensureLocalCertificate(path.join(stack.dir, 'tls'));
const caFile = secureMaterial?.caFile ?? tls.certFile;

// The stack's addresses (and on the secure profile its credentials, per service), unless
// the caller pointed a variable elsewhere.
const envOf = (role: SecureRole): NodeJS.ProcessEnv => {
  const env: NodeJS.ProcessEnv = {
    ...(stack.secure ? secureServiceEnv(stack, role) : stackAddresses(stack)),
    ...process.env,
    ADMIN_TOKEN: adminToken,
    TLS_CERT_FILE: tls.certFile,
    TLS_KEY_FILE: tls.keyFile,
  };
  return env;
};
const env = envOf('ingester');
// The secure profile authorizes every Kafka request: the topics the services were given
// and their ACLs, made by the operator (scripts/stack/kafka-acls.ts).
if (stack.secure) {
  await preparePipelineTopics(
    stack,
    {
      usageTopic: env.USAGE_TOPIC ?? DEFAULT_PIPELINE_NAMES.usageTopic,
      dlqTopic: env.DLQ_TOPIC ?? DEFAULT_PIPELINE_NAMES.dlqTopic,
      erasureTopic: env.ERASURE_TOPIC ?? DEFAULT_PIPELINE_NAMES.erasureTopic,
      ingestGroup: env.INGEST_GROUP_ID ?? DEFAULT_PIPELINE_NAMES.ingestGroup,
    },
    env.USAGE_TOPIC_PARTITIONS ? Number(env.USAGE_TOPIC_PARTITIONS) : undefined,
  );
}

// The freshness canary (the ingester's probe through the public endpoint) runs with a
// key of its own, created once and kept beside the admin token.
if (!env.CANARY_API_KEY) {
  env.CANARY_API_KEY = await canaryKey(path.join(stack.dir, 'canary-key'), env.REDIS_URL!, env.REDIS_KEY_PREFIX ?? 'otm:');
  env.CANARY_GATEWAY_URL ??= `https://${env.GATEWAY_HOST ?? '127.0.0.1'}:${env.GATEWAY_PORT ?? 8443}`;
  env.CANARY_CA_FILE ??= caFile;
}

async function canaryKey(file: string, redisUrl: string, prefix: string): Promise<string> {
  const redis = createRedis(redisUrl, { name: 'start', caFile: env.REDIS_TLS_CA_FILE });
  await redis.connect();
  try {
    const store = new KeyStore(redis, prefix);
    const kept = fs.existsSync(file) ? fs.readFileSync(file, 'utf8').trim() : '';
    if (kept && (await store.findByHash(hashKey(kept)))) return kept;
    const created = await store.create({
      environment: 'prod',
      name: 'otm-canary',
      description: 'freshness canary (its records never reach analytics)',
    });
    fs.writeFileSync(file, created.key, { mode: 0o600 });
    return created.key;
  } finally {
    redis.disconnect();
  }
}

const migrate = spawn(process.execPath, [...SOURCE_FLAGS, path.join(stack.root, 'scripts/migrate.ts')], {
  env: envOf('migrate'),
  stdio: 'inherit',
});
const migrated = await new Promise<number | null>((resolve) => migrate.on('exit', resolve));
if (migrated !== 0) throw new Error('migrations failed');

const services = ['gateway', 'ingester', 'admin'] as const;
type Service = (typeof services)[number];
// Supervision (decisions.md): a service that exits is restarted with backoff (1 s,
// doubling to 30 s; back to 1 s after a minute up) and the restart is logged, while the
// others keep serving. Only Ctrl-C or SIGTERM stops them all.
const supervised = new Map<Service, SupervisedService>();
// Service logs are JSON (for machines); here they are shown one readable line each.
const pretty = prettyFactory({
  colorize: process.stdout.isTTY === true,
  translateTime: 'SYS:HH:MM:ss',
  ignore: 'pid,hostname,service,name',
  singleLine: true,
});
const readyLine: Record<Service, RegExp> = {
  gateway: /"msg":"gateway listening"/,
  ingester: /"msg":"ingester consuming"/,
  admin: /"msg":"admin listening"/,
};
const ready = new Set<Service>();
function show(name: Service, line: string): void {
  if (!ready.has(name) && readyLine[name].test(line)) {
    ready.add(name);
    if (ready.size === services.length) printReady();
  }
  const text = line.startsWith('{') ? pretty(line).trimEnd() : line;
  console.log(`${name.padEnd(8)} | ${text}`);
}
for (const name of services) {
  const serviceEnv = {
    ...envOf(name),
    CANARY_API_KEY: env.CANARY_API_KEY,
    CANARY_GATEWAY_URL: env.CANARY_GATEWAY_URL,
    CANARY_CA_FILE: env.CANARY_CA_FILE,
  };
  supervised.set(
    name,
    superviseService(name, serviceEnv, {
      onLine: (line) => show(name, line),
      onExit: (code, delayMs) => console.log(`${name} exited (${code}); restarting in ${delayMs / 1000} s`),
    }),
  );
}

const gatewayUrl = `https://${env.GATEWAY_HOST ?? '127.0.0.1'}:${env.GATEWAY_PORT ?? 8443}`;
const adminUrl = `${stack.secure ? 'https' : 'http'}://${env.ADMIN_HOST ?? '127.0.0.1'}:${env.ADMIN_PORT ?? 8480}`;
console.log(`otm-telemetry: starting the gateway, the ingester and the admin service (Kafka ${env.KAFKA_BROKERS}) ...`);

/** Once every service is up: what runs where, and how to send the first record. */
function printReady(): void {
  console.log(
    [
      '',
      'otm-telemetry is running on the local stack:',
      stack.secure
        ? `  ingest endpoint  ${gatewayUrl}/v1/telemetry/usage   (secure profile; its CA: ${path.relative(process.cwd(), caFile)})`
        : `  ingest endpoint  ${gatewayUrl}/v1/telemetry/usage   (self-signed certificate: ${path.relative(process.cwd(), tls.certFile)})`,
      `  dashboard        ${adminUrl}/   admin token: ${adminToken}`,
      `  metrics          http://127.0.0.1:9464/metrics (gateway), http://127.0.0.1:9465/metrics (ingester), http://127.0.0.1:9466/metrics (admin)`,
      'first record:',
      ...(stack.secure ? ["  set -a; . <(npm run -s stack -- env --secure); set +a   # the secure profile's variables, for the CLIs"] : []),
      '  npm run keys -- create --env dev --name my-service      # prints the key once',
      `  curl --cacert ${path.relative(process.cwd(), caFile)} ${gatewayUrl}/v1/telemetry/usage \\`,
      "    -H 'X-API-Key: <the key>' -H 'Content-Type: application/json' --data @schemas/fixtures/valid/success.json",
      'Ctrl-C stops the services; `npm run stack -- down` stops the stack.',
      '',
    ].join('\n'),
  );
}

let stopping = false;
async function stop(code: number): Promise<void> {
  if (stopping) return;
  stopping = true;
  await Promise.all([...supervised.values()].map((service) => service.stop()));
  process.exit(code);
}
process.on('SIGINT', () => void stop(0));
process.on('SIGTERM', () => void stop(0));
