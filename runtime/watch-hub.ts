/**
 * The change hub (issue 16): ONE poller per gateway process reads the change log (migration
 * 0007) while anyone is subscribed and fans each change out to the subscribers of its class
 * or record. No subscriber polls the database in steady state and the write path sends no
 * NOTIFY: a write costs what it cost before, however many watchers there are.
 *
 * A subscriber that starts behind the hub catches up with its own bounded reads, paced by
 * its consumer (a page is read only when the previous one was taken), while the hub's live
 * changes for it wait in a bounded buffer; it joins the live feed at the position the hub
 * had when it subscribed, so nothing is lost or repeated across the join. Every subscriber's
 * queue is bounded in items and bytes: one that falls behind is ended (`slow`) and resumes
 * from its last id, never buffered without bound.
 *
 * Memory (issue 31 item 9): a subscriber reads its catch-up in pages of `pageBytes` (one
 * change when a single one is larger), only when its consumer asked for the next item,
 * that is when the transport's socket has drained. What subscribers hold for their clients
 * (catch-up pages not yet sent, and the change each transport is writing) is charged to one
 * process-wide `ByteBudget` of `bufferBytes`; beyond it they wait their turn. A subscriber
 * whose consumer has not come back for the next item within `slowMs` (its socket does not
 * drain) is ended `slow`; while others wait for room, those stalled for `PRESSURE_MS`
 * already are ended first, so paused clients cannot hold the budget against everyone else.
 * Open subscriptions are capped per process and per owner (the caller's identity).
 *
 * Runtime-neutral (timers only, no Node module); the Node gateway builds one in
 * runtime/services.ts. The Workers adapter has no long-lived process and builds none.
 */
import { advance, ahead, compareNode, covers, join, type ChangeLog, type ChangeRow, type LogPosition } from '../db/port.js';
import type { Logger } from '../handlers/context.js';
import { SvcError } from '../handlers/errors.js';
import type { FeedItem, FeedEnd, Subscription, WatchFeed, WatchFrom } from '../handlers/watch-feed.js';
import { ByteBudget } from './watch-budget.js';

export interface HubOptions {
  /** How often the poller reads the log while someone is subscribed. */
  pollMs: number;
  /** A subscription with nothing to say for this long yields a heartbeat. */
  heartbeatMs: number;
  /** Items one subscriber may have waiting; past it the subscriber is ended (`slow`). */
  queueMax: number;
  /** Bytes of changes one subscriber may have waiting (the first item always fits). */
  queueBytes: number;
  /** Open subscriptions per process; past it subscribe answers UNAVAILABLE. */
  maxStreams: number;
  /** Open subscriptions per owner (identity); past it subscribe answers RATE_LIMITED. */
  maxStreamsPerOwner: number;
  /** The class log's retained window (410 EXPIRED before it). */
  retentionMs: number;
  /** Bytes of one catch-up read (a single larger change is read alone). */
  pageBytes: number;
  /** Bytes all subscribers together may hold for their clients (catch-up pages, the change being written). */
  bufferBytes: number;
  /** A subscriber whose consumer has not taken its next item for this long is ended `slow`. */
  slowMs: number;
  /** How long a stream may stay open (the handler ends it `max_age`; clients resume). */
  maxAgeMs: number;
  /** Rows per read (the poller's and a catch-up page). */
  batch?: number;
  /** Bytes per read of the poller. */
  batchBytes?: number;
}

/** What the hub reports to the process's metrics. */
export interface HubObserver {
  /** A subscription ended, and why. */
  ended(reason: FeedEnd): void;
  /** A subscribe refused by a cap: the process's, or the owner's. */
  refused(limit: 'watch_streams' | 'watch_streams_per_identity'): void;
}

/** While others wait for room in the budget, a subscriber stalled this long is ended first. */
export const PRESSURE_MS = 2_000;

/**
 * Bytes of live changes one stream may have waiting (beside `--watch-queue` items). They are
 * the poller's rows, shared by every stream of the class, so a bound per stream suffices;
 * what a stream holds of its own is charged to the budget instead.
 */
export const LIVE_QUEUE_BYTES = 16 * 1024 * 1024;

