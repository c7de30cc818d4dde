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
  | 'mcp_sessions_per_identity';

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
  /** Where the gauges read from. */
  gauges: GaugeSources;
}

/** The end reasons counted by svc_watch_ended_total; anything else is counted as `other`. */
const WATCH_END_REASONS = new Set(['slow', 'shutdown', 'revoked', 'max_age', 'recreated', 'closed', 'error']);

export function createMetrics(): PromMetrics {
  const registry = new Registry();
  const writes = new Counter({
    name: 'svc_writes_total',
    help: 'Applied writes (put, append).',
    labelNames: ['class', 'field', 'outcome'],
    registers: [registry],
  });
  const rejections = new Counter({
    name: 'svc_rejections_total',
    help: 'Rejected requests.',
    labelNames: ['class', 'field', 'role', 'outcome'],
    registers: [registry],
  });
  const claims = new Counter({
    name: 'svc_claims_total',
    help: 'Claim attempts (claim, renew, release, takeover).',
    labelNames: ['class', 'field', 'outcome'],
    registers: [registry],
  });
  const takeovers = new Counter({
    name: 'svc_takeovers_total',
    help: 'Successful takeovers of expired leases.',
    registers: [registry],
  });
  const latency = new Histogram({
    name: 'svc_write_latency_seconds',
    help: 'Latency of every non-GET request, including MCP tool calls.',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
    registers: [registry],
  });
  const checkpoints = new Counter({
    name: 'svc_checkpoints_total',
    help: 'Checkpoints saved.',
    labelNames: ['class', 'role'],
    registers: [registry],
  });
  const refusals = new Counter({
    name: 'svc_limit_refusals_total',
    help: 'Connections, watch streams and MCP sessions refused by a capacity limit (--max-conns, --max-conns-per-address, --watch-max-streams, --watch-max-streams-per-identity, --mcp-max-sessions, --mcp-max-sessions-per-identity).',
    labelNames: ['limit'],
    registers: [registry],
  });
  const ended = new Counter({
    name: 'svc_watch_ended_total',
    help: 'Watch streams ended, by reason: slow (the client did not read), revoked (role or credential), max_age, shutdown, recreated, closed (by the client).',
    labelNames: ['reason'],
    registers: [registry],
  });
  const reads = new Counter({
    name: 'svc_db_reads_total',
    help: 'Database reads of requests by where they were served: target="primary", or a standby\'s index in --database-replica-url order.',
    labelNames: ['target'],
    registers: [registry],
  });
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
    watchEnded: (reason) => ended.inc({ reason: WATCH_END_REASONS.has(reason) ? reason : 'other' }),
    write: (c, f, o) => writes.inc({ class: c, field: f, outcome: o }),
    rejection: (c, f, r, o) => rejections.inc({ class: c, field: f, role: r, outcome: o }),
    claim: (c, f, o) => claims.inc({ class: c, field: f, outcome: o }),
    takeover: () => takeovers.inc(),
    checkpoint: (c, r) => checkpoints.inc({ class: c, role: r }),
    writeLatency: (s) => latency.observe(s),
  };
}
