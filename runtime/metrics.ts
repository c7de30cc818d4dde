/** The spec's gateway metrics on a registry of our own (not prom-client's global default). */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { Metrics } from '../handlers/context.js';

/** The capacity limits whose refusals are counted (fixed label values of svc_limit_refusals_total). */
export type Limit =
  | 'conns'
  | 'conns_per_address'
  | 'watch_streams'
  | 'watch_streams_per_identity'
  | 'mcp_sessions'
  | 'mcp_sessions_per_identity'
  /** A write refused because the write batcher's queue was full (--write-queue-max). */
  | 'write_queue';

/** What the gauges read at each scrape; the gateway sets them once its parts exist. */
export interface GaugeSources {
  watchStreams(): number;
  watchBufferedBytes(): number;
  mcpSessions(): number;
  /** The standbys serving reads (db/kysely/replicas.ts), by index. */
  replicas(): { replica: string; up: boolean; lagSeconds: number | null }[];
}

export interface PromMetrics extends Metrics {
  registry: Registry;
  /** A connection, stream or session refused by a capacity limit. */
  limitRefused(limit: Limit): void;
  /** A watch stream ended, by its reason (slow, shutdown, revoked, max_age, recreated, closed). */
  watchEnded(reason: string): void;
  /** A read was served by `target`: `primary` or a standby's index (--database-replica-url order). */
  dbRead(target: string): void;
  /** A write statement sent by the write batcher: 1 for a write alone, n for a batch of n (--write-batching). */
  writeBatch(size: number): void;
  /** Where the gauges read from. */
  gauges: GaugeSources;
}

/** The end reasons counted by svc_watch_ended_total; anything else is counted as `other`. */
const WATCH_END_REASONS = new Set(['slow', 'shutdown', 'revoked', 'max_age', 'recreated', 'closed', 'error']);

/**
 * The metric constructors on one registry: a metric is its name, its help and its labels, so
 * each declaration below (and the worker's, worker-metrics.ts) is one line of those.
 */
export function metricsOn(registry: Registry) {
  return {
    counter: <const L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
      new Counter<L>({ name, help, labelNames, registers: [registry] }),
    gauge: <const L extends string = never>(name: string, help: string, labelNames: readonly L[] = []) =>
      new Gauge<L>({ name, help, labelNames, registers: [registry] }),
  };
}

export function createMetrics(): PromMetrics {
  const registry = new Registry();
  const { counter } = metricsOn(registry);
  const writes = counter('svc_writes_total', 'Applied writes (put, append).', ['class', 'field', 'outcome']);
  const rejections = counter('svc_rejections_total', 'Rejected requests.', ['class', 'field', 'role', 'outcome']);
  const claims = counter('svc_claims_total', 'Claim attempts (claim, renew, release, takeover).', ['class', 'field', 'outcome']);
  const takeovers = counter('svc_takeovers_total', 'Successful takeovers of expired leases.');
  const latency = new Histogram({
    name: 'svc_write_latency_seconds',
    help: 'Latency of every non-GET request, including MCP tool calls.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const batches = new Histogram({
    name: 'svc_write_batch_size',
    help: 'Writes per write statement with --write-batching on: 1 for a write sent alone (a lane was free), n for n writes coalesced into one statement and one commit.',
    buckets: [1, 2, 4, 8, 16, 32, 64],
    registers: [registry],
  });
  const checkpoints = counter('svc_checkpoints_total', 'Checkpoints saved.', ['class', 'role']);
  const refusals = counter('svc_limit_refusals_total', 'Connections, watch streams and MCP sessions refused by a capacity limit (--max-conns, --max-conns-per-address, --watch-max-streams, --watch-max-streams-per-identity, --mcp-max-sessions, --mcp-max-sessions-per-identity), and writes refused by a full write queue (--write-queue-max).', ['limit']);
  const ended = counter('svc_watch_ended_total', 'Watch streams ended, by reason: slow (the client did not read), revoked (role or credential), max_age, shutdown, recreated, closed (by the client).', ['reason']);
  const reads = counter('svc_db_reads_total', 'Database reads of requests by where they were served: target="primary", or a standby\'s index in --database-replica-url order.', ['target']);
  const gauges: GaugeSources = { watchStreams: () => 0, watchBufferedBytes: () => 0, mcpSessions: () => 0, replicas: () => [] };
  new Gauge({
    name: 'svc_replica_lag_seconds',
    help: "How far each standby's replay is behind the primary (how long ago the primary passed the position it has replayed); absent while the standby is down.",
    labelNames: ['replica'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of gauges.replicas()) if (r.lagSeconds !== null) this.set({ replica: r.replica }, r.lagSeconds);
    },
  });
  new Gauge({
    name: 'svc_replica_up',
    help: 'Whether each standby answers and is used for reads (1) or is skipped until it answers again (0).',
    labelNames: ['replica'],
    registers: [registry],
    collect() {
      this.reset();
      for (const r of gauges.replicas()) this.set({ replica: r.replica }, r.up ? 1 : 0);
    },
  });
  const gauge = (name: string, help: string, read: () => number) =>
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  gauge('svc_watch_streams', 'Open watch streams (SSE, gRPC and MCP subscriptions).', () => gauges.watchStreams());
  gauge(
    'svc_watch_buffered_bytes',
    'Bytes the watch streams hold for their clients (catch-up reads not yet sent, the event being written); at most about --watch-buffer.',
    () => gauges.watchBufferedBytes(),
  );
  gauge('svc_mcp_sessions', 'Open MCP sessions (/mcp/session).', () => gauges.mcpSessions());
  return {
    registry,
    gauges,
    limitRefused: (limit) => refusals.inc({ limit }),
    dbRead: (target) => reads.inc({ target }),
    writeBatch: (size) => batches.observe(size),
    watchEnded: (reason) => ended.inc({ reason: WATCH_END_REASONS.has(reason) ? reason : 'other' }),
    write: (c, f, o) => writes.inc({ class: c, field: f, outcome: o }),
    rejection: (c, f, r, o) => rejections.inc({ class: c, field: f, role: r, outcome: o }),
    claim: (c, f, o) => claims.inc({ class: c, field: f, outcome: o }),
    takeover: () => takeovers.inc(),
    checkpoint: (c, r) => checkpoints.inc({ class: c, role: r }),
    writeLatency: (s) => latency.observe(s),
  };
}
