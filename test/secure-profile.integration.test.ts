// The secure profile (npm start -- --secure) on dependencies of the test's own: every
// dependency refuses plaintext and anonymous clients; Kafka takes SCRAM-SHA-256,
// SCRAM-SHA-512, PLAIN and mTLS clients; and the whole pipeline runs on it: records sent
// one at a time, in a batch and as OTLP reach ClickHouse and the analytics API (over
// HTTPS, read as the read-only user), a deleted key is refused, one user's erasure runs.
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Agent, request as undiciRequest } from 'undici';
import { execFile, spawnSync } from 'node:child_process';
import { promisify } from 'node:util';
import { createKafka, ensureTopic, grantAcls, kafkaRefusal, kafkaSettingsFrom, type KafkaSecurityConfig } from '@otm/shared/kafka';
import { createRegistry, registerJsonSchema } from '@otm/shared/registry';
import { buildQueuedRecordSchema } from '@otm/schemas';
import { createRedis, redisKeyPrefix } from '@otm/shared/redis';
import type { Cluster } from 'ioredis';
import { KeyStore } from '@otm/shared/keys/key-store';
import { hashKey } from '@otm/shared/keys/key-format';
import { DedupeStep } from '../services/ingester/src/dedupe-step.js';
import { redisCluster } from '../scripts/stack/redis-cluster.js';

import { createClickHouse } from '@otm/shared/clickhouse';
import { clickhouseFailure, kafkaFailure, reachRedis, registryFailure } from '@otm/shared/dependency-failure';
import { loadStackConfig } from '../scripts/stack/config.js';
import { secureKafkaClient, stackServices } from '../scripts/stack/services.js';
import { SECURE_USERS, ensureSecureMaterial, secureServiceEnv, type SecureRole } from '../scripts/stack/secure.js';
import { SERVICE_PRINCIPALS, preparePipelineTopics } from '../scripts/stack/kafka-acls.js';
import { startService, SOURCE_FLAGS, type ServiceProcess } from '../scripts/lib/service-process.js';
import { eventually, fixture, projectRoot, uniqueName } from './helpers/stack.js';
import { pythonWith, runPython } from './helpers/python.js';

const execFileAsync = promisify(execFile);
const config = loadStackConfig({
  OTM_STACK_SECURE: '1',
  OTM_STACK_DIR: '.stack/test-secure',
  OTM_STACK_KAFKA_PORT: '29292',
  OTM_STACK_KAFKA_CONTROLLER_PORT: '29293',
  OTM_STACK_KAFKA_MTLS_PORT: '29294',
  OTM_STACK_KAFKA_HEAP_MB: '256',
  OTM_STACK_REGISTRY_PORT: '28482',
  OTM_STACK_REGISTRY_HEAP_MB: '256',
  OTM_STACK_REDIS_PORT: '26380',
  OTM_STACK_CLICKHOUSE_HTTP_PORT: '28443',
  OTM_STACK_CLICKHOUSE_TCP_PORT: '29440',
});
const services = stackServices(config);
const material = ensureSecureMaterial(config);
const ca = fs.readFileSync(material.caFile);
const https = new Agent({ connect: { ca }, pipelining: 0 });
const brokers = `127.0.0.1:${config.kafkaPort}`;
const noKafkaSecurity: KafkaSecurityConfig = {
  KAFKA_SECURITY_PROTOCOL: 'PLAINTEXT',
  KAFKA_SASL_MECHANISM: '',
  KAFKA_SASL_USERNAME: '',
  KAFKA_SASL_PASSWORD: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_FILE: '',
  KAFKA_SASL_OAUTHBEARER_TOKEN_COMMAND: '',
  KAFKA_TLS_CA_FILE: '',
  KAFKA_TLS_CERT_FILE: '',
  KAFKA_TLS_KEY_FILE: '',
};
const env = (role: SecureRole, extra: Record<string, string | number> = {}): NodeJS.ProcessEnv => {
  const values: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: process.env.HOME, LOG_LEVEL: 'info', METRICS_PORT: '0' };
  for (const [name, value] of Object.entries({ ...secureServiceEnv(config, role), ...extra })) values[name] = String(value);
  return values;
};

