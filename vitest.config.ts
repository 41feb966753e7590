import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // Unit tests first and on their own; then the integration files, two at a time.
          sequence: { groupOrder: 0 },
          include: ['shared/**/*.test.ts', 'services/**/*.test.ts', 'infra/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          sequence: { groupOrder: 1 },
          include: ['test/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 120_000,
          hookTimeout: 180_000,
          pool: 'forks',
          // Two cores: more files in parallel only adds contention with the broker and Postgres.
          maxWorkers: 2,
          fileParallelism: true,
        },
      },
    ],
  },
});
