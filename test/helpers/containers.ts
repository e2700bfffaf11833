// The Docker path of the test setup (npm run test:containers): Kafka, the registry,
// Redis and ClickHouse started by testcontainers from the images `npm run images`
// builds here without any registry (otm-telemetry/<name>:local). OTM_IMAGE_<NAME>
// (OTM_IMAGE_KAFKA, …) names another image, e.g. one of your registry's.
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import type { StackAddresses } from './stack.js';

export function imageOf(name: 'kafka' | 'registry' | 'redis' | 'clickhouse' | 'services'): string {
  return process.env[`OTM_IMAGE_${name.toUpperCase()}`] ?? `otm-telemetry/${name}:local`;
}

/** Kafka's advertised port must be the one clients reach: the same port inside and out. */
export const CONTAINER_KAFKA_PORT = 29_092;

export async function startContainers(): Promise<{ addresses: StackAddresses; stop(): Promise<void> }> {
  const containers: StartedTestContainer[] = await Promise.all([
    new GenericContainer(imageOf('kafka'))
      .withExposedPorts({ container: CONTAINER_KAFKA_PORT, host: CONTAINER_KAFKA_PORT })
      .withEnvironment({ KAFKA_PORT: String(CONTAINER_KAFKA_PORT), KAFKA_ADVERTISED_HOST: '127.0.0.1' })
      .withWaitStrategy(Wait.forLogMessage(/Kafka Server started|started \(kafka.server/))
      .withStartupTimeout(120_000)
      .start(),
    new GenericContainer(imageOf('registry'))
      .withExposedPorts(8080)
      .withWaitStrategy(Wait.forHttp('/apis/ccompat/v7/subjects', 8080))
      .withStartupTimeout(180_000)
      .start(),
    new GenericContainer(imageOf('redis')).withExposedPorts(6379).withWaitStrategy(Wait.forListeningPorts()).start(),
    new GenericContainer(imageOf('clickhouse'))
      .withExposedPorts(8123)
      .withWaitStrategy(Wait.forHttp('/ping', 8123))
      .withStartupTimeout(120_000)
      .start(),
  ]);
  const [, registry, redis, clickhouse] = containers as [
    StartedTestContainer,
    StartedTestContainer,
    StartedTestContainer,
    StartedTestContainer,
  ];
  return {
    addresses: {
      KAFKA_BROKERS: `127.0.0.1:${CONTAINER_KAFKA_PORT}`,
      SCHEMA_REGISTRY_URL: `http://${registry.getHost()}:${registry.getMappedPort(8080)}/apis/ccompat/v7`,
      REDIS_URL: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
      CLICKHOUSE_URL: `http://${clickhouse.getHost()}:${clickhouse.getMappedPort(8123)}`,
      CLICKHOUSE_DATABASE: 'otm',
      source: 'containers (testcontainers)',
    },
    async stop() {
      await Promise.all(containers.map((container) => container.stop()));
    },
  };
}