/**
 * Whether a read's frontier is short of `target` in a group it read (a group no node has any
 * more, e.g. a removed Citus worker, is read by nobody and does not count).
 */
function short(target: LogPosition, frontier: LogPosition): boolean {
  return Object.keys(frontier).some((g) => target[g] !== undefined && compareNode(target[g], frontier[g]) > 0);
}

/** A row's `(tx, id)` in its node group (class log rows always have a tx). */
const nodePos = (r: ChangeRow) => ({ group: r.group, tx: r.tx!, id: r.id });

/**
 * The hub's position right after each live row it fanned out: a class stream's cursor for it
 * when the stream had read no further elsewhere (one object, so it is signed once for all).
 */
const hubAfter = new WeakMap<ChangeRow, LogPosition>();

class Sub implements Subscription {
  start: LogPosition | null = null;
  /** class: the last position delivered; record: the last record_version delivered. */
  lastPos: LogPosition | null = null;
  lastRv = 0;
  /** record: the history id of the last change delivered (ids rise with a record's versions). */
  lastId = 0;
  /** The transaction of the last change sent (a transaction's changes share one record_version, issue 33). */
  lastTx: string | null = null;
  /** `catchup` until its own reads reach the hub's position (or fill a gap), then `live`. */
  mode: 'catchup' | 'live' = 'catchup';
  /** class: the hub's position when it subscribed, where its own reads stop. */
  target: LogPosition | null = null;
  readonly queue: ChangeRow[] = [];
  /** class: the stream's position right after each queued row (its cursor). */
  readonly posAfter = new WeakMap<ChangeRow, LogPosition>();
  /** Live changes that came while catching up. */
  readonly buffer: ChangeRow[] = [];
  /** How often the buffer overflowed and was dropped (a record's reads then go on once more). */
  dropped = 0;
  bytes = 0;
  /** Bytes this subscriber holds in the hub's budget: its own catch-up rows waiting, and `inflight`. */
  charged = 0;
  /** The catch-up rows it read itself (charged to the budget until sent), as opposed to the hub's live rows. */
  private readonly own = new WeakSet<ChangeRow>();
  /** Bytes of the change its consumer is writing now: given back when it asks for the next item. */
  private inflight = 0;
  /** When the last item was handed out, while the consumer has not asked for the next one; 0 otherwise. */
  handedAt = 0;
  reason: FeedEnd | null = null;
  private wake: (() => void) | null = null;
  private settle!: (reason: FeedEnd) => void;
  readonly ended$ = new Promise<FeedEnd>((r) => (this.settle = r));

  constructor(
    readonly hub: ChangeHub,
    readonly from: WatchFrom,
    readonly owner: string,
  ) {}

  get ended(): Promise<FeedEnd> {
    return this.ended$;
  }

  get cls(): string {
    return this.from.class;
  }

  /** A live change from the poller. */
  offer(row: ChangeRow): void {
    if (this.reason) return;
    if (this.from.kind === 'record' && row.rid !== this.from.rid) return;
    if (this.mode === 'catchup') {
      if (this.buffer.length >= this.hub.opts.queueMax || (this.buffer.length > 0 && this.bytes + row.bytes > this.hub.opts.queueBytes)) {
        // Still catching up and the live feed outran it: forget what waited and read on
        // further instead (the reads are paced by the consumer, so this stays bounded). A
        // class reads on up to this change; a record's own reads see every committed change.
        for (const r of this.buffer) this.bytes -= r.bytes;
        this.buffer.length = 0;
        this.dropped++;
        if (this.from.kind === 'class') this.target = hubAfter.get(row) ?? this.target;
        return;
      }
      this.buffer.push(row);
      this.bytes += row.bytes;
      return;
    }
    if (this.queue.length >= this.hub.opts.queueMax || (this.queue.length > 0 && this.bytes + row.bytes > this.hub.opts.queueBytes)) {
      this.end('slow');
      return;
    }
    if (this.accept(row)) {
      this.bytes += row.bytes;
      this.poke();
    }
  }

