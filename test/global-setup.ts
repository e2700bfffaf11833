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
import { dropStaleTestDatabases } from '../scripts/lib/stale-databases.js';

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

/**
 * The services under test run on this Node.js (process.execPath): one before 22.15 has no
 * zstd in zlib, and a zstd batch would stop its partition. npm test and
 * npm run test:containers run on a supported one (scripts/node-runtime.mjs).
 */
function requireSupportedNode(): void {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  if (major < 22 || (major === 22 && minor < 15)) {
    throw new Error(
      `the integration tests run the services on this Node.js (${process.version}), older than 22.15 (no zstd): run them through npm test or npm run test:containers, or with node scripts/node-runtime.mjs vitest …`,
    );
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  requireSupportedNode();
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
    // The test databases earlier runs left on this stack, more than a day old: on the
    // local stack only, never on a cluster given in the environment.
    // Best effort: a stack that refuses the sweep (another profile's credentials) is tested as it is.
    const dropped = await dropStaleTestDatabases(addresses.CLICKHOUSE_URL).catch((error: unknown) => {
      console.log(`test databases of earlier runs not swept: ${(error as Error).message}`);
      return [];
    });
    if (dropped.length > 0) console.log(`dropped ${dropped.length} test databases earlier runs left more than a day ago`);
  }
  console.log(`integration tests use the ${addresses.source}: Kafka ${addresses.KAFKA_BROKERS}, ClickHouse ${addresses.CLICKHOUSE_URL}`);
  project.provide('stack', addresses);
  return async () => {
    await teardown?.();
  };
}
