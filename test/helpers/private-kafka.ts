// A Kafka broker of a test's own (its own port and folder), for fault tests that
// stop and restart the broker without disturbing the shared stack.
import { loadStackConfig } from '../../scripts/stack/config.js';
import { KafkaService } from '../../scripts/stack/services.js';

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
