// Services of a test's own (own ports and folders), for fault tests that stop
// and restart them without disturbing the shared stack.
import { loadStackConfig, type StackConfig } from '../../scripts/stack/config.js';
import { ClickHouseService, KafkaService, RedisService, type StackService } from '../../scripts/stack/services.js';

export interface PrivateService {
  /** Where clients reach it (Kafka: host:port; others: URL). */
  address: string;
  start(): Promise<void>;
  stop(): Promise<void>;
}

async function startPrivate(service: StackService): Promise<PrivateService> {
  const start = async () => {
    await service.start();
    await service.waitHealthy(service.startTimeoutMs);
  };
  await start();
  return { address: service.address, start, stop: () => service.down() };
}

const config = (folder: string, ports: Record<string, number>): StackConfig =>
  loadStackConfig({
    OTM_STACK_DIR: `.stack/${folder}`,
    ...Object.fromEntries(Object.entries(ports).map(([name, value]) => [name, String(value)])),
  });

export function startPrivateKafka(port: number): Promise<PrivateService> {
  return startPrivate(
    new KafkaService(
      config(`test-kafka-${port}`, {
        OTM_STACK_KAFKA_PORT: port,
        OTM_STACK_KAFKA_CONTROLLER_PORT: port + 1,
        OTM_STACK_KAFKA_HEAP_MB: 384,
      }),
    ),
  );
}

export function startPrivateClickHouse(httpPort: number): Promise<PrivateService> {
  return startPrivate(
    new ClickHouseService(
      config(`test-clickhouse-${httpPort}`, { OTM_STACK_CLICKHOUSE_HTTP_PORT: httpPort, OTM_STACK_CLICKHOUSE_TCP_PORT: httpPort + 1 }),
    ),
  );
}

export function startPrivateRedis(port: number): Promise<PrivateService> {
  return startPrivate(new RedisService(config(`test-redis-${port}`, { OTM_STACK_REDIS_PORT: port })));
}
