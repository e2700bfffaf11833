// Finds the real services for the integration tests, in this order:
//   1. addresses given in the environment (KAFKA_BROKERS, SCHEMA_REGISTRY_URL,
//      REDIS_URL, CLICKHOUSE_URL), for example a shared test cluster;
//   2. with OTM_TEST_STACK=containers (npm run test:containers), containers started
//      by testcontainers from the images `npm run images` builds (docs/containers.md);
//   3. otherwise the local stack (scripts/stack), started once and reused if up.
// If none can start, the run fails and says why: integration tests never skip.
import type { TestProject } from 'vitest/node';
import { loadStackConfig, stackAddresses } from '../scripts/stack/config.js';
import { stackUp } from '../scripts/stack/services.js';
import { dockerHost } from '../scripts/lib/docker-engine.js';
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

let teardown: (() => Promise<void>) | undefined;

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  let addresses = fromEnvironment();
  if (!addresses && process.env.OTM_TEST_STACK === 'containers') {
    const host = dockerHost();
    if (!host) throw new Error('OTM_TEST_STACK=containers but no Docker engine answers: run `npm run docker -- up` first');
    process.env.DOCKER_HOST = host;
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
