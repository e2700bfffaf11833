import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['services/**/*.test.ts', 'schemas/**/*.test.ts', 'scripts/**/*.test.ts', 'clients/**/*.test.ts', 'test/**/*.test.ts'],
          exclude: ['**/*.integration.test.ts', '**/*.containers.test.ts', '**/node_modules/**'],
        },
      },
      {
        test: {
          name: 'integration',
          include: ['services/**/*.integration.test.ts', 'clients/**/*.integration.test.ts', 'test/**/*.integration.test.ts'],
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          // Two cores: integration files spawn real service processes; run them one at a time.
          fileParallelism: false,
        },
      },
    ],
  },
});