async function get(url: string, headers: Record<string, string> = {}, method = 'GET', body?: string) {
  const answer = await undiciRequest(url, { method: method as 'GET', headers, body, dispatcher: https });
  const text = await answer.body.text();
  return { status: answer.statusCode, text, json: () => JSON.parse(text) as any };
}

beforeAll(async () => {
  for (const service of services) await service.start();
  await Promise.all(services.map((service) => service.waitHealthy(service.startTimeoutMs)));
  // The schema is made by the migrating user; the services, started with
  // MIGRATE_ON_START=false, run as users that cannot change it.
  const migrate = spawnSync(process.execPath, [...SOURCE_FLAGS, path.join(projectRoot, 'scripts/migrate.ts')], {
    env: env('migrate'),
    encoding: 'utf8',
  });
  expect(migrate.status, `${migrate.stdout}${migrate.stderr}`).toBe(0);
}, 300_000);
afterAll(async () => {
  for (const service of [...services].reverse()) await service.down();
});

describe('secure profile: every dependency refuses plaintext and anonymous clients', () => {
  it('Kafka: plaintext, TLS without a login, a wrong password and mTLS without a certificate are refused', async () => {
    expect(await kafkaRefusal([brokers])).toBeDefined();
    expect(await kafkaRefusal([brokers], { ssl: { ca: [ca] } })).toBeDefined();
    const wrong = await kafkaRefusal([brokers], {
      ssl: { ca: [ca] },
      sasl: { mechanism: 'scram-sha-512', username: SECURE_USERS.kafkaServices, password: 'wrong' },
    });
    expect(kafkaFailure(wrong, brokers).message).toMatch(
      /^Kafka: 127\.0\.0\.1:\d+ refused the credentials .*; check KAFKA_SASL_USERNAME, KAFKA_SASL_PASSWORD, KAFKA_SASL_MECHANISM$/,
    );
    expect(await kafkaRefusal([`127.0.0.1:${config.kafkaMtlsPort}`], { ssl: { ca: [ca] } })).toBeDefined();
    // The same clients with what they lack are let in: the refusals above are for the reason named.
    expect(await kafkaRefusal([brokers], secureKafkaClient(config))).toBeUndefined();
  });

  it('the registry: plain HTTP finds nothing listening; no login or a wrong one is 401', async () => {
    const url = `https://127.0.0.1:${config.registryPort}/apis/ccompat/v7/subjects`;
    await expect(fetch(url.replace('https:', 'http:'))).rejects.toThrow();
    expect((await get(url)).status).toBe(401);
    const basic = (password: string) => ({
      authorization: `Basic ${Buffer.from(`${SECURE_USERS.registry}:${password}`).toString('base64')}`,
    });
    expect((await get(url, basic('wrong'))).status).toBe(401);
    expect((await get(url, basic(material.passwords.registry))).status).toBe(200);
    const refused = await registerJsonSchema(
      createRegistry(url.replace('/subjects', ''), { username: SECURE_USERS.registry, password: 'wrong', caFile: material.caFile }),
      'refused-value',
      buildQueuedRecordSchema(),
    ).catch((error: unknown) => error);
    expect(registryFailure(refused, url).message).toMatch(
      /refused the request .*; check SCHEMA_REGISTRY_USERNAME, SCHEMA_REGISTRY_PASSWORD$/,
    );
  });

  it('ClickHouse: plain HTTP is not answered, the default user and wrong passwords are refused, the reader cannot write', async () => {
    const url = `https://127.0.0.1:${config.clickhouseHttpPort}`;
    const client = (username: string, password: string, database = config.clickhouseDatabase) =>
      createClickHouse({ url, database, username, password, caFile: material.caFile });
    const select = async (username: string, password: string) => {
      const clickhouse = client(username, password);
      try {
        return await (await clickhouse.query({ query: 'SELECT count() AS n FROM usage_events', format: 'JSONEachRow' })).json();
      } finally {
        await clickhouse.close();
      }
    };
    const plain = createClickHouse({ url: url.replace('https:', 'http:'), database: 'default', username: 'default', password: '' });
    expect((await plain.ping()).success).toBe(false);
    await plain.close();
    const anonymous = await select('default', '').catch((error: unknown) => error);
    expect(clickhouseFailure(anonymous, url).message).toMatch(/refused the user and password; check CLICKHOUSE_USER, CLICKHOUSE_PASSWORD$/);
    await expect(select(SECURE_USERS.clickhouseWriter, 'wrong')).rejects.toThrow();
    expect(await select(SECURE_USERS.clickhouseReader, material.passwords.clickhouseReader)).toHaveLength(1);
    const reader = client(SECURE_USERS.clickhouseReader, material.passwords.clickhouseReader);
    await expect(reader.command({ query: 'CREATE TABLE made_by_reader (n UInt8) ENGINE = Memory' })).rejects.toThrow(
      /readonly|Cannot execute/i,
    );
    await reader.close();
    // The writer reads its database only: a table the migrating user makes elsewhere is out of its reach.
    const migrator = client(SECURE_USERS.clickhouseMigrator, material.passwords.clickhouseMigrator, 'default');
    await migrator.command({ query: 'CREATE TABLE IF NOT EXISTS default.secure_probe (n UInt8) ENGINE = Memory' });
    await migrator.close();
    const writer = client(SECURE_USERS.clickhouseWriter, material.passwords.clickhouseWriter);
    await expect(
      writer.query({ query: 'SELECT count() AS n FROM default.secure_probe', format: 'JSONEachRow' }).then((result) => result.json()),
    ).rejects.toThrow(/Access denied to database default/);
    await writer.close();
  });

  it('Redis Cluster over TLS as the ACL user: dedupe marks over every node, the key store, nothing outside its prefixes', async () => {
    const nodes = await redisCluster(config, 22301);
    const redis = createRedis(nodes.url, { name: 'secure-cluster', cluster: true, caFile: material.caFile });
    try {
      expect(nodes.url).toMatch(/^rediss:/);
      await redis.connect();
      const prefix = `otm:${uniqueName('cluster')}:`;
      const dedupe = new DedupeStep(redis, prefix, 600);
      const eventKeys = Array.from({ length: 300 }, (_, index) => `${prefix}event-${index}`);
      await dedupe.markSeen(eventKeys.map((eventKey) => ({ eventKey, digest: 'd' })));
      const seen = await dedupe.filterSeen(
        eventKeys,
        (eventKey) => eventKey,
        () => 'd',
      );
      expect(seen).toMatchObject({ fresh: [], duplicates: 300, collisions: [] });
      // A new cluster: what each master holds is marks (KEYS is not the ACL user's to run).
      const held = await Promise.all((redis as Cluster).nodes('master').map((node) => node.dbsize()));
      expect(held.filter((count) => count > 0)).toHaveLength(3);
      const store = new KeyStore(redis, redisKeyPrefix(prefix, true));
      const created = await store.create({ environment: 'qa', name: 'tls cluster' });
      expect((await store.findByHash(hashKey(created.key)))?.id).toBe(created.id);
      expect(await store.delete(created.id)).toBe(true);
      await expect(redis.set('elsewhere', '1')).rejects.toThrow(/NOPERM/);
    } finally {
      redis.disconnect();
      await nodes.down();
    }
  }, 120_000);

  it('Redis: plaintext is not answered, the default user is off, the ACL user reaches only its prefix', async () => {
    const url = new URL(`rediss://127.0.0.1:${config.redisPort}`);
    const plain = createRedis(`redis://127.0.0.1:${config.redisPort}`);
    await expect(plain.connect().then(() => plain.ping())).rejects.toThrow();
    plain.disconnect();
    const anonymous = await reachRedis(url.toString(), { name: 'secure-test', caFile: material.caFile }).catch((error: unknown) => error);
    expect(String(anonymous)).toMatch(/^DependencyError: Redis: rediss:\/\/127\.0\.0\.1:\d+ refused the user and password \(NOAUTH/);
    url.username = SECURE_USERS.redis;
    url.password = material.passwords.redis;
    const user = createRedis(url.toString(), { caFile: material.caFile });
    await user.connect();
    expect(await user.set('otm:secure-test', '1')).toBe('OK');
    await expect(user.set('elsewhere', '1')).rejects.toThrow(/NOPERM/);
    await expect(user.flushall()).rejects.toThrow(/NOPERM/);
    user.disconnect();
  });
});

describe('secure profile: each Kafka mechanism', () => {
  const mechanisms: [string, Partial<KafkaSecurityConfig>, string][] = [
    [
      'SCRAM-SHA-256',
      {
        KAFKA_SASL_MECHANISM: 'SCRAM-SHA-256',
        KAFKA_SASL_USERNAME: SECURE_USERS.kafkaServices,
        KAFKA_SASL_PASSWORD: material.passwords.kafkaServices,
      },
      brokers,
    ],
    [
      'SCRAM-SHA-512',
      {
        KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
        KAFKA_SASL_USERNAME: SECURE_USERS.kafkaServices,
        KAFKA_SASL_PASSWORD: material.passwords.kafkaServices,
      },
      brokers,
    ],
    [
      'PLAIN',
      { KAFKA_SASL_MECHANISM: 'PLAIN', KAFKA_SASL_USERNAME: SECURE_USERS.kafkaPlain, KAFKA_SASL_PASSWORD: material.passwords.kafkaPlain },
      brokers,
    ],
  ];
  for (const [name, settings, at] of mechanisms) {
    it(`${name} over SASL_SSL: a message produced is read back`, async () => {
      await roundTrip({ ...noKafkaSecurity, KAFKA_SECURITY_PROTOCOL: 'SASL_SSL', KAFKA_TLS_CA_FILE: material.caFile, ...settings }, at);
    });
  }
  it('mTLS over SSL with the client certificate: a message produced is read back', async () => {
    await roundTrip(
      {
        ...noKafkaSecurity,
        KAFKA_SECURITY_PROTOCOL: 'SSL',
        KAFKA_TLS_CA_FILE: material.caFile,
        KAFKA_TLS_CERT_FILE: material.clientCertFile,
        KAFKA_TLS_KEY_FILE: material.clientKeyFile,
      },
      `127.0.0.1:${config.kafkaMtlsPort}`,
    );
  });

  async function roundTrip(security: KafkaSecurityConfig, at: string): Promise<void> {
    const kafka = createKafka(
      kafkaSettingsFrom({ ...security, KAFKA_BROKERS: [at], KAFKA_CLIENT_ID: 'secure-test' }, security.KAFKA_SASL_MECHANISM || 'mtls'),
    );
    const topic = uniqueName('secure');
    await ensureTopic(kafka, topic, 1);
    const producer = kafka.producer();
    await producer.connect();
    await producer.send({ topic, messages: [{ key: 'k', value: topic }] });
    await producer.disconnect();
    const consumer = kafka.consumer({ groupId: uniqueName('secure-reader'), maxWaitTimeInMs: 100 });
    await consumer.connect();
    await consumer.subscribe({ topic, fromBeginning: true });
    let read: string | undefined;
    await consumer.run({ eachMessage: async ({ message }) => void (read = String(message.value)) });
    await eventually(async () => read !== undefined, 30_000);
    await consumer.disconnect();
    expect(read).toBe(topic);
  }
});

describe('secure profile: the pipeline', () => {
  const keyPrefix = `otm:${uniqueName('secure')}:`;
  const topic = uniqueName('secure-usage');
  const adminToken = randomBytes(24).toString('base64url');
  const tag = uniqueName('sec').replace(/[^a-z0-9]/gi, '');
  const started: ServiceProcess[] = [];
  let gateway: ServiceProcess;
  let admin: ServiceProcess;
  const topics = { USAGE_TOPIC: topic, DLQ_TOPIC: `${topic}.dlq`, ERASURE_TOPIC: `${topic}.erasures`, SCHEMA_SUBJECT: `${topic}-value` };
  const auth = { authorization: `Bearer ${adminToken}` };

  const ingestGroup = uniqueName('secure-ingest');

  beforeAll(async () => {
    // Made by the operator with each service's rights, as a platform team would: no service may create a topic.
    await preparePipelineTopics(
      config,
      { usageTopic: topic, dlqTopic: topics.DLQ_TOPIC, erasureTopic: topics.ERASURE_TOPIC, ingestGroup },
      2,
    );
    const shared = { ...topics, REDIS_KEY_PREFIX: keyPrefix };
    [gateway, , admin] = await Promise.all([
      startService(
        'gateway',
        env('gateway', { ...shared, GATEWAY_PORT: 0, TLS_CERT_FILE: material.serverCertFile, TLS_KEY_FILE: material.serverKeyFile }),
        /gateway listening/,
      ),
      startService('ingester', env('ingester', { ...shared, INGEST_GROUP_ID: ingestGroup }), /ingester consuming/),
      startService(
        'admin',
        env('admin', { ...shared, INGEST_GROUP_ID: ingestGroup, ADMIN_TOKEN: adminToken, ADMIN_PORT: 0 }),
        /admin listening/,
      ),
    ]).then((list) => {
      started.push(...list);
      return list;
    });
  }, 180_000);
  afterAll(async () => {
    await Promise.all(started.map((service) => service.stop()));
  });

  it('records sent singly, in a batch and as OTLP reach ClickHouse and the analytics API; a deleted key is refused; an erasure runs', async () => {
    expect(gateway.url).toMatch(/^https:/);
    expect(admin.url).toMatch(/^https:/);
    const created = await get(
      `${admin.url}/v1/keys`,
      { ...auth, 'content-type': 'application/json' },
      'POST',
      JSON.stringify({ environment: 'qa', name: 'secure' }),
    );
    expect(created.status, created.text).toBe(201);
    const { key, id } = created.json();
    const send = (pathname: string, body: unknown, apiKey = key as string) =>
      get(`${gateway.url}${pathname}`, { 'content-type': 'application/json', 'x-api-key': apiKey }, 'POST', JSON.stringify(body));
    const at = (seconds: number) => new Date(Date.now() - 60_000 + seconds * 1000).toISOString();
    const record = (user: string) => {
      const value = fixture('valid/success.json');
      value.user.id = `${tag}-${user}`;
      value.timing = { startTime: at(0), firstTokenTime: at(1), lastTokenTime: at(2), latencyMs: 2000 };
      return value;
    };
    expect((await send('/v1/telemetry/usage', record('single'))).status).toBe(202);
    const batch = await send('/v1/telemetry/usage/batch', [record('batch'), record('batch')]);
    expect(batch.status, batch.text).toBe(202);
    const start = BigInt(Date.now() - 60_000) * 1_000_000n;
    const otlp = await send('/v1/otlp/v1/traces', {
      resourceSpans: [
        {
          resource: { attributes: [{ key: 'service.name', value: { stringValue: 'secure-test' } }] },
          scopeSpans: [
            {
              spans: [
                {
                  traceId: randomBytes(16).toString('hex'),
                  spanId: randomBytes(8).toString('hex'),
                  name: 'chat gpt-4o',
                  startTimeUnixNano: String(start),
                  endTimeUnixNano: String(start + 2_000_000_000n),
                  attributes: [
                    { key: 'gen_ai.operation.name', value: { stringValue: 'chat' } },
                    { key: 'gen_ai.provider.name', value: { stringValue: 'openai' } },
                    { key: 'gen_ai.request.model', value: { stringValue: 'gpt-4o' } },
                    { key: 'gen_ai.usage.input_tokens', value: { intValue: '100' } },
                    { key: 'gen_ai.usage.output_tokens', value: { intValue: '20' } },
                    { key: 'user.id', value: { stringValue: `${tag}-otlp` } },
                  ],
                },
              ],
            },
          ],
        },
      ],
    });
    expect(otlp.status, otlp.text).toBe(200);

    // Stored, read back as the read-only user through the analytics API.
    const usage = async () => {
      const answer = await get(`${admin.url}/v1/analytics/usage?since=24h&bucket=none&groupBy=userId&limit=1000`, auth);
      expect(answer.status, answer.text).toBe(200);
      return (answer.json().rows as { userId: string; requests: number }[]).filter((row) => row.userId.startsWith(tag));
    };
    await eventually(async () => (await usage()).reduce((sum, row) => sum + row.requests, 0) === 4, 60_000, 500).catch((error: Error) => {
      throw new Error(`${error.message}; logs:\n${started.map((service) => service.logs.slice(-15).join('\n')).join('\n')}`);
    });
    expect(Object.fromEntries((await usage()).map((row) => [row.userId, row.requests]))).toEqual({
      [`${tag}-single`]: 1,
      [`${tag}-batch`]: 2,
      [`${tag}-otlp`]: 1,
    });

    // A data engineer's consumer (the Python example, librdkafka) reads the topic over
    // SASL_SSL and the registry over HTTPS with basic auth, from the same variables.
    const python = await pythonWith(['examples/python-consumer/requirements.txt']);
    if (python) {
      const secure = secureServiceEnv(config, 'operator');
      const read = JSON.parse(
        await runPython(
          python,
          [
            'examples/python-consumer/consumer.py',
            ...['--brokers', secure.KAFKA_BROKERS!, '--registry', secure.SCHEMA_REGISTRY_URL!, '--topic', topic],
            ...['--group', uniqueName('secure-python'), '--by-user', '--idle-seconds', '4'],
          ],
          { env: secure },
        ),
      ) as Record<string, number>;
      expect(read).toMatchObject({ [`qa:${tag}-single`]: 1, [`qa:${tag}-batch`]: 2 });
    } else {
      console.log('python3 is not on the PATH: the Python consumer was not run on the secure profile');
    }

    // The TypeScript example consumer (kafkajs) the same way.
    const secure = secureServiceEnv(config, 'operator');
    const { stdout } = await execFileAsync(
      path.join(projectRoot, 'node_modules', '.bin', 'tsx'),
      [
        'examples/typescript-consumer/consumer.ts',
        ...['--brokers', secure.KAFKA_BROKERS!, '--registry', secure.SCHEMA_REGISTRY_URL!],
        ...['--topic', topic, '--group', uniqueName('secure-ts'), '--idle-seconds', '4'],
      ],
      { cwd: projectRoot, timeout: 120_000, env: { ...process.env, ...secure } },
    );
    const sums = JSON.parse(stdout.trim().split('\n').at(-1)!) as Record<string, { records: number }>;
    expect(Object.values(sums).reduce((total, model) => total + model.records, 0)).toBe(4);

    // One user's erasure, as the writing user.
    const erasure = await get(`${admin.url}/v1/admin/users/${tag}-batch/data?environment=qa`, auth, 'DELETE');
    expect(erasure.status, erasure.text).toBe(202);
    const job = await eventually(async () => {
      const state = (await get(`${admin.url}${erasure.json().statusUrl}`, auth)).json();
      return state.state !== 'running' && state;
    }, 60_000);
    expect(job).toMatchObject({ state: 'done', removed: { events: 2 } });
    expect((await usage()).map((row) => row.userId).sort()).toEqual([`${tag}-otlp`, `${tag}-single`]);

    // A deleted key is refused by the gateway (revocation over the TLS Redis channel).
    expect((await get(`${admin.url}/v1/keys/${id}`, auth, 'DELETE')).status).toBe(204);
    await eventually(async () => (await send('/v1/telemetry/usage', record('late'))).status === 401, 10_000);
  });

  it("Kafka ACLs: each service's principal is refused outside its rights; the gateway cannot read the topic it writes", async () => {
    const as = (role: 'gateway' | 'ingester' | 'admin') => {
      const secure = secureServiceEnv(config, role);
      return createKafka(
        kafkaSettingsFrom(
          {
            ...noKafkaSecurity,
            KAFKA_SECURITY_PROTOCOL: 'SASL_SSL',
            KAFKA_SASL_MECHANISM: 'SCRAM-SHA-512',
            KAFKA_SASL_USERNAME: secure.KAFKA_SASL_USERNAME!,
            KAFKA_SASL_PASSWORD: secure.KAFKA_SASL_PASSWORD!,
            KAFKA_TLS_CA_FILE: material.caFile,
            KAFKA_BROKERS: [brokers],
            KAFKA_CLIENT_ID: `acl-${role}`,
          },
          role,
        ),
      );
    };
    // A consumer group each principal may use, so that what refuses a read is the topic's ACL.
    const readerGroup = uniqueName('acl-reader');
    const operator = createKafka({ brokers: [brokers], clientId: 'acl-operator', security: secureKafkaClient(config) });
    await grantAcls(
      operator,
      Object.values(SERVICE_PRINCIPALS).map((principal) => ({
        principal,
        resource: 'group' as const,
        name: readerGroup,
        operations: ['read', 'describe'] as const,
      })),
    );
    const produce = async (kafka: ReturnType<typeof as>, to: string) => {
      const producer = kafka.producer({ retry: { retries: 1 } });
      await producer.connect();
      try {
        await producer.send({ topic: to, messages: [{ key: 'acl', value: 'acl' }] });
      } finally {
        await producer.disconnect();
      }
    };
    /** Resolves with the first record read from the beginning of `from`; rejects with what stopped the consumer. */
    const consume = async (kafka: ReturnType<typeof as>, from: string) => {
      const consumer = kafka.consumer({ groupId: readerGroup, maxWaitTimeInMs: 100, retry: { retries: 1 } });
      try {
        await consumer.connect();
        await consumer.subscribe({ topic: from, fromBeginning: true });
        return await new Promise<string>((resolve, reject) => {
          consumer.on(consumer.events.CRASH, ({ payload }) => reject(payload.error));
          void consumer.run({ eachMessage: async ({ message }) => resolve(String(message.key)) }).catch(reject);
        });
      } finally {
        await consumer.disconnect().catch(() => undefined);
      }
    };
    const refused = async (attempt: Promise<unknown>) => {
      const error = await attempt.then(
        () => undefined,
        (failure: unknown) => failure as Error & { type?: string; errors?: { type?: string }[] },
      );
      expect(error, 'the attempt was allowed').toBeDefined();
      // An aggregate (kafkajs's topic creation) names each topic's error beneath it.
      return [error!.type, error!.message, ...(error!.errors ?? []).map((each) => each.type)].join(' ');
    };
    const gateway = as('gateway');
    const ingester = as('ingester');
    const admin = as('admin');

    // Within their rights (the pipeline test above ran the rest: the ingester's group, its dead letters, the admin's erasure).
    await produce(gateway, topic);
    await expect(consume(ingester, topic)).resolves.toBeDefined();
    // Outside them.
    expect(await refused(consume(gateway, topic))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
    expect(await refused(produce(gateway, topics.DLQ_TOPIC))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
    const gatewayAdmin = gateway.admin();
    await gatewayAdmin.connect();
    expect(await refused(gatewayAdmin.createTopics({ topics: [{ topic: uniqueName('acl-new') }] }))).toMatch(
      /AUTHORIZATION|not authorized/i,
    );
    await gatewayAdmin.disconnect();
    expect(await refused(produce(ingester, topic))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
    expect(await refused(produce(ingester, topics.ERASURE_TOPIC))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
    expect(await refused(consume(admin, topic))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
    expect(await refused(produce(admin, topic))).toMatch(/TOPIC_AUTHORIZATION_FAILED|not authorized/i);
  }, 120_000);
});
