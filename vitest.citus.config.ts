import { defineConfig } from 'vitest/config';

/**
 * `npm run test:citus`: kslate on a Citus cluster (issue 35, docs/scale-out.md); Citus is
 * built from KSLATE_CITUS_SRC by scripts/citus-build.sh (cached). Not part of `npm test`.
 *
 * - `citus`: test/citus, each file starting its own coordinator and two workers
 *   (test/citus/cluster.ts), one file at a time.
 * - `citus-behaviour`: the behaviour files of `npm test` (BEHAVIOUR below), unchanged, on one
 *   cluster for the run (test/citus/global.ts) — each file on its own database cloned on
 *   every node. The runtime-only files (process start-up, configuration, TLS, metrics, the
 *   chart, Workers, OpenAPI generation) do not depend on the database's shape and stay in
 *   `npm test` only.
 */
export const BEHAVIOUR = [
  'test/handlers/put.test.ts',
  'test/handlers/get.test.ts',
  'test/handlers/history.test.ts',
  'test/handlers/history-rendered.test.ts',
  'test/handlers/claim.test.ts',
  'test/handlers/checkpoint.test.ts',
  'test/handlers/premises.test.ts',
  'test/handlers/handover.test.ts',
  'test/handlers/rejection-order.test.ts',
  'test/handlers/input-strictness.test.ts',
  'test/handlers/errors.test.ts',
  'test/handlers/smoke.test.ts',
  'test/handlers/classes.test.ts',
  'test/handlers/class-registry.test.ts',
  'test/handlers/cursor.test.ts',
  'test/transports/grpc-writes.test.ts',
  'test/transports/grpc-history.test.ts',
  'test/handlers/append.test.ts',
  'test/handlers/get-rendered.test.ts',
  'test/handlers/write-decision.test.ts',
  'test/handlers/claim-race.test.ts',
  'test/handlers/concurrency.test.ts',
  'test/handlers/query-spread.test.ts',
  'test/handlers/lease-wait.test.ts',
  'test/handlers/query.test.ts',
  'test/worker/lapsed-gauges.test.ts',
  'test/worker/sweep.test.ts',
  'test/worker/prune.test.ts',
  'test/transports/record-ttl.test.ts',
  'test/handlers/response-budget.test.ts',
  'test/transports/parity.test.ts',
  // The record and class watch (a log position per node group, merged; test/citus/class-watch.test.ts).
  'test/watch/record.test.ts',
  'test/watch/transaction.test.ts',
  'test/watch/retention-window.test.ts',
];

/**
 * Behaviour files not yet run on Citus (issue 35, left to do), and why:
 * - grpc, mcp: their query cases pass on Citus (one creation order, migration 0017), but the
 *   rejected-credential budget cases (a second gateway on the loaded coordinator) did not
 *   see RATE_LIMITED there (not yet looked into);
 * - round-trips: asserts plain PostgreSQL plans (EXPLAIN of local tables);
 * - test/worker/expire: the sweep's expiry runs on Citus (one delegated call per shard,
 *   migration 0017; record-ttl and lapsed-gauges sweep there), but the 5,000-record case takes longer
 *   than its timeout through the loaded coordinator, and its held-row case counts every due
 *   record of the class, of which Citus leaves one behind from an earlier case (not yet found);
 * - the watch (i35watch; the class watch reads a position per node group, merged, and
 *   test/citus/class-watch.test.ts passes): test/watch/class.test.ts passed 8 of 9 on Citus,
 *   its 410 case's 1-second window elapsing before the oldest cursor was sent back at load
 *   average 28 (the EXPIRED answer's per-node reads; not confirmed to be only that);
 *   test/transports/grpc-watch.test.ts expects two streams resumed from one cursor to give
 *   byte-equal event ids, which on Citus they need not be (each id carries its stream's own
 *   position in the other nodes' logs; both resume right); test/transports/mcp-subscribe.test.ts
 *   failed 2 cases (a 404 on the owed notification's GET stream, an idle-session timeout; not
 *   yet looked into); the other test/watch files (limits, budgets, memory, fan-out) are
 *   runtime behaviour not yet tried there.
 */
export const NOT_YET = [
  'test/transports/grpc.test.ts',
  'test/transports/mcp.test.ts',
  'test/handlers/round-trips.test.ts',
  'test/worker/expire.test.ts',
];

export default defineConfig({
  test: {
    projects: [
      {
        test: {
          name: 'citus',
          include: ['test/citus/**/*.test.ts'],
          fileParallelism: false,
          testTimeout: 300_000,
          hookTimeout: 600_000,
          pool: 'forks',
        },
      },
      {
        test: {
          name: 'citus-behaviour',
          include: BEHAVIOUR,
          globalSetup: ['test/citus/global.ts'],
          fileParallelism: true,
          maxWorkers: 2,
          testTimeout: 60_000,
          hookTimeout: 120_000,
          pool: 'forks',
        },
      },
    ],
  },
});
