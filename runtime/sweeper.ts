/**
 * The Node trigger of the sweep handler (worker/sweep.ts): one sweep at a time in this
 * process, every `intervalMs`, sooner when `trigger()` is called (a class watch event), and
 * a `stop()` that aborts the running sweep between statements and waits for it to release
 * its lease. Used by `kslate worker`, `serve --sweep-interval` and `kslate dev`; `kslate
 * sweep` calls the handler once directly.
 */
import type { Logger } from '../handlers/context.js';
import { sweep, DEFAULT_BUDGET_MS, type SweepDeps, type SweepReport } from '../worker/sweep.js';

export interface SweeperOptions {
  deps: Omit<SweepDeps, 'signal'>;
  log: Logger;
  intervalMs?: number;
  budgetMs?: number;
  /** Called after every sweep that ran (metrics, readiness). */
  onReport?: (r: SweepReport) => void;
}

export interface Sweeper {
  /** Run one sweep now (or join the one running) and return its report. */
  runNow(): Promise<SweepReport>;
  /** Ask for a sweep soon (coalesced with one already due or running). */
  trigger(): void;
  /** Start the interval loop (a first sweep after `intervalMs`). */
  start(): void;
  /**
   * Stop the loop, abort a running sweep between statements and wait for it (at most
   * `waitMs`; true when it ended in time).
   */
  stop(waitMs?: number): Promise<boolean>;
  readonly lastReport: SweepReport | null;
}

/** The time budget of the budgeted steps: 30 s, or half the interval when that is shorter. */
export function defaultBudget(intervalMs: number | undefined): number {
  return intervalMs ? Math.max(1_000, Math.min(DEFAULT_BUDGET_MS, intervalMs / 2)) : DEFAULT_BUDGET_MS;
}

export function createSweeper(o: SweeperOptions): Sweeper {
  const budgetMs = o.budgetMs ?? defaultBudget(o.intervalMs);
  let running: Promise<SweepReport> | null = null;
  let again = false;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let soon: NodeJS.Timeout | undefined;
  const ac = new AbortController();
  let last: SweepReport | null = null;

  const runNow = (): Promise<SweepReport> => {
    if (running) return running;
    running = sweep({ ...o.deps, signal: ac.signal }, { budgetMs })
      .then((r) => {
        if (r.ran) {
          last = r;
          o.onReport?.(r);
        }
        return r;
      })
      .finally(() => {
        running = null;
        if (again && !stopped) {
          again = false;
          void tick();
        }
      });
    return running;
  };
  const schedule = () => {
    if (stopped || !o.intervalMs) return;
    clearTimeout(timer);
    timer = setTimeout(() => void tick(), o.intervalMs);
    timer.unref();
  };
  const tick = async () => {
    try {
      await runNow();
    } catch (e) {
      o.log.warn('sweep failed; will retry next interval', { error: (e as Error)?.message });
    } finally {
      schedule();
    }
  };
  return {
    runNow,
    trigger() {
      if (stopped) return;
      if (running) {
        again = true;
        return;
      }
      if (soon) return;
      soon = setTimeout(() => {
        soon = undefined;
        void tick();
      }, 0);
      soon.unref();
    },
    start: schedule,
    async stop(waitMs = Infinity) {
      stopped = true;
      clearTimeout(timer);
      clearTimeout(soon);
      ac.abort();
      if (!running) return true;
      let t: NodeJS.Timeout | undefined;
      const ended = running.then(
        () => true,
        () => true,
      );
      const late = Number.isFinite(waitMs) ? new Promise<boolean>((r) => (t = setTimeout(() => r(false), waitMs))) : new Promise<boolean>(() => {});
      try {
        return await Promise.race([ended, late]);
      } finally {
        clearTimeout(t);
      }
    },
    get lastReport() {
      return last;
    },
  };
}
