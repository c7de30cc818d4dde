/**
 * One sweep (decisions §5): a cron-triggered handler, the same function behind every
 * trigger — the `kslate worker` loop, `kslate sweep` (cron), `serve --sweep-interval`, `kslate
 * dev` and a Workers `scheduled()`. Runtime-neutral: it imports only the storage port and
 * handler types, and everything that talks to a cluster comes in through `deps`.
 *
 * Steps, in order: reconcile classes; mirror roles; expire records (then purge their
 * history and entries); flag lapsed leases; prune read sets; delete expired console
 * sessions; refresh the gauges. A lease row (migration 0004) makes a concurrent sweep a
 * no-op (`ran: false`). Each step's failure is logged and reported, and the later steps
 * still run.
 */
import type { ClassRow, RetentionRules, RetentionWalk, SweepDb, WorkerGauges } from '../db/port.js';
import { parseDuration, parseRetention } from '../handlers/class-schema.js';
import type { Logger } from '../handlers/context.js';
import { INFERENCE_WINDOW_SECONDS } from '../handlers/inference.js';
import type { ClassSpec } from '../handlers/types.js';
import { reconcileClasses, type ClassSource, type ReconcileReport } from './reconcile-classes.js';

/** The lease row's name: one sweep at a time per database. */
export const SWEEP_LEASE = 'sweep';
/** Records expired per statement. */
export const EXPIRE_BATCH = 1000;
/** History rows (and entries) purged per statement, and lapsed leases flagged per statement. */
export const PURGE_BATCH = 10_000;
/** Default time budget of the budgeted steps (expiry, purge, lapsed leases). */
export const DEFAULT_BUDGET_MS = 30_000;

/** A class as the role mirror needs it: the SharedContext's uid owns what is created for it. */
export interface LiveClass {
  name: string;
  namespace: string;
  spec: ClassSpec;
  uid?: string;
}

export interface MirrorReport {
  applied: number;
  deleted: number;
  errors: string[];
}

/** Mirrors class roles into cluster RBAC (decisions §5); present only when classes come from a cluster. */
export interface RoleMirror {
  mirror(live: LiveClass[]): Promise<MirrorReport>;
}

export interface SweepDeps {
  db: SweepDb;
  log: Logger;
  /** Who sweeps (host, pid, a random part): the lease names it. */
  holder: string;
  /** Where class manifests come from; absent = leave classes alone. */
  classSource?: () => Promise<ClassSource>;
  /** Called after classes changed, so this process's registry sees them at once. */
  onClassesChanged?: () => void;
  roles?: RoleMirror;
  /** Receives the gauges and the classes they were computed for (the worker's metrics). */
  onGauges?: (gauges: WorkerGauges, classes: ClassRow[]) => void;
  /** Aborted on SIGTERM: the current statement finishes, no new one starts, the lease is released. */
  signal?: AbortSignal;
}

/** The steps, in the order they run. */
export const SWEEP_STEPS = ['classes', 'roles', 'expire', 'retention', 'leases', 'read sets', 'sessions', 'idempotency keys', 'gauges'] as const;
export type SweepStep = (typeof SWEEP_STEPS)[number];

export interface SweepOptions {
  /** Run only these steps (default: all), e.g. `['classes']` for a gateway's reconcile at start. */
  steps?: readonly SweepStep[];
  /** Clock for the time budget (ms); the database clock decides expiry. */
  now?: () => number;
  /** The budgeted steps stop starting new batches after this long; the next sweep continues. */
  budgetMs?: number;
}

