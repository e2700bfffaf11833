import { defineConfig } from 'vitest/config';

/**
 * Tests run the workspaces' TypeScript sources, never a stale dist/: the packages export
 * their sources under the `otm-source` condition. Not `module`: it would pick bundler-only
 * builds (@opentelemetry/api's ESM build, which prom-client loads, has extensionless imports).
 */
export const sourceConditions = ['otm-source', 'node', 'development|production'];

/** The suites on real services (integration and faults): the stack's setup, longer timeouts. */
const onServices = {
  globalSetup: ['test/global-setup.ts'],
  testTimeout: 120_000,
  hookTimeout: 180_000,
  // Two cores: these files spawn real service processes; run them one at a time.
  fileParallelism: false,
};

export default defineConfig({
  resolve: { conditions: sourceConditions },
  ssr: { resolve: { conditions: sourceConditions, externalConditions: ['otm-source'] } },
  test: {
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          // The unit files run beside the integration files' services on two shared cores:
          // a test of a second alone can take several there. The timeout catches a hang,
          // not slowness (speed is the bench's to measure).
          testTimeout: 30_000,
          include: ['services/**/*.test.ts', 'schemas/**/*.test.ts', 'scripts/**/*.test.ts', 'clients/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['**/*.integration.test.ts', '**/*.faults.test.ts', '**/*.containers.test.ts', '**/node_modules/**'],
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: ['services/**/*.integration.test.ts', 'clients/**/*.integration.test.ts', 'test/**/*.integration.test.ts'],
          ...onServices,
        },
      },
      {
        extends: true,
        test: {
          // Faults at length on real services (outages, kills, replicas): `npm run test:faults`,
          // not `npm test`, which keeps a smoke of each.
          name: 'faults',
          include: ['services/**/*.faults.test.ts', 'test/**/*.faults.test.ts'],
          ...onServices,
        },
      },
    ],
  },
});