  /**
   * Live: take `row` into the queue when it is new. A record's change whose record_version is
   * past the next one expected (the log orders by transaction id, which need not follow a
   * record's versions when two writers raced for its lock) sends the subscriber back to
   * read its record's history, which fills the gap in version order.
   */
  private accept(row: ChangeRow): boolean {
    if (this.from.kind === 'record') {
      // Another change of the transaction just sent: the same record_version, a later row.
      const sameTx = row.record_version === this.lastRv && row.tx !== null && row.tx === this.lastTx;
      if (row.record_version <= this.lastRv && !(sameTx && row.id > this.lastId)) {
        // A newer row at an old version: the record expired and was written again, a new
        // record whose versions start at 1; this stream's ids no longer name its changes.
        if (this.lastId > 0 && row.id > this.lastId && !sameTx) this.end('recreated');
        return false;
      }
      if (row.record_version > this.lastRv + 1) {
        this.mode = 'catchup';
        this.buffer.push(row);
        return true;
      }
      this.lastRv = row.record_version;
      this.lastId = row.id;
      this.lastTx = row.tx;
    } else {
      if (this.lastPos && covers(this.lastPos, nodePos(row))) return false;
      // The hub's position after the row holds for a live stream (it had every earlier row of
      // the class); only a stream that started further on in some group keeps its own.
      const hub = hubAfter.get(row);
      if (hub !== undefined && (this.lastPos === null || !ahead(this.lastPos, hub))) this.lastPos = hub;
      else {
        const own = advance(this.lastPos ?? {}, nodePos(row));
        this.lastPos = hub === undefined ? own : join(own, hub);
      }
      this.posAfter.set(row, this.lastPos);
    }
    this.queue.push(row);
    return true;
  }

  private poke(): void {
    const w = this.wake;
    this.wake = null;
    w?.();
  }

  end(reason: FeedEnd): void {
    if (this.reason) return;
    this.reason = reason;
    this.settle(reason);
    this.queue.length = 0;
    this.buffer.length = 0;
    this.bytes = 0;
    this.hub.budget.cancel(this);
    this.hub.budget.release(this.charged);
    this.charged = this.inflight = 0;
    this.hub.remove(this);
    this.poke();
  }

  /** Take `bytes` from the hub's budget, waiting for room; false when the subscriber ended meanwhile. */
  private async charge(bytes: number): Promise<boolean> {
    const budget = this.hub.budget;
    if (!budget.tryTake(bytes) && !(await budget.take(bytes, this))) return false;
    if (this.reason) {
      budget.release(bytes); // granted just as it ended
      return false;
    }
    this.charged += bytes;
    return true;
  }

  private uncharge(bytes: number): void {
    const n = Math.min(bytes, this.charged);
    this.charged -= n;
    this.hub.budget.release(n);
  }

  close(reason?: 'revoked' | 'max_age'): void {
    this.end(reason ?? 'closed');
  }

  async next(): Promise<FeedItem> {
    // The consumer is back for more: what it was writing has left (the socket drained).
    this.uncharge(this.inflight);
    this.inflight = 0;
    this.handedAt = 0;
    for (;;) {
      if (this.reason) return { type: 'end', reason: this.reason };
      const row = this.queue[0];
      if (row) {
        // A live change costs its bytes from here on (the transport renders and writes its
        // own copy); a catch-up row was charged when it was read.
        if (!this.own.has(row) && !(await this.charge(row.bytes))) continue;
        this.queue.shift();
        this.own.delete(row);
        this.bytes -= row.bytes;
        this.inflight = row.bytes;
        this.handedAt = Date.now();
        return { type: 'change', row, pos: this.posAfter.get(row) };
      }
      if (this.mode === 'catchup') {
        await this.catchUp();
        continue;
      }
      const woke = await new Promise<boolean>((resolve) => {
        const t = setTimeout(() => {
          this.wake = null;
          resolve(false);
        }, this.hub.opts.heartbeatMs);
        this.wake = () => {
          clearTimeout(t);
          resolve(true);
        };
      });
      if (!woke && !this.reason && this.queue.length === 0) {
        this.handedAt = Date.now();
        return { type: 'heartbeat' };
      }
    }
  }

