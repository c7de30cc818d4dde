import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // The HA tests start a Patroni cluster each: `npm run test:ha` (vitest.ha.config.ts); the
    // Citus tests a Citus cluster each: `npm run test:citus` (vitest.citus.config.ts).
    exclude: ['test/ha/**', 'test/citus/**', 'node_modules/**'],
    globalSetup: ['test/setup/global.ts'],
    // Each file gets its own database cloned from a migrated template, so files run in parallel.
    fileParallelism: true,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    pool: 'forks',
  },
});