export interface SweepReport {
  ran: boolean;
  /**
   * Every step that ran succeeded. A refused manifest does not fail the sweep (`classes.refusedCount`
   * counts it): one bad SharedContext must not make every sweep a failure.
   */
  ok: boolean;
  durationMs: number;
  classes?: ReconcileReport;
  roles?: MirrorReport;
  expired?: { records: number; historyRows: number; entries: number; more: boolean };
  /** History rows purged by class retention (issue 37), per class; `more`: a walk was left unfinished. */
  retention?: {
    purged: Map<string, number>;
    more: boolean;
    /** Each batch the step ran, in order: its row limit and how long it took (ms, the sweep's clock). */
    batches: { class: string; walk: RetentionWalk; limit: number; ms: number }[];
  };
  leases?: { flagged: number; more: boolean };
  /** Read-set entries and scope owners deleted because they outlived the inference window. */
  prunedReads?: number;
  /** Expired console sessions deleted (docs/console.md). */
  sessions?: { purged: number; more: boolean };
  /** Expired idempotency keys deleted (issue 33; each row carries the expiry its gateway gave it). */
  idempotencyKeys?: { purged: number; more: boolean };
  gauges?: WorkerGauges;
  errors: { step: string; message: string }[];
  /** How long each step that ran took (ms). */
  stepMs: Partial<Record<SweepStep, number>>;
  /** Stopped early by the signal. */
  aborted?: boolean;
}

