/**
 * Reads from standbys (issue 34, docs/ha.md "Reads from standbys"): the one place that decides
 * where a read goes. PgDb hands every routed read here as a function of the database to run it
 * on; writes, claims, the sweep, the watch streams' change log, read sets and console sessions
 * never come here (they stay on the primary).
 *
 * - A read with a token (the LSN a write answered with) goes to a standby whose replayed
 *   position (pg_last_wal_replay_lsn()) has reached it. When none has yet, the standbys within
 *   the lag bound are asked again until one has or `waitMs` passed; then it goes to the primary.
 * - A read without a token goes to a standby only while its lag is under `maxLagMs`.
 * - Lag is measured without comparing clocks of two machines: every `probeMs` the primary's WAL
 *   position is sampled, then each standby's replayed position; a standby's lag is how long ago
 *   the primary first passed the position the standby has replayed (0 when it has replayed
 *   every sample). An idle primary therefore shows no lag.
 * - A standby that fails a probe or a read (down, restarting, promoted, too slow) is skipped and
 *   probed again after a backoff (250 ms doubling to 10 s); a read it failed is run again on the
 *   next standby or the primary, so losing a standby costs no read.
 *
 * Only timers and promises: nothing Node-only (handlers/db/worker rule).
 */
import { StorageFault } from '../port.js';
import { formatLsn, parseLsn } from '../lsn.js';

/** What the router needs of a database: PgDb. */
export interface ReplicaTarget<D = unknown> {
  /** The standby's replayed WAL position (null when it is not in recovery); throws when unreachable. */
  replayLsn(): Promise<string | null>;
  /**
   * One connection of the standby that has replayed `lsn`, as a database to read on, checked on
   * that very connection (a URL may lead to several standbys, e.g. a read-only Service: the
   * probe's answer may come from another); null when it has not. `release` gives it back.
   */
  pinnedAt(lsn: string): Promise<{ db: D; release(err?: unknown): void } | null>;
}

export interface PrimaryTarget {
  /** The primary's current WAL write position. */
  walLsn(): Promise<string>;
}

export interface ReplicaOptions {
  /** An untokened read uses a standby only while its lag is under this (--replica-max-lag). */
  maxLagMs: number;
  /** A tokened read waits at most this long for a standby to replay its token (--replica-wait). */
  waitMs: number;
  /** How often the primary's position and each standby's replay are sampled. */
  probeMs: number;
  /** A read was served by `target` (`primary` or the standby's index as text): the metric's label. */
  onRead?(target: string): void;
  log?: { warn(msg: string, data?: Record<string, unknown>): void; info(msg: string, data?: Record<string, unknown>): void };
}

export const REPLICA_DEFAULTS = { maxLagMs: 1_000, waitMs: 50, probeMs: 100 } as const;

/** The longest the first round of probes holds the gateway's start. */
const START_WAIT_MS = 2_000;
/** Backoff of a standby that failed: 250 ms, doubling, at most 10 s. */
const BACKOFF_MS = 250;
const BACKOFF_MAX_MS = 10_000;
/** Samples of the primary's position older than this are dropped (lag beyond it reads as at least this). */
const HISTORY_MS = 30_000;

class Standby<D> {
  /** Last replayed position seen; null while down or unknown. */
  replayed: bigint | null = null;
  up = false;
  failures = 0;
  retryAt = 0;
  private inflight: Promise<bigint | null> | null = null;

  constructor(
    readonly index: number,
    readonly db: D & ReplicaTarget<D>,
    private readonly router: ReadRouter<D>,
  ) {}

  get label(): string {
    return String(this.index);
  }

  /** Ask the standby its replayed position now (one question in flight at a time, shared). */
  probe(): Promise<bigint | null> {
    this.inflight ??= this.db
      .replayLsn()
      .then(
        (s) => {
          const lsn = s === null ? null : parseLsn(s);
          if (lsn === null) {
            this.fail('it is not in recovery (promoted, or not a standby): reads skip it');
            return null;
          }
          if (!this.up) this.router.log?.info('standby reachable; reads may use it', { replica: this.index });
          this.up = true;
          this.failures = 0;
          if (this.replayed === null || lsn > this.replayed) this.replayed = lsn;
          return this.replayed;
        },
        (e: unknown) => {
          this.fail(e instanceof Error ? e.message : String(e));
          return null;
        },
      )
      .finally(() => (this.inflight = null));
    return this.inflight;
  }

  fail(why: string): void {
    if (this.up || this.failures === 0) this.router.log?.warn('standby skipped for reads', { replica: this.index, reason: why });
    this.up = false;
    this.replayed = null;
    this.failures++;
    this.retryAt = Date.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_MS * 2 ** Math.min(this.failures - 1, 10));
  }
}

export class ReadRouter<D> {
  readonly standbys: Standby<D>[];
  /** The primary's WAL position over time, oldest first. */
  private samples: { t: number; lsn: bigint }[] = [];
  private next = 0;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private stopped = false;
  readonly log: ReplicaOptions['log'];

  constructor(
    private readonly primary: D & PrimaryTarget,
    standbys: (D & ReplicaTarget<D>)[],
    private readonly opts: ReplicaOptions,
  ) {
    this.standbys = standbys.map((db, i) => new Standby(i, db, this));
    this.log = opts.log;
  }

