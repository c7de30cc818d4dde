import { defineConfig } from 'vitest/config';

/**
 * `npm run test:ha`: the high-availability tests (issue 34, docs/ha.md). Each file starts a
 * real cluster (etcd, Patroni-managed PostgreSQL 15 nodes, HAProxy; scripts/ha-deps.sh
 * installs them), so they run one file at a time and are not part of `npm test`.
 */
export default defineConfig({
  test: {
    include: ['test/ha/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 900_000,
    hookTimeout: 300_000,
    pool: 'forks',
  },
});