export async function sweep(deps: SweepDeps, opts: SweepOptions = {}): Promise<SweepReport> {
  const now = opts.now ?? Date.now;
  const budgetMs = opts.budgetMs ?? DEFAULT_BUDGET_MS;
  const start = now();
  const deadline = start + budgetMs;
  const { db, log } = deps;
  // Long enough for the budgeted steps and the unbudgeted ones around them; renewed before
  // each step, and a sweeper that dies leaves a lease that simply runs out.
  const leaseSeconds = Math.ceil(budgetMs / 1000) * 2 + 60;
  if (!(await db.acquireLease(SWEEP_LEASE, deps.holder, leaseSeconds))) {
    log.debug('another sweep holds the sweep lease; nothing done', { holder: deps.holder });
    return { ran: false, ok: true, durationMs: now() - start, errors: [], stepMs: {} };
  }
  const report: SweepReport = { ran: true, ok: true, durationMs: 0, errors: [], stepMs: {} };
  let leaseLost = false;
  const stopped = () => leaseLost || deps.signal?.aborted === true;
  const inBudget = () => !stopped() && now() < deadline;
  /**
   * One step's batches: the first always (a sweep makes progress however small its budget), then
   * more while the last was full and the budget lasts. True when the last batch was full: work
   * is left for the next sweep.
   */
  const batches = async (batch: () => Promise<boolean>): Promise<boolean> => {
    let full = false;
    for (let first = true; first || inBudget(); first = false) {
      if (stopped()) break;
      full = await batch();
      if (!full) break;
    }
    return full;
  };
  /** A step's batches of at most PURGE_BATCH rows each, every batch's count handed to `count`. */
  const purgeBatches = (purge: (limit: number) => Promise<number>, count: (n: number) => void) =>
    batches(async () => {
      const n = await purge(PURGE_BATCH);
      count(n);
      return n === PURGE_BATCH;
    });
  const step = async (name: SweepStep, fn: () => Promise<void>) => {
    if (stopped() || (opts.steps && !opts.steps.includes(name))) return;
    const t0 = now();
    try {
      if (!(await db.acquireLease(SWEEP_LEASE, deps.holder, leaseSeconds))) {
        leaseLost = true;
        throw new Error('the sweep lease was lost (it ran out and another sweeper took it); this sweep stops here');
      }
      await fn();
    } catch (e) {
      const message = (e as Error)?.message ?? String(e);
      report.errors.push({ step: name, message });
      log.error(`sweep step "${name}" failed: ${message}; the next sweep retries it`, { step: name });
    } finally {
      report.stepMs[name] = (report.stepMs[name] ?? 0) + (now() - t0);
    }
  };
  try {
    await step('classes', async () => {
      if (!deps.classSource) return;
      const source = await deps.classSource();
      const rec = await reconcileClasses(db, source, log);
      report.classes = rec;
      deps.onClassesChanged?.();
      if (source.report) await source.report(rec);
      if (deps.roles) {
        const live = rec.live.map((l) => ({ ...l, uid: source.uids?.get(`${l.namespace}/${l.name}`) }));
        await step('roles', async () => {
          report.roles = await deps.roles!.mirror(live);
          for (const e of report.roles.errors) log.warn(`role mirroring: ${e}`);
        });
      }
    });
    let classes: ClassRow[] = [];
    await step('expire', async () => {
      classes = await db.listClasses();
      const expired = { records: 0, historyRows: 0, entries: 0, more: false };
      report.expired = expired;
      for (const c of classes) {
        const ttl = (c.spec as ClassSpec).ttl;
        const ms = ttl ? parseDuration(ttl) : null;
        if (!ms) continue;
        const left = await batches(async () => {
          const n = await db.expireRecords(c.name, ms / 1000, EXPIRE_BATCH);
          expired.records += n;
          return n === EXPIRE_BATCH;
        });
        expired.more ||= left;
      }
      // Records whose own expiry (ttl_seconds) passed, in any class.
      const due = await batches(async () => {
        const n = await db.expireDueRecords(EXPIRE_BATCH);
        expired.records += n;
        return n === EXPIRE_BATCH;
      });
      const purge = await batches(async () => {
        const p = await db.purgeExpired(PURGE_BATCH);
        expired.historyRows += p.historyRows;
        expired.entries += p.entries;
        return p.more;
      });
      expired.more ||= due || purge;
    });
    await step('retention', async () => {
      if (classes.length === 0) classes = await db.listClasses();
      const retention: NonNullable<SweepReport['retention']> = { purged: new Map<string, number>(), more: false, batches: [] };
      report.retention = retention;
      // Each class with a `history` gets an equal slice of what is left of the budget (a class
      // with little to do hands the rest on); passes repeat over the classes whose walks are
      // unfinished while the budget lasts. Batch sizes follow the measured rate (RetentionBatches).
      const pending = classes.flatMap((c) => {
        const rules = retentionRules(c.spec as ClassSpec);
        return rules ? [{ name: c.name, rules, walk: 0 }] : [];
      });
      for (const p of pending) retention.purged.set(p.name, 0);
      const sizers = new Map<RetentionWalk, RetentionBatches>();
      const first = pending.length > 0 && (await db.purgesByRecord()) ? RETENTION_FIRST_BATCH_BY_RECORD : RETENTION_FIRST_BATCH;
      let forced = true; // the step's first batch runs whatever the clock says: every sweep makes progress
      for (let ran = true; ran && pending.length > 0 && !stopped() && (forced || now() < deadline); ) {
        ran = false; // a pass that ran no batch (no time left in any slice) ends the step
        for (let i = 0; i < pending.length && !stopped(); ) {
          const p = pending[i]!;
          const sliceEnd = now() + Math.max(0, deadline - now()) / (pending.length - i);
          for (; p.walk < RETENTION_WALKS.length && !stopped(); ) {
            const walk = RETENTION_WALKS[p.walk]!;
            const left = sliceEnd - now();
            if (!forced && left <= 0) break;
            let sizer = sizers.get(walk);
            if (!sizer) sizers.set(walk, (sizer = new RetentionBatches(budgetMs, first)));
            const limit = sizer.next(left);
            const t0 = now();
            const r = await db.purgeHistory(p.name, walk, p.rules, limit);
            const ms = now() - t0;
            forced = false;
            ran = true;
            sizer.record(Math.max(r.scanned, r.purged), ms);
            retention.batches.push({ class: p.name, walk, limit, ms });
            retention.purged.set(p.name, retention.purged.get(p.name)! + r.purged);
            if (!r.more) p.walk++;
          }
          if (p.walk >= RETENTION_WALKS.length) pending.splice(i, 1);
          else i++;
        }
      }
      retention.more = pending.length > 0;
    });
    await step('leases', async () => {
      report.leases = { flagged: 0, more: false };
      const leases = report.leases;
      leases.more = await purgeBatches((limit) => db.flagLapsedLeases(limit), (n) => (leases.flagged += n));
    });
    await step('read sets', async () => {
      report.prunedReads = await db.pruneReadSets(INFERENCE_WINDOW_SECONDS);
    });
    await step('sessions', async () => {
      report.sessions = { purged: 0, more: false };
      const sessions = report.sessions;
      sessions.more = await purgeBatches((limit) => db.purgeConsoleSessions(limit), (n) => (sessions.purged += n));
    });
    await step('idempotency keys', async () => {
      report.idempotencyKeys = { purged: 0, more: false };
      const keys = report.idempotencyKeys;
      keys.more = await purgeBatches((limit) => db.purgeIdempotencyKeys(limit), (n) => (keys.purged += n));
    });
    await step('gauges', async () => {
      if (classes.length === 0) classes = await db.listClasses();
      const roles = classes.flatMap((c) =>
        Object.entries((c.spec as ClassSpec).roles ?? {}).map(([role, def]) => ({ class: c.name, role, subjects: def.subjects })),
      );
      report.gauges = await db.gauges(
        classes.map((c) => c.name),
        roles,
      );
      report.gauges.idempotencyKeys = await db.countIdempotencyKeys();
      deps.onGauges?.(report.gauges, classes);
    });
  } finally {
    if (!leaseLost) await db.releaseLease(SWEEP_LEASE, deps.holder).catch((e) =>
      log.warn('could not release the sweep lease; it expires on its own', { error: (e as Error)?.message }),
    );
  }
  report.aborted = deps.signal?.aborted === true || undefined;
  report.durationMs = now() - start;
  report.ok = report.errors.length === 0;
  log.info(summary(report), {
    duration_ms: report.durationMs,
    classes_applied: report.classes?.applied.length,
    classes_refused: report.classes?.refusedCount,
    roles_applied: report.roles?.applied,
    roles_deleted: report.roles?.deleted,
    records_expired: report.expired?.records,
    history_purged: report.expired?.historyRows,
    entries_purged: report.expired?.entries,
    retention_purged: report.retention ? Object.fromEntries(report.retention.purged) : undefined,
    leases_flagged: report.leases?.flagged,
    leases_lapsed: report.gauges?.leasesLapsed,
    read_sets_pruned: report.prunedReads,
    sessions_purged: report.sessions?.purged,
    idempotency_keys_purged: report.idempotencyKeys?.purged,
    errors: report.errors.length || undefined,
    step_ms: report.stepMs,
  });
  return report;
}

