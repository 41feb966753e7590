import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          include: ['shared/**/*.test.ts', 'services/**/*.test.ts', 'infra/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
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
