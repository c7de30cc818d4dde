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
  'test/transports/mcp.test.ts',
  'test/handlers/transaction.test.ts',
  'test/handlers/render-agree.test.ts',
  'test/transports/transaction.test.ts',
  'test/transports/idempotency.test.ts',
  'test/transports/history-truncated.test.ts',
  'test/transports/mcp-resources.test.ts',
  'test/transports/grpc-limits.test.ts',
  'test/transports/grpc-trailers.test.ts',
  'test/transports/grpc-health.test.ts',
  'test/worker/retention.test.ts',
  'test/worker/ttl-race.test.ts',
  'test/ui/session.test.ts',
  'test/ui/truncated.test.ts',
  'test/db/named-query.test.ts',
  'test/handlers/write-batching.test.ts',
  'test/worker/expire.test.ts',
];

/**
 * Behaviour files not yet run on Citus (issue 35, left to do), and why:
 * - round-trips: asserts plain PostgreSQL plans (EXPLAIN of local tables: `history_record`
 *   index, `history_pkey` loops, generic plans in pg_prepared_statements). Its statement
 *   counts hold on Citus too, but the plan half needs the Citus form (one delegated call;
 *   EXPLAIN of the worker's task) - not written yet.
 * - retention-budget: its wall-clock case (a sweep stays under 2.5 s on a 1 s budget) saw one
 *   1,000-row `fields` walk batch take 3.1-5.0 s through the coordinator (load average ~20 on 2
 *   cores): one batch is the sweep's unit of work, so on Citus the batch or the budget needs
 *   sizing per shard first. Its purge case passes on Citus.
 * - durability: relaxed writes are strict on Citus by design (db/kysely/conn.ts `relaxable`:
 *   the coordinator's SET LOCAL does not reach the worker that commits), and its probe is a
 *   trigger on `history`, which Citus refuses on a distributed table.
 * - write-batch, write-batch-durability (test/db): drive the port's batcher directly, which is
 *   off on Citus (docs/scale-out.md "No coalesced writes"), with a probe trigger on a
 *   distributed table; test/handlers/write-batching checks the Citus side (every write alone).
 * - ui/console: its live cases read the record's watch stream, which rides the change log
 *   (test/watch, i35watch); the countdown case fails as a knock-on (its 600 s lease is taken
 *   in beforeAll and the two failing live cases' waits spend 78 s of it). Its other cases
 *   pass on Citus. (ui/session and ui/truncated run.)
 * - grpc: 25 of 26 cases pass on Citus; the rejected-credential budget case sent 2,000 wrong
 *   keys over TLS in bursts of 100 and the gateway answered ~40 a second, under the bucket's
 *   50/s refill, so no burst could spend it (load average ~20 on 2 cores; the check makes no
 *   database call - on plain PostgreSQL the same case spends it in 3.4 s). mcp's case, the
 *   same budget over HTTP, now passes on Citus.
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
 * Runtime-only files with no database (surface, grpc-convert, ui/timeline, db/errors) stay in
 * `npm test` only, like the others above.
 */
export const NOT_YET = [
  'test/handlers/round-trips.test.ts',
  'test/worker/retention-budget.test.ts',
  'test/transports/grpc.test.ts',
  'test/handlers/durability.test.ts',
  'test/db/write-batch.test.ts',
  'test/db/write-batch-durability.test.ts',
  'test/ui/console.test.ts',
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
