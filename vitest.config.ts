import { availableParallelism } from 'node:os';
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
    // vitest's default is one worker per core less one: a single file at a time on the 2-core
    // machines CI runs on, which left a core idle (load ~1.2) while tests waited on their
    // gateways, timers and PostgreSQL — 739 s for the suite. One file more than cores keeps
    // both busy (~400 s); ports (test/setup/ports.ts) and databases are per file, and the
    // tests wait on events, never on fixed sleeps, so they hold on the loaded machine. Capped
    // at 4 so a large machine does not open more connections than PostgreSQL's default allows.
    maxWorkers: Math.min(4, availableParallelism() + 1),
  },
});