/**
 * The walks of the retention step, in order: the per-field pass first (keepLast, and rows
 * whose keep lapsed), the records whose checkpoints were re-saved (rows a checkpoint no
 * longer keeps), then by age.
 */
const RETENTION_WALKS: readonly RetentionWalk[] = ['fields', 'checkpoints', 'age', 'rejected'];

/**
 * The retention step's batch sizes (issue 37): a fixed 10,000-row batch that started just
 * before the deadline finished a second past it. The first batch of a walk reads
 * `RETENTION_FIRST_BATCH` rows (`RETENTION_FIRST_BATCH_BY_RECORD` on Citus); each later one is sized from the rate the walk's batches
 * measured (rows per ms, smoothed) to last `min(budget / 10, 1 s, half the time left)`,
 * between `RETENTION_MIN_BATCH` and `PURGE_BATCH` rows and at most four times the previous
 * size. Near the deadline the batches shrink to the minimum, so a sweep ends within its budget
 * plus about one small batch.
 */
export const RETENTION_FIRST_BATCH = 1000;
export const RETENTION_MIN_BATCH = 100;
/**
 * The first batch when the database purges record by record (Citus: a delegated call per
 * record, each deleting its rows on its node): a 1,000-row first batch took 3-5 s there on a
 * loaded machine (about 0.25 rows per ms against tens on one PostgreSQL), longer than a 1 s
 * budget, before any rate was measured. The minimum batch probes the rate instead.
 */
