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
  'test/handlers/history-time.test.ts',
  'test/handlers/get-bytes.test.ts',
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
  'test/handlers/history-null.test.ts',
  'test/handlers/keyed-literals.test.ts',
  // Its live cases read the record's watch stream (the change log, a position per node group).
  'test/ui/console.test.ts',
  // Its 410 case waits for the old cursor to expire in a 4 s window (1 s did not hold a put,
  // the 410 and the resume at load 28); its open-transaction case writes on the record's node.
  'test/watch/class.test.ts',
  // On Citus it compares the changes each id resumes with, not the ids' bytes (each id holds its
  // stream's own position in the other node groups' logs; docs/scale-out.md "Class watch ids").
  'test/transports/grpc-watch.test.ts',
  // Its TLS gateway's rejected-credential bucket refills at 5/s (a loaded TLS gateway answered
  // fewer wrong keys a second than the spec's 50/s refill, so no burst spent it).
  'test/transports/grpc.test.ts',
  // A walk's first batch on Citus is the 100-row probe (RETENTION_FIRST_BATCH_BY_RECORD).
  'test/worker/retention-budget.test.ts',
  // Its statement counts as they are (each write one delegated call); its plan halves are
  // plain PostgreSQL's, a named CITUS branch in the file says why they stop there.
  'test/handlers/round-trips.test.ts',
  // Its slow-client case's 1,000 subscribes get 240 s on Citus (each a get and a watch open
  // through the coordinator: 65-100 ms there at CI's load against ~8 ms plain).
  'test/transports/mcp-subscribe.test.ts',
  // The watch's runtime bounds over a Citus-backed change log: slow clients, stream caps,
  // backpressure, memory (16 MiB of history), credentials; fan-out over two gateway processes,
  // whose order check is per node group there (the class stream merges one log per group).
  'test/watch/limits.test.ts',
  'test/watch/credential.test.ts',
  'test/watch/backpressure.test.ts',
  'test/watch/memory.test.ts',
  'test/watch/fanout.test.ts',
];

/**
 * Behaviour files not yet run on Citus (issue 35, left to do), and why:
 * - durability: relaxed writes are strict on Citus by design (db/kysely/conn.ts `relaxable`:
 *   the coordinator's SET LOCAL does not reach the worker that commits), and its probe is a
 *   trigger on `history`, which Citus refuses on a distributed table.
 * - write-batch, write-batch-durability (test/db): drive the port's batcher directly, which is
 *   off on Citus (docs/scale-out.md "No coalesced writes"), with a probe trigger on a
 *   distributed table; test/handlers/write-batching checks the Citus side (every write alone).
 * Runtime-only files with no database (surface, grpc-convert, ui/timeline, db/errors,
 * watch/budget, watch/position) stay in `npm test` only, like the others above.
 */
export const NOT_YET = [
  'test/handlers/durability.test.ts',
  'test/db/write-batch.test.ts',
  'test/db/write-batch-durability.test.ts',
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
