// Services of a test's own (own ports and folders), for fault tests that stop
// and restart them without disturbing the shared stack.
import { loadStackConfig } from '../../scripts/stack/config.js';
import { ClickHouseService, KafkaService, RedisService } from '../../scripts/stack/services.js';

export async function startPrivateKafka(port: number): Promise<{ brokers: string; stop(): Promise<void>; start(): Promise<void> }> {
  const config = loadStackConfig({
    OTM_STACK_DIR: `.stack/test-kafka-${port}`,
    OTM_STACK_KAFKA_PORT: String(port),
    OTM_STACK_KAFKA_CONTROLLER_PORT: String(port + 1),
    OTM_STACK_KAFKA_HEAP_MB: '384',
  });
  const kafka = new KafkaService(config);
  const start = async () => {
    await kafka.start();
    await kafka.waitHealthy(kafka.startTimeoutMs);
  };
  await start();
  return { brokers: kafka.address, start, stop: () => kafka.down() };
}

/** A ClickHouse server of a test's own, to stop and start under load. */
export async function startPrivateClickHouse(httpPort: number): Promise<{ url: string; stop(): Promise<void>; start(): Promise<void> }> {
  const config = loadStackConfig({
    OTM_STACK_DIR: `.stack/test-clickhouse-${httpPort}`,
    OTM_STACK_CLICKHOUSE_HTTP_PORT: String(httpPort),
    OTM_STACK_CLICKHOUSE_TCP_PORT: String(httpPort + 1),
  });
  const clickhouse = new ClickHouseService(config);
  const start = async () => {
    await clickhouse.start();
    await clickhouse.waitHealthy(clickhouse.startTimeoutMs);
  };
  await start();
  return { url: clickhouse.address, start, stop: () => clickhouse.down() };
}

/** A Redis server of a test's own, to stop and start under load. */
export async function startPrivateRedis(port: number): Promise<{ url: string; stop(): Promise<void>; start(): Promise<void> }> {
  const config = loadStackConfig({ OTM_STACK_DIR: `.stack/test-redis-${port}`, OTM_STACK_REDIS_PORT: String(port) });
  const redis = new RedisService(config);
  const start = async () => {
    await redis.start();
    await redis.waitHealthy(redis.startTimeoutMs);
  };
  await start();
  return { url: redis.address, start, stop: () => redis.down() };
}
