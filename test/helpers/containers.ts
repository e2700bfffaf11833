// The Docker path of the test setup: the same four services from official images.
// Fixed host ports keep Kafka's advertised listener simple; this path is used only
// where a Docker engine answers (not on the project's CI machine).
import { GenericContainer, Wait, type StartedTestContainer } from 'testcontainers';
import type { StackAddresses } from './stack.js';

export async function startContainers(): Promise<{ addresses: StackAddresses; stop(): Promise<void> }> {
  const kafkaPort = 29092;
  const containers: StartedTestContainer[] = await Promise.all([
    new GenericContainer('apache/kafka:4.1.1')
      .withExposedPorts({ container: kafkaPort, host: kafkaPort })
      .withEnvironment({
        KAFKA_NODE_ID: '1',
        KAFKA_PROCESS_ROLES: 'broker,controller',
        KAFKA_LISTENERS: `PLAINTEXT://:${kafkaPort},CONTROLLER://:9093`,
        KAFKA_ADVERTISED_LISTENERS: `PLAINTEXT://127.0.0.1:${kafkaPort}`,
        KAFKA_CONTROLLER_LISTENER_NAMES: 'CONTROLLER',
        KAFKA_LISTENER_SECURITY_PROTOCOL_MAP: 'CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT',
        KAFKA_CONTROLLER_QUORUM_VOTERS: '1@localhost:9093',
        KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR: '1',
        KAFKA_TRANSACTION_STATE_LOG_MIN_ISR: '1',
        KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS: '0',
        KAFKA_AUTO_CREATE_TOPICS_ENABLE: 'false',
      })
      .withWaitStrategy(Wait.forLogMessage(/Kafka Server started/))
      .start(),
    new GenericContainer('apicurio/apicurio-registry:3.0.9')
      .withExposedPorts(8080)
      .withWaitStrategy(Wait.forHttp('/apis/ccompat/v7/subjects', 8080))
      .start(),
    new GenericContainer('redis:7').withExposedPorts(6379).start(),
    new GenericContainer('clickhouse/clickhouse-server:latest')
      .withExposedPorts(8123)
      .withEnvironment({ CLICKHOUSE_SKIP_USER_SETUP: '1' })
      .withWaitStrategy(Wait.forHttp('/ping', 8123))
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
      KAFKA_BROKERS: `127.0.0.1:${kafkaPort}`,
      SCHEMA_REGISTRY_URL: `http://${registry.getHost()}:${registry.getMappedPort(8080)}/apis/ccompat/v7`,
      REDIS_URL: `redis://${redis.getHost()}:${redis.getMappedPort(6379)}`,
      CLICKHOUSE_URL: `http://${clickhouse.getHost()}:${clickhouse.getMappedPort(8123)}`,
      CLICKHOUSE_DATABASE: 'otm',
      source: 'testcontainers',
    },
    async stop() {
      await Promise.all(containers.map((container) => container.stop()));
    },
  };
}
