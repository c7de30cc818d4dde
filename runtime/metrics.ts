/** The spec's gateway metrics on a registry of our own (not prom-client's global default). */
import { Counter, Histogram, Registry } from 'prom-client';
import type { Metrics } from '../handlers/context.js';

export interface PromMetrics extends Metrics {
  registry: Registry;
}

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
  return {
    registry,
    write: (c, f, o) => writes.inc({ class: c, field: f, outcome: o }),
    rejection: (c, f, r, o) => rejections.inc({ class: c, field: f, role: r, outcome: o }),
    claim: (c, f, o) => claims.inc({ class: c, field: f, outcome: o }),
    takeover: () => takeovers.inc(),
    checkpoint: (c, r) => checkpoints.inc({ class: c, role: r }),
    writeLatency: (s) => latency.observe(s),
  };
}
