// Finds the real services for the integration tests, in this order:
//   1. addresses given in the environment (KAFKA_BROKERS, SCHEMA_REGISTRY_URL,
//      REDIS_URL, CLICKHOUSE_URL), for example a shared test cluster;
//   2. when a Docker engine answers, containers started with testcontainers;
//   3. otherwise the local stack (scripts/stack), started once and reused if up.
// If none can start, the run fails and says why: integration tests never skip.
import { spawnSync } from 'node:child_process';
import type { TestProject } from 'vitest/node';
import { loadStackConfig, stackAddresses } from '../scripts/stack/config.js';
import { stackUp } from '../scripts/stack/services.js';
import type { StackAddresses } from './helpers/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    stack: StackAddresses;
  }
}

function fromEnvironment(): StackAddresses | undefined {
  const { KAFKA_BROKERS, SCHEMA_REGISTRY_URL, REDIS_URL, CLICKHOUSE_URL, CLICKHOUSE_DATABASE } = process.env;
  if (!KAFKA_BROKERS || !SCHEMA_REGISTRY_URL || !REDIS_URL || !CLICKHOUSE_URL) return undefined;
  return {
    KAFKA_BROKERS,
    SCHEMA_REGISTRY_URL,
    REDIS_URL,
    CLICKHOUSE_URL,
    CLICKHOUSE_DATABASE: CLICKHOUSE_DATABASE || 'otm',
    source: 'environment',
  };
}

function dockerEngineAnswers(): boolean {
  const result = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { stdio: 'pipe', timeout: 5000 });
  return result.status === 0;
}

let teardown: (() => Promise<void>) | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let addresses = fromEnvironment();
  if (!addresses && dockerEngineAnswers()) {
    const { startContainers } = await import('./helpers/containers.js');
    const started = await startContainers();
    addresses = started.addresses;
    teardown = started.stop;
  }
  if (!addresses) {
    const config = loadStackConfig(process.env);
    await stackUp(config);
    addresses = { ...stackAddresses(config), source: 'local stack' };
  }
  console.log(`integration tests use the ${addresses.source}: Kafka ${addresses.KAFKA_BROKERS}, ClickHouse ${addresses.CLICKHOUSE_URL}`);
  project.provide('stack', addresses);
  return async () => {
    await teardown?.();
  };
}
