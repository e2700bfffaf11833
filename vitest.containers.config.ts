// npm run test:containers (docs/containers.md): the integration tests against Kafka,
// the registry, Redis and ClickHouse in containers that testcontainers starts from the
// images `npm run images` builds, plus the user module's own test. Left out: the tests
// of the local stack itself (its scripts, the chaos suite, which stops and starts the
// stack's processes), npm test's container test, and the fault tests (`*.faults.test.ts`:
// the stack's three-broker and ClickHouse cluster profiles among them).
import { defineConfig } from 'vitest/config';
import { sourceConditions } from './vitest.config.js';

export default defineConfig({
  resolve: { conditions: sourceConditions },
  ssr: { resolve: { conditions: sourceConditions, externalConditions: ['otm-source'] } },
  test: {
    name: 'containers',
    include: [
      'services/**/*.integration.test.ts',
      'clients/**/*.integration.test.ts',
      'test/**/*.integration.test.ts',
      'clients/**/*.containers.test.ts',
      'test/**/*.containers.test.ts',
    ],
    exclude: [
      'test/stack.integration.test.ts',
      'test/chaos.integration.test.ts',
      // npm test's part of this very suite (it runs the module test with a container stack of its own).
      'test/containers.integration.test.ts',
      '**/node_modules/**',
    ],
    globalSetup: ['test/global-setup.ts'],
    testTimeout: 180_000,
    hookTimeout: 240_000,
    fileParallelism: false,
  },
});
