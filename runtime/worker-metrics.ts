/**
 * The worker's metrics (interface "Worker metrics"), on a registry of its own. The gauges are
 * computed in the sweep (never on scrape, so a scrape costs no database work) and replaced
 * whole after each sweep: a class that is gone from the class table drops its series. Label
 * values come only from the class table (class and role names), never from requests.
 */
import { Counter, Gauge, Registry } from 'prom-client';
import type { ClassRow, WorkerGauges } from '../db/port.js';
import type { SweepReport } from '../worker/sweep.js';

export interface WorkerMetrics {
  registry: Registry;
  setGauges(g: WorkerGauges, classes: ClassRow[]): void;
  sweepDone(r: SweepReport): void;
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  const records = new Gauge({ name: 'svc_records', help: 'Live records.', labelNames: ['class'], registers: [registry] });
  const history = new Gauge({ name: 'svc_history_rows', help: 'History rows.', labelNames: ['class'], registers: [registry] });
  const lapsed = new Gauge({
    name: 'svc_leases_lapsed',
    help: 'Task fields with a lapsed lease nobody reclaimed.',
    registers: [registry],
  });
  const wroteNothing = new Gauge({
    name: 'svc_role_wrote_nothing',
    help: 'Live records on which no identity of the role has written.',
    labelNames: ['class', 'role'],
    registers: [registry],
  });
  const keys = new Gauge({
    name: 'svc_idempotency_keys',
    help: 'Idempotency keys stored with their answers (issue 33), expired ones awaiting the sweep included.',
    registers: [registry],
  });
  const duration = new Gauge({
    name: 'svc_sweep_duration_seconds',
    help: 'How long the last sweep that ran took.',
    registers: [registry],
  });
  const lastSuccess = new Gauge({
    name: 'svc_sweep_last_success_timestamp_seconds',
    help: 'When the last sweep whose every step succeeded ended (Unix time).',
    registers: [registry],
  });
  const refused = new Gauge({
    name: 'svc_classes_refused',
    help: 'Class manifests (SharedContext objects) the last class reconcile refused: invalid, a duplicate name or a kind change. The worker log (once per change) and the Accepted condition say why.',
    registers: [registry],
  });
  const sweeps = new Counter({
    name: 'svc_sweeps_total',
    help: 'Sweeps that ran, by outcome (ok: every step succeeded; failed: a step failed). A refused manifest is svc_classes_refused, not a failure.',
    labelNames: ['outcome'],
    registers: [registry],
  });
  const expired = new Counter({ name: 'svc_records_expired_total', help: 'Records deleted by TTL expiry.', registers: [registry] });
  for (const o of ['ok', 'failed']) sweeps.inc({ outcome: o }, 0);
  return {
    registry,
    setGauges(g, classes) {
      const known = new Set(classes.map((c) => c.name));
      records.reset();
      history.reset();
      wroteNothing.reset();
      for (const [cls, n] of g.records) if (known.has(cls)) records.set({ class: cls }, n);
      for (const [cls, n] of g.historyRows) if (known.has(cls)) history.set({ class: cls }, n);
      for (const [key, n] of g.roleWroteNothing) {
        const i = key.indexOf('/');
        const cls = key.slice(0, i);
        if (known.has(cls)) wroteNothing.set({ class: cls, role: key.slice(i + 1) }, n);
      }
      lapsed.set(g.leasesLapsed);
      if (g.idempotencyKeys !== undefined) keys.set(g.idempotencyKeys);
    },
    sweepDone(r) {
      if (!r.ran) return;
      duration.set(r.durationMs / 1000);
      sweeps.inc({ outcome: r.ok ? 'ok' : 'failed' });
      if (r.ok) lastSuccess.set(Date.now() / 1000);
      if (r.expired) expired.inc(r.expired.records);
      if (r.classes) refused.set(r.classes.refusedCount);
    },
  };
}