export const RETENTION_FIRST_BATCH_BY_RECORD = RETENTION_MIN_BATCH;

export class RetentionBatches {
  private rate: number | null = null; // rows per ms
  private last: number;
  constructor(
    private readonly budgetMs: number,
    private readonly first = RETENTION_FIRST_BATCH,
  ) {
    this.last = first;
  }

  /** The next batch's row limit, with `leftMs` left before the deadline (<= 0: the minimum). */
  next(leftMs: number): number {
    if (this.rate === null) return (this.last = this.first);
    const targetMs = Math.min(this.budgetMs / 10, 1000, leftMs / 2);
    const rows = Math.floor(this.rate * targetMs);
    this.last = Math.max(RETENTION_MIN_BATCH, Math.min(PURGE_BATCH, this.last * 4, rows));
    return this.last;
  }

  /** What a batch did (rows read or deleted, whichever is more) and how long it took. */
  record(rows: number, ms: number): void {
    // A batch that read few rows (the walk's end) measures mostly its fixed cost: it only
    // lowers the rate, which errs on the side of the deadline.
    const rate = Math.max(rows, 1) / Math.max(ms, 1);
    this.rate = this.rate === null ? rate : (this.rate + rate) / 2;
  }
}

/** A class's `history` spec as the purge applies it; null when it keeps every row. */
export function retentionRules(spec: ClassSpec): RetentionRules | null {
  const h = spec.history;
  if (!h || (h.maxAge === undefined && h.keepLast === undefined && h.rejectedMaxAge === undefined)) return null;
  const secs = (d: string | undefined) => (d === undefined ? null : Math.max(1, Math.round(parseRetention(d)! / 1000)));
  return {
    maxAgeSeconds: secs(h.maxAge),
    keepLast: h.keepLast ?? null,
    rejectedMaxAgeSeconds: secs(h.rejectedMaxAge),
    spec: JSON.stringify([h.maxAge ?? null, h.keepLast ?? null, h.rejectedMaxAge ?? null]),
  };
}

/** The one line a sweep logs: what each step did. */
function summary(r: SweepReport): string {
  const parts: string[] = [];
  if (r.classes) parts.push(`classes ${r.classes.applied.length} applied, ${r.classes.refusedCount} refused`);
  if (r.roles) parts.push(`roles ${r.roles.applied} applied, ${r.roles.deleted} deleted`);
  if (r.expired) {
    parts.push(
      `expired ${r.expired.records} records (purged ${r.expired.historyRows} history rows, ${r.expired.entries} entries)` +
        (r.expired.more ? ', more next sweep' : ''),
    );
  }
  if (r.retention && r.retention.purged.size > 0) {
    const n = [...r.retention.purged.values()].reduce((a, b) => a + b, 0);
    parts.push(`retention purged ${n} history rows${r.retention.more ? ', more next sweep' : ''}`);
  }
  if (r.leases) parts.push(`leases ${r.leases.flagged} newly lapsed${r.leases.more ? ', more next sweep' : ''}`);
  if (r.prunedReads !== undefined) parts.push(`read sets ${r.prunedReads} pruned`);
  if (r.sessions) parts.push(`console sessions ${r.sessions.purged} expired${r.sessions.more ? ', more next sweep' : ''}`);
  if (r.idempotencyKeys) parts.push(`idempotency keys ${r.idempotencyKeys.purged} expired${r.idempotencyKeys.more ? ', more next sweep' : ''}`);
  if (r.gauges) parts.push(`gauges refreshed (${r.gauges.leasesLapsed} lapsed leases)`);
  const tail = r.errors.length ? `; ${r.errors.length} step(s) failed: ${r.errors.map((e) => e.step).join(', ')}` : '';
  return `sweep ${r.aborted ? 'stopped early' : 'done'} in ${r.durationMs} ms: ${parts.join('; ') || 'nothing to do'}${tail}`;
}
