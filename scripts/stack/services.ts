// The four services of the local stack, one file each (kafka.ts, registry.ts, redis.ts,
// clickhouse.ts, on process-service.ts): each knows how to install itself when missing,
// start as a detached process that writes a pid file, tell whether it is healthy, and
// stop only the process it started. This file puts them together.
import { type StackConfig, stackAddresses } from './config.js';
import { secureEnvLines } from './secure.js';
import { ensureDebianPackage, type StackService } from './process-service.js';
import { kafkaServices } from './kafka.js';
import { RegistryService } from './registry.js';
import { RedisService } from './redis.js';
import { ClickHouseService } from './clickhouse.js';
import { releaseStaleMounts } from './stale-mounts.js';
import { DEFAULT_PIPELINE_NAMES, preparePipelineTopics } from './kafka-acls.js';

export { BROKER_RETENTION_HOURS, ProcessService, ensureDebianPackage, run, type StackService } from './process-service.js';
export { KafkaService, kafkaServices, secureKafkaClient } from './kafka.js';
export { RegistryService } from './registry.js';
export { RedisService } from './redis.js';
export { ClickHouseService } from './clickhouse.js';

/** Debian's Chromium, for the dashboard's browser tests (never a downloaded browser). */
export function ensureChromium(): string {
  ensureDebianPackage('chromium', 'chromium');
  return '/usr/bin/chromium';
}

export function stackServices(config: StackConfig): StackService[] {
  return [...kafkaServices(config), new RegistryService(config), new RedisService(config), new ClickHouseService(config)];
}

/** Start every service (installing what is missing), then wait for all to be healthy. */
export async function stackUp(config: StackConfig): Promise<void> {
  // What a killed stack left mounted, in any checkout, goes first.
  releaseStaleMounts();
  const services = stackServices(config);
  for (const service of services) {
    const state = await service.start();
    if (state === 'started') console.log(`${service.name}: starting`);
  }
  await Promise.all(services.map((service) => service.waitHealthy(service.startTimeoutMs)));
  // The secure profile authorizes every Kafka request: the pipeline's topics and the
  // services' ACLs are made by the operator, as a platform team would (kafka-acls.ts).
  if (config.secure) await preparePipelineTopics(config, DEFAULT_PIPELINE_NAMES);
}

export function stackEnvLines(config: StackConfig): string[] {
  if (config.secure) return secureEnvLines(config);
  return Object.entries(stackAddresses(config)).map(([name, value]) => `${name}=${value}`);
}
