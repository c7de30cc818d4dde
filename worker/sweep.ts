/**
 * One sweep (decisions §5), a handler triggered by the loop, `kslate sweep`, `serve
 * --sweep-interval` or a Workers cron. An advisory lock makes a concurrent sweep a no-op.
 * Steps so far: reconcile classes; prune read sets and scope owners past the inference window.
 */
import type { Db } from '../db/port.js';
import type { Logger } from '../handlers/context.js';
import { INFERENCE_WINDOW_SECONDS } from '../handlers/inference.js';
import { reconcileClasses, type ClassSource, type ReconcileReport } from './reconcile-classes.js';

export const SWEEP_LOCK = 7_283_641_002;

export interface SweepDeps {
  db: Db;
  log: Logger;
  /** Where class manifests come from; absent = leave classes alone. */
  classSource?: () => Promise<ClassSource>;
  /** Called after classes changed, so this process's registry sees them at once. */
  onClassesChanged?: () => void;
  withLock<T>(key: number, fn: () => Promise<T>): Promise<T | null>;
}

export interface SweepReport {
  ran: boolean;
  classes?: ReconcileReport;
  /** Read-set entries and scope owners deleted because they outlived the inference window. */
  prunedReads?: number;
}

export async function sweep(deps: SweepDeps): Promise<SweepReport> {
  const res = await deps.withLock(SWEEP_LOCK, async () => {
    const report: SweepReport = { ran: true };
    if (deps.classSource) {
      report.classes = await reconcileClasses(deps.db, await deps.classSource(), deps.log);
      deps.onClassesChanged?.();
    }
    report.prunedReads = await deps.db.pruneReadSets(INFERENCE_WINDOW_SECONDS);
    return report;
  });
  return res ?? { ran: false };
}
