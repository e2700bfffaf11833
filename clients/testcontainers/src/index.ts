// The whole pipeline in containers, for a team that tests its own producer or consumer
// against the real thing in its CI (docs/containers.md):
//
//   const stack = await new OtmTelemetryStack().start();
//   await fetch(`${stack.gatewayUrl}/v1/telemetry/usage`, { method: 'POST', headers: { 'x-api-key': stack.ingestKey, … }, body });
//   … read stack.kafkaBrokers / stack.topic, query stack.clickhouseUrl …
//   await stack.stop();
//
// Kafka, the schema registry, Redis, ClickHouse, and the project's gateway, ingester
// and admin service share one container network; the host reaches each on a mapped
// port. The gateway serves plain HTTP here (a test stack, no certificate to trust);
// production terminates TLS at the gateway or before it.
import { randomBytes } from 'node:crypto';
import net from 'node:net';
import { GenericContainer, Network, Wait, type StartedNetwork, type StartedTestContainer } from 'testcontainers';

export type ImageName = 'kafka' | 'registry' | 'redis' | 'clickhouse' | 'services';

export interface OtmTelemetryStackOptions {
  /** Images to use, by part; default `otm-telemetry/<part>:local` (`npm run images`), or OTM_IMAGE_<PART>. */
  images?: Partial<Record<ImageName, string>>;
  /** The environment of the ingest key created for the test (default `dev`). */
  environment?: 'prod' | 'qa' | 'preview' | 'dev';
  /** Start the ingester too (default true): without it records stop at the topic. */
  ingester?: boolean;
}

export interface StartedOtmTelemetryStack {
  /** Base URL of the ingest API (POST /v1/telemetry/usage, /v1/telemetry/usage/batch). */
  gatewayUrl: string;
  /** An ingest API key, made for this stack through the admin API. */
  ingestKey: string;
  ingestKeyId: string;
  /** Kafka bootstrap servers, reachable from the host. */
  kafkaBrokers: string;
  /** The usage topic and its dead-letter topic. */
  topic: string;
  deadLetterTopic: string;
  /** The Confluent-compatible API of the schema registry. */
  registryUrl: string;
  /** ClickHouse's HTTP interface, and the database of the usage tables. */
  clickhouseUrl: string;
  clickhouseDatabase: string;
  /** The admin API and dashboard, and its bearer token. */
  adminUrl: string;
  adminToken: string;
  stop(): Promise<void>;
}

const TOPIC = 'telemetry.usage.v1';
const DATABASE = 'otm';

function imageOf(options: OtmTelemetryStackOptions, name: ImageName): string {
  return options.images?.[name] ?? process.env[`OTM_IMAGE_${name.toUpperCase()}`] ?? `otm-telemetry/${name}:local`;
}