  /** One page of the subscriber's own reads; at the end of them, the buffered live changes join. */
  private async catchUp(): Promise<void> {
    const { batch } = this.hub.limits;
    const page = this.hub.opts.pageBytes;
    const dropped = this.dropped;
    // Room for the page first: while the budget is full this waits, holding nothing.
    if (!(await this.charge(page))) return;
    let rows: ChangeRow[];
    /** class: the read's frontier (null when it stopped at a limit). */
    let frontier: LogPosition | null = null;
    try {
      if (this.from.kind === 'record') {
        // The first read also takes the row at the start version, only for its id (see accept).
        const learn = this.lastId === 0 && this.lastRv > 0;
        rows = await this.hub.log.readRecordChanges(this.from.class, this.from.rid, this.lastRv - (learn ? 1 : 0), { limit: batch, maxBytes: page });
        if (learn && rows[0]?.record_version === this.lastRv) {
          // Every change at the start version (a transaction's are several) is already known.
          while (rows[0]?.record_version === this.lastRv) {
            const known = rows.shift()!;
            this.lastId = known.id;
            this.lastTx = known.tx;
          }
        } else if (learn) this.lastId = -1; // nothing at that version (yet): nothing to learn
      } else {
        const read = await this.hub.log.readLog([this.from.class], this.lastPos!, { upTo: this.target, limit: batch, maxBytes: page });
        rows = read.rows;
        frontier = read.frontier;
      }
    } catch (e) {
      this.uncharge(page);
      throw e;
    }
    if (this.reason) return; // ended meanwhile: its charge is given back already
    // What the page really holds: a single change larger than a page is read alone.
    const got = rows.reduce((n, r) => n + r.bytes, 0);
    if (got > page) {
      this.hub.budget.add(got - page);
      this.charged += got - page;
    } else this.uncharge(page - got);
    for (const r of rows) {
      if (this.from.kind === 'record') {
        this.lastRv = r.record_version;
        this.lastId = r.id;
        this.lastTx = r.tx;
      } else {
        this.lastPos = advance(this.lastPos!, nodePos(r));
        this.posAfter.set(r, this.lastPos);
      }
      this.queue.push(r);
      this.own.add(r);
      this.bytes += r.bytes;
    }
    if (rows.length > 0) return;
    // Live changes dropped while this read ran may have committed after its snapshot: read again.
    if (this.dropped !== dropped) return;
    if (this.from.kind === 'class' && this.target && frontier !== null && short(this.target, frontier)) {
      // The read found nothing, but its own frontier is short of the hub's position: it could
      // not see every change up to there (the hub read past it earlier), so jumping to the
      // target could skip changes. The frontier only rises, so this should never happen; if
      // it does, read again after a poll interval rather than lose a change.
      this.hub.behind(this.target, frontier);
      await new Promise((r) => setTimeout(r, this.hub.opts.pollMs));
      return;
    }
    // Caught up: what arrived live meanwhile follows, without what the reads already gave.
    if (this.from.kind === 'class' && this.target) this.lastPos = join(this.lastPos!, this.target);
    this.mode = 'live';
    const pending = this.buffer.splice(0);
    if (this.from.kind === 'record') pending.sort((a, b) => a.record_version - b.record_version || a.id - b.id);
    for (const r of pending) this.bytes -= r.bytes;
    for (const r of pending) {
      if (this.mode !== 'live') {
        this.buffer.push(r);
        this.bytes += r.bytes;
      } else if (this.accept(r)) this.bytes += r.bytes;
    }
  }
}

export class ChangeHub implements WatchFeed {
  private readonly byClass = new Map<string, Set<Sub>>();
  private count = 0;
  /** Open subscriptions per owner (counted from subscribe, like `count`). */
  private readonly owners = new Map<string, number>();
  /** The bytes subscribers hold for their clients, process-wide. */
  readonly budget: ByteBudget;
  /** Ends subscribers whose consumer stalled (slowMs, or PRESSURE_MS while the budget is short). */
  private sweeper: ReturnType<typeof setInterval> | null = null;
  /** The poller's position; null while nobody is subscribed. */
  private pos: LogPosition | null = null;
  private starting: Promise<LogPosition> | null = null;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private polling = false;
  private closed = false;
  /** Failed reads in a row (the database is away): the poller backs off. */
  private failures = 0;
  readonly limits: { batch: number; batchBytes: number };

