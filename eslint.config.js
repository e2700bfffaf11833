// Lint: the recommended rules of ESLint and typescript-eslint. Formatting is
// Prettier's job (npm run format), checked by npm run lint.
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '.stack/', '**/dist/', 'screenshots/', 'scratch/', 'schemas/src/generated/', 'clients/*/src/generated/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { console: 'readonly', process: 'readonly', performance: 'readonly', fetch: 'readonly' } },
    rules: {
      // Tests read JSON answers whose shape the assertions check.
      '@typescript-eslint/no-explicit-any': 'off',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-empty': ['error', { allowEmptyCatch: false }],
      // TypeScript checks names (typescript-eslint's advice): the SDK uses web globals.
      'no-undef': 'off',
    },
  },
  {
    // One Kafka seam: the client libraries are used through services/shared/src/kafka.ts
    // (kafkajs) and kafka-platformatic.ts (@platformatic/kafka, the gateway's sender) only,
    // so a client can be swapped in one place. (The examples are standalone programs; the
    // bench's client comparison measures the clients themselves.)
    files: ['**/*.ts'],
    ignores: [
      'services/shared/src/kafka.ts',
      'services/shared/src/kafka-platformatic.ts',
      'scripts/bench/sections/kafka-clients.ts',
      'examples/**',
    ],
    rules: {
      'no-restricted-imports': [
        'error',
        {
          paths: [
            { name: 'kafkajs', message: 'Use @otm/shared/kafka (services/shared/src/kafka.ts): the one Kafka seam.' },
            { name: '@platformatic/kafka', message: 'Use @otm/shared/kafka (openRecordSender): the one Kafka seam.' },
          ],
        },
      ],
    },
  },
  {
    files: ['services/shared/src/kafka-platformatic.ts'],
    rules: {
      'no-restricted-imports': ['error', { paths: [{ name: 'kafkajs', message: 'kafkajs stays in kafka.ts.' }] }],
    },
  },
);