/** A free TCP port on the host: Kafka advertises the port clients dial, so it is the same inside and out. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

export class OtmTelemetryStack {
  constructor(private readonly options: OtmTelemetryStackOptions = {}) {}

  async start(): Promise<StartedOtmTelemetryStack> {
    const options = this.options;
    const network: StartedNetwork = await new Network().start();
    const started: StartedTestContainer[] = [];
    const stopAll = async () => {
      await Promise.allSettled(started.reverse().map((container) => container.stop()));
      await network.stop().catch(() => undefined);
    };
    try {
      const kafkaPort = await freePort();
      const infrastructure = await Promise.all([
        new GenericContainer(imageOf(options, 'kafka'))
          .withNetwork(network)
          .withNetworkAliases('kafka')
          .withExposedPorts({ container: kafkaPort, host: kafkaPort })
          // Host clients on 127.0.0.1:<port>; containers on kafka:9094.
          .withEnvironment({ KAFKA_PORT: String(kafkaPort), KAFKA_ADVERTISED_HOST: '127.0.0.1', KAFKA_INTERNAL_HOST: 'kafka' })
          .withWaitStrategy(Wait.forLogMessage(/Kafka Server started|started \(kafka.server/))
          .withStartupTimeout(120_000)
          .start(),
        new GenericContainer(imageOf(options, 'registry'))
          .withNetwork(network)
          .withNetworkAliases('registry')
          .withExposedPorts(8080)
          .withWaitStrategy(Wait.forHttp('/apis/ccompat/v7/subjects', 8080))
          .withStartupTimeout(180_000)
          .start(),
        new GenericContainer(imageOf(options, 'redis'))
          .withNetwork(network)
          .withNetworkAliases('redis')
          .withExposedPorts(6379)
          .withWaitStrategy(Wait.forListeningPorts())
          .start(),
        new GenericContainer(imageOf(options, 'clickhouse'))
          .withNetwork(network)
          .withNetworkAliases('clickhouse')
          .withExposedPorts(8123)
          .withWaitStrategy(Wait.forHttp('/ping', 8123))
          .withStartupTimeout(120_000)
          .start(),
      ]);
      started.push(...infrastructure);
      const [, registry, , clickhouse] = infrastructure as [
        StartedTestContainer,
        StartedTestContainer,
        StartedTestContainer,
        StartedTestContainer,
      ];

      const adminToken = randomBytes(24).toString('base64url');
      const common: Record<string, string> = {
        KAFKA_BROKERS: 'kafka:9094',
        SCHEMA_REGISTRY_URL: 'http://registry:8080/apis/ccompat/v7',
        REDIS_URL: 'redis://redis:6379',
        CLICKHOUSE_URL: 'http://clickhouse:8123',
        CLICKHOUSE_DATABASE: DATABASE,
        USAGE_TOPIC: TOPIC,
        DLQ_TOPIC: `${TOPIC}.dlq`,
        METRICS_HOST: '0.0.0.0',
        LOG_LEVEL: 'info',
      };
      const service = (name: string, environment: Record<string, string>, ready: RegExp) =>
        new GenericContainer(imageOf(options, 'services'))
          .withNetwork(network)
          .withNetworkAliases(name)
          .withEnvironment({ ...common, SERVICE: name, ...environment })
          .withWaitStrategy(Wait.forLogMessage(ready))
          .withStartupTimeout(120_000);
      // The deploy step as the chart's Job runs it, from the same image: the migrations,
      // then the schemas' registration. The services then neither migrate nor register.
      let deployLog = '';
      const deploy = await new GenericContainer(imageOf(options, 'services'))
        .withNetwork(network)
        .withEnvironment(common)
        .withCommand([
          'sh',
          '-c',
          'if node services/ingester/dist/migrate.js && node services/ingester/dist/register-schemas.js; then echo "deploy step: done"; else echo "deploy step: failed"; fi',
        ])
        .withLogConsumer((stream) => stream.on('data', (line: Buffer | string) => (deployLog += String(line))))
        .withWaitStrategy(Wait.forLogMessage(/deploy step: (done|failed)/))
        .withStartupTimeout(180_000)
        .start();
      // The log consumer reads its own copy of the stream: give it the last line.
      for (let waited = 0; !deployLog.includes('deploy step:') && waited < 5000; waited += 100)
        await new Promise((resolve) => setTimeout(resolve, 100));
      await deploy.stop().catch(() => undefined);
      if (!deployLog.includes('deploy step: done'))
        throw new Error(`the deploy step (migrate, then register-schemas) failed:\n${deployLog}`);
      Object.assign(common, { MIGRATE_ON_START: 'false', SCHEMA_REGISTRY_REGISTER: 'false' });
      const admin = await service('admin', { ADMIN_HOST: '0.0.0.0', ADMIN_PORT: '8480', ADMIN_TOKEN: adminToken }, /admin listening/)
        .withExposedPorts(8480)
        .start();
      started.push(admin);
      const parts = await Promise.all([
        service('gateway', { GATEWAY_HOST: '0.0.0.0', GATEWAY_PORT: '8080', GATEWAY_PLAIN_HTTP: 'true' }, /gateway listening/)
          .withExposedPorts(8080)
          .start(),
        ...(options.ingester === false ? [] : [service('ingester', {}, /ingester consuming/).start()]),
      ]);
      started.push(...parts);
      const gateway = parts[0]!;

      const adminUrl = `http://${admin.getHost()}:${admin.getMappedPort(8480)}`;
      const created = await fetch(`${adminUrl}/v1/keys`, {
        method: 'POST',
        headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: 'testcontainers', environment: options.environment ?? 'dev' }),
      });
      if (!created.ok) throw new Error(`creating the ingest key failed: ${created.status} ${await created.text()}`);
      const key = (await created.json()) as { id: string; key: string };

      return {
        gatewayUrl: `http://${gateway.getHost()}:${gateway.getMappedPort(8080)}`,
        ingestKey: key.key,
        ingestKeyId: key.id,
        kafkaBrokers: `127.0.0.1:${kafkaPort}`,
        topic: TOPIC,
        deadLetterTopic: `${TOPIC}.dlq`,
        registryUrl: `http://${registry.getHost()}:${registry.getMappedPort(8080)}/apis/ccompat/v7`,
        clickhouseUrl: `http://${clickhouse.getHost()}:${clickhouse.getMappedPort(8123)}`,
        clickhouseDatabase: DATABASE,
        adminUrl,
        adminToken,
        stop: stopAll,
      };
    } catch (error) {
      await stopAll();
      throw error;
    }
  }
}
