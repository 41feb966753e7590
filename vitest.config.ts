import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'unit',
          // Unit tests first and on their own; then the integration files, two at a time.
          sequence: { groupOrder: 0 },
          include: ['shared/**/*.test.ts', 'services/**/*.test.ts', 'infra/**/*.test.ts', 'bench/**/*.test.ts'],
          environment: 'node',
        },
      },
      {
        test: {
          name: 'integration',
          sequence: { groupOrder: 1 },
          include: ['test/**/*.test.ts'],
          exclude: ['test/soak/**', 'test/failures/cluster-faults.test.ts'],
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
      {
        test: {
          // Three brokers, two ingresses and three workers under crash faults, with a Postgres of its
          // own. Last and alone in `npm test` (`npm run test:distributed` runs just this one).
          name: 'distributed',
          sequence: { groupOrder: 3 },
          include: ['test/failures/cluster-faults.test.ts'],
          environment: 'node',
          globalSetup: ['test/global-setup.ts'],
          testTimeout: 1_200_000,
          hookTimeout: 180_000,
          pool: 'forks',
          maxWorkers: 1,
        },
      },
      {
        test: {
          name: 'soak',
          // Last and alone: its RSS and lag criteria judge the bridge, not the integration file that
          // would otherwise run beside it on a small machine, whose backlog grows the services' RSS
          // and would read as a leak.
          sequence: { groupOrder: 2 },
          include: ['test/soak/**/*.test.ts'],
          environment: 'node',
          globalSetup: ['test/global-setup.ts'],
          hookTimeout: 180_000,
          pool: 'forks',
          maxWorkers: 1,
        },
      },
    ],
  },
});