  /**
   * Start sampling. Resolves after the first round, or after 2 s when a standby is slow to
   * answer it (a frozen one): the gateway starts on the primary and uses standbys as they answer.
   */
  start(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    return Promise.race([
      this.tick(true),
      new Promise<void>((r) => {
        timer = setTimeout(r, START_WAIT_MS);
      }),
    ]).finally(() => clearTimeout(timer));
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }

  private async tick(first = false): Promise<void> {
    try {
      await this.sample(first);
    } finally {
      if (!this.stopped) {
        this.timer = setTimeout(() => void this.tick(), this.opts.probeMs);
        (this.timer as { unref?: () => void }).unref?.();
      }
    }
  }

  /**
   * One round: the primary's position, then every standby due a probe. Only the first round
   * waits for the probes: later a standby that hangs (frozen) must not hold up the others'
   * (each has one probe in flight at most).
   */
  private async sample(awaitProbes: boolean): Promise<void> {
    const now = Date.now();
    try {
      const lsn = parseLsn(await this.primary.walLsn());
      if (lsn !== null) {
        this.samples.push({ t: now, lsn });
        while (this.samples.length > 2 && this.samples[0].t < now - HISTORY_MS) this.samples.shift();
      }
    } catch {
      // The primary's own failures are the requests' to report; lag is left as last measured.
    }
    const probes = Promise.all(this.standbys.filter((s) => s.up || Date.now() >= s.retryAt).map((s) => s.probe()));
    if (awaitProbes) await probes;
  }

  /** Seconds a standby's replay is behind the primary (see the file comment); null while it is down. */
  lagMs(s: Standby<D>, now = Date.now()): number | null {
    if (!s.up || s.replayed === null) return null;
    for (const x of this.samples) if (x.lsn > s.replayed) return now - x.t;
    return 0;
  }

  /** Each standby's state, for metrics: lag in seconds (null while down). */
  status(): { replica: string; up: boolean; lagSeconds: number | null; replayed: string | null }[] {
    const now = Date.now();
    return this.standbys.map((s) => {
      const lag = this.lagMs(s, now);
      return { replica: s.label, up: s.up, lagSeconds: lag === null ? null : lag / 1000, replayed: s.replayed === null ? null : formatLsn(s.replayed) };
    });
  }

  /** Round robin over `list`. */
  private choose(list: Standby<D>[]): Standby<D> {
    return list[this.next++ % list.length];
  }

  private fresh(s: Standby<D>, now: number): boolean {
    const lag = this.lagMs(s, now);
    return lag !== null && lag < this.opts.maxLagMs;
  }

  /** The standby a read should use now, or null for the primary. */
  private async pick(min: bigint | null, skip: Set<Standby<D>>): Promise<Standby<D> | null> {
    let now = Date.now();
    const live = this.standbys.filter((s) => s.up && !skip.has(s));
    if (live.length === 0) return null;
    if (min === null) {
      const ok = live.filter((s) => this.fresh(s, now));
      return ok.length > 0 ? this.choose(ok) : null;
    }
    const reached = () => live.filter((s) => s.up && s.replayed !== null && s.replayed >= min);
    let ok = reached();
    if (ok.length > 0) return this.choose(ok);
    // Wait for the standbys within the lag bound (one far behind would not catch up in time).
    const waitOn = live.filter((s) => this.fresh(s, now));
    const deadline = now + this.opts.waitMs;
    while (waitOn.length > 0 && now < deadline) {
      await Promise.all(waitOn.map((s) => s.probe()));
      ok = reached();
      if (ok.length > 0) return this.choose(ok);
      now = Date.now();
      if (now < deadline) await new Promise((r) => setTimeout(r, Math.min(2, deadline - now)));
      now = Date.now();
    }
    return null;
  }

  /**
   * Run a read where it belongs: on a standby (see the file comment), else on the primary. A
   * read a standby failed for want of the standby (unreachable, connection lost, timed out, or
   * cancelled by a recovery conflict) is run again elsewhere; the standby is skipped for a while.
   */
  async read<T>(minLsn: bigint | null, fn: (db: D) => Promise<T>): Promise<T> {
    const skip = new Set<Standby<D>>();
    for (;;) {
      const s = await this.pick(minLsn, skip);
      if (s === null) break;
      try {
        let out: T;
        if (minLsn === null) out = await fn(s.db);
        else {
          // The token is checked again on the connection that reads, in the same session.
          const pin = await s.db.pinnedAt(formatLsn(minLsn));
          if (pin === null) {
            skip.add(s);
            continue;
          }
          try {
            out = await fn(pin.db);
            pin.release();
          } catch (e) {
            pin.release(e);
            throw e;
          }
        }
        this.opts.onRead?.(s.label);
        return out;
      } catch (e) {
        // Replay cancelled the statement, or the standby has not replayed a migration yet: another
        // standby or the primary answers; the standby stays in use.
        if (recoveryConflict(e) || (e instanceof StorageFault && e.kind === 'schema')) {
          skip.add(s);
          continue;
        }
        if (!(e instanceof StorageFault) || e.kind === 'data') throw e;
        s.fail(e.message);
        skip.add(s);
      }
    }
    const out = await fn(this.primary);
    this.opts.onRead?.('primary');
    return out;
  }
}

/** A standby cancelled the statement because replay needed what it held (SQLSTATE 40001 / 40P01 on a standby). */
function recoveryConflict(e: unknown): boolean {
  const err = e as { code?: unknown; message?: unknown } | null;
  return (
    !!err &&
    (err.code === '40001' || err.code === '40P01') &&
    typeof err.message === 'string' &&
    /conflict with recovery/i.test(err.message)
  );
}