  constructor(
    readonly log: ChangeLog,
    readonly opts: HubOptions,
    private readonly logger: Logger,
    private readonly observer: HubObserver = { ended() {}, refused() {} },
  ) {
    this.limits = { batch: opts.batch ?? 500, batchBytes: opts.batchBytes ?? 16 * 1024 * 1024 };
    this.budget = new ByteBudget(opts.bufferBytes);
  }

  get retentionMs(): number {
    return this.opts.retentionMs;
  }

  get maxAgeMs(): number {
    return this.opts.maxAgeMs;
  }

  /** Open subscriptions (tests, metrics). */
  get open(): number {
    return this.count;
  }

  /** Bytes subscribers hold for their clients now (metrics). */
  get buffered(): number {
    return this.budget.used;
  }

  async oldest(cls: string, since: Date): Promise<{ pos: LogPosition; at: Date }> {
    const first = await this.log.firstChangeSince(cls, since);
    // Just before it: its own transaction's earlier rows are in the window too (same created_at).
    const head = this.pos ?? (await this.log.logHead());
    // Per node group: just before its first change in the window, or where the log is now.
    if (first) return { pos: { ...head, ...first.pos }, at: first.created_at };
    return { pos: head, at: new Date() };
  }

  async subscribe(from: WatchFrom, owner: string): Promise<Subscription> {
    this.admit(owner);
    const sub = new Sub(this, from, owner);
    // Counted from here, so concurrent subscribes cannot pass the caps together.
    this.count++;
    this.owners.set(owner, (this.owners.get(owner) ?? 0) + 1);
    let pos: LogPosition;
    try {
      pos = await this.ensureStarted();
    } catch (e) {
      this.uncount(owner);
      this.stopIfIdle();
      throw e;
    }
    if (this.closed) {
      this.uncount(owner);
      throw this.refusal();
    }
    // Synchronously from here to registration: the poller cannot move in between, so the
    // subscriber's own reads end exactly where its live feed begins.
    pos = this.pos ?? pos;
    if (from.kind === 'class') {
      sub.start = from.after ?? pos;
      sub.lastPos = sub.start;
      sub.target = pos;
      if (!ahead(pos, sub.start)) sub.mode = 'live';
    } else {
      sub.lastRv = from.afterRecordVersion;
    }
    let set = this.byClass.get(from.class);
    if (!set) this.byClass.set(from.class, (set = new Set()));
    set.add(sub);
    this.schedule();
    this.arm();
    return sub;
  }

  private admit(owner: string): void {
    if (this.closed) throw this.refusal();
    if (this.count >= this.opts.maxStreams) {
      this.observer.refused('watch_streams');
      throw new SvcError(
        'UNAVAILABLE',
        `This gateway holds its maximum of ${this.opts.maxStreams} open watch streams (--watch-max-streams); retry shortly or on another replica, or watch a whole class with one stream.`,
      );
    }
    if ((this.owners.get(owner) ?? 0) >= this.opts.maxStreamsPerOwner) {
      this.observer.refused('watch_streams_per_identity');
      throw new SvcError(
        'RATE_LIMITED',
        `You hold the maximum of ${this.opts.maxStreamsPerOwner} open watch streams one identity may have on this gateway (--watch-max-streams-per-identity); close one first, or watch a whole class with one stream.`,
      );
    }
  }

  private uncount(owner: string): void {
    this.count--;
    const n = (this.owners.get(owner) ?? 1) - 1;
    if (n > 0) this.owners.set(owner, n);
    else this.owners.delete(owner);
  }

  private refusal(): SvcError {
    return new SvcError('UNAVAILABLE', 'The gateway is shutting down; reconnect (to another replica) and resume from your last event id.');
  }

