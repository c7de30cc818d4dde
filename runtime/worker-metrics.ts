/**
 * The worker's metrics (interface "Worker metrics"), on a registry of its own. The gauges are
 * computed in the sweep (never on scrape, so a scrape costs no database work) and replaced
 * whole after each sweep: a class that is gone from the class table drops its series. Label
 * values come only from the class table (class and role names), never from requests.
 */
import { Registry } from 'prom-client';
import type { ClassRow, WorkerGauges } from '../db/port.js';
import type { SweepReport } from '../worker/sweep.js';
import { metricsOn } from './metrics.js';

export interface WorkerMetrics {
  registry: Registry;
  setGauges(g: WorkerGauges, classes: ClassRow[]): void;
  sweepDone(r: SweepReport): void;
}

export function createWorkerMetrics(): WorkerMetrics {
  const registry = new Registry();
  const { counter, gauge } = metricsOn(registry);
  const records = gauge('svc_records', 'Live records.', ['class']);
  const history = gauge('svc_history_rows', 'History rows.', ['class']);
  const lapsed = gauge('svc_leases_lapsed', 'Task fields with a lapsed lease nobody reclaimed.');
  const wroteNothing = gauge('svc_role_wrote_nothing', 'Live records on which no identity of the role has written.', ['class', 'role']);
  const keys = gauge('svc_idempotency_keys', 'Idempotency keys stored with their answers (issue 33), expired ones awaiting the sweep included.');
  const duration = gauge('svc_sweep_duration_seconds', 'How long the last sweep that ran took.');
  const lastSuccess = gauge('svc_sweep_last_success_timestamp_seconds', 'When the last sweep whose every step succeeded ended (Unix time).');
  const refused = gauge('svc_classes_refused', 'Class manifests (SharedContext objects) the last class reconcile refused: invalid, a duplicate name or a kind change. The worker log (once per change) and the Accepted condition say why.');
  const sweeps = counter('svc_sweeps_total', 'Sweeps that ran, by outcome (ok: every step succeeded; failed: a step failed). A refused manifest is svc_classes_refused, not a failure.', ['outcome']);
  const expired = counter('svc_records_expired_total', 'Records deleted by TTL expiry.');
  const purged = counter('svc_history_purged_total', 'History rows purged by the class history retention (spec.history), per class.', ['class']);
  const oldest = gauge('svc_history_oldest_row_age_seconds', 'Age of the oldest retained history row, per class (classes with history only).', ['class']);
  let knownClasses = new Set<string>();
  for (const o of ['ok', 'failed']) sweeps.inc({ outcome: o }, 0);
  return {
    registry,
    setGauges(g, classes) {
      const known = new Set(classes.map((c) => c.name));
      knownClasses = known;
      records.reset();
      oldest.reset();
      for (const [cls, at] of g.oldestHistory ?? []) {
        if (known.has(cls)) oldest.set({ class: cls }, Math.max(0, (Date.now() - at.getTime()) / 1000));
      }
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
      // Label values only from the class table: a class unknown to the last gauges is left out.
      for (const [cls, n] of r.retention?.purged ?? []) if (knownClasses.has(cls) || knownClasses.size === 0) purged.inc({ class: cls }, n);
      if (r.classes) refused.set(r.classes.refusedCount);
    },
  };
}
