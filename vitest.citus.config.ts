import { defineConfig } from 'vitest/config';

/**
 * `npm run test:citus`: kslate on a Citus cluster (issue 35, docs/scale-out.md). Each file
 * starts a coordinator and two workers (test/citus/cluster.ts; Citus is built from
 * KSLATE_CITUS_SRC by scripts/citus-build.sh, cached), so they run one file at a time and
 * are not part of `npm test`.
 */
export default defineConfig({
  test: {
    include: ['test/citus/**/*.test.ts'],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 600_000,
    pool: 'forks',
  },
});