  remove(sub: Sub): void {
    const set = this.byClass.get(sub.cls);
    if (set?.delete(sub)) {
      this.uncount(sub.owner);
      if (set.size === 0) this.byClass.delete(sub.cls);
      this.observer.ended(sub.reason ?? 'closed');
    }
    this.stopIfIdle();
  }

  private stopIfIdle(): void {
    if (this.count > 0) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    this.pos = null;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }

  /** The stall check runs while anyone is subscribed, a few times per slowMs (at most once a second). */
  private arm(): void {
    if (this.sweeper) return;
    const every = Math.max(50, Math.min(1_000, Math.floor(Math.min(this.opts.slowMs, PRESSURE_MS) / 4)));
    this.sweeper = setInterval(() => this.endStalled(Date.now()), every);
    (this.sweeper as { unref?: () => void }).unref?.();
  }

  /**
   * End (`slow`) every subscriber whose consumer has not come back for its next item within
   * slowMs: its socket is not draining. While others wait for room in the budget, those
   * holding some of it that stalled for PRESSURE_MS already go too.
   */
  endStalled(now: number): void {
    const pressed = this.budget.waiters > 0;
    for (const set of [...this.byClass.values()]) {
      for (const sub of [...set]) {
        if (sub.handedAt === 0) continue;
        const stalled = now - sub.handedAt;
        if (stalled >= this.opts.slowMs || (pressed && sub.charged > 0 && stalled >= Math.min(PRESSURE_MS, this.opts.slowMs))) sub.end('slow');
      }
    }
  }

  private ensureStarted(): Promise<LogPosition> {
    if (this.pos) return Promise.resolve(this.pos);
    this.starting ??= this.log.logHead().then(
      (p) => {
        this.starting = null;
        if (this.count > 0 && !this.pos) this.pos = p;
        return p;
      },
      (e) => {
        this.starting = null;
        throw e;
      },
    );
    return this.starting;
  }

  private schedule(delay = this.opts.pollMs): void {
    if (this.timer || this.polling || this.closed || this.count === 0) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      void this.poll();
    }, delay);
  }

  /** One read of the log for every watched class, fanned out; again at once while more is waiting. */
  private async poll(): Promise<void> {
    if (!this.pos || this.byClass.size === 0) return;
    this.polling = true;
    let more = false;
    try {
      const from = this.pos;
      const { rows, frontier } = await this.log.readLog([...this.byClass.keys()], from, {
        upTo: null,
        limit: this.limits.batch,
        maxBytes: this.limits.batchBytes,
      });
      if (this.pos !== from) return; // stopped (and maybe restarted) meanwhile
      for (const r of rows) {
        const next = advance(this.pos, nodePos(r));
        hubAfter.set(r, next);
        for (const sub of [...(this.byClass.get(r.class) ?? [])]) sub.offer(r);
        this.pos = next;
      }
      if (frontier) this.pos = join(this.pos, frontier);
      more = frontier === null;
      this.failures = 0;
    } catch (e) {
      // Logged once per outage, retried with a growing pause (at most 5 s) meanwhile.
      if (this.failures++ === 0) {
        this.logger.warn('watch: reading the change log failed; retrying', { error: e instanceof Error ? e.message : String(e) });
      }
    } finally {
      this.polling = false;
      this.schedule(more ? 0 : Math.min(5_000, this.opts.pollMs * 2 ** Math.min(this.failures, 10)));
    }
  }

  /** When a catch-up read's frontier was last found short of its target (logged at most once a minute). */
  private behindAt = 0;

  /** A catch-up read's frontier short of the hub's position (see Sub.catchUp): logged, then read again. */
  behind(target: LogPosition, frontier: LogPosition): void {
    const now = Date.now();
    if (now - this.behindAt < 60_000) return;
    this.behindAt = now;
    this.logger.warn('watch: a catch-up read saw less of the change log than the hub had read; reading again', {
      target: JSON.stringify(target),
      frontier: JSON.stringify(frontier),
    });
  }

  /** Shutdown: every subscription ends (`shutdown`), new ones are refused. */
  close(): void {
    this.closed = true;
    for (const set of [...this.byClass.values()]) for (const sub of [...set]) sub.end('shutdown');
    this.stopIfIdle();
  }
}
