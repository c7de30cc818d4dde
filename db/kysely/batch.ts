/**
 * Coalesced writes (issue 38 item 1; docs/performance.md "Coalesced writes"): while
 * `lanes` write statements (the pool's size) are in flight, further writes (put, append, claim,
 * transactions, with an idempotency key or not) queue; when one returns, the queue goes as one statement,
 * kslate_write_batch (migration 0020), in one transaction with one commit, each write with
 * its own outcome. No timer: a write that finds a lane free goes at once, as its own single
 * statement, so an idle gateway adds no latency.
 *
 * A write is its ordinary statement-building function (writes.ts writeField, claim,
 * transact) run against a Statements that captures the statement it sends instead of sending
 * it; the batch answers each captured statement with the rows its function answered in the
 * batch, and the function reads them as it reads its own. So a batched write's request and
 * answer are built by the very code of the unbatched one.
 *
 * - Writes in a batch are sorted by record (class, then id; stable, so writes to one record
 *   keep their arrival order): every batch takes its records' locks in one order, and two
 *   batches never deadlock (a single write locks one record).
 * - A rejection is a row, not an exception (the write functions raise nothing for STALE,
 *   HELD, ...): it leaves the batch's other writes as they would be alone.
 * - A write that raises aborts the batch's transaction, nothing of it committed (the server
 *   answered an error). The batch's writes then run again as single statements, one by one
 *   per record (records side by side), so only the faulty one fails. Not after a timeout (the
 *   budget is spent, or the gateway cancelled it at shutdown) or a lost connection (the
 *   outcome is unknown): every write of the batch fails with that fault, as a single write
 *   would.
 * - A keyed write (Statements.keyed, idempotency.ts) goes in the batch through kslate_keyed
 *   (migration 0022): its key is taken in the batch's transaction and kept, with the write and
 *   its result, by the batch's one commit. A second write of the batch with the same key finds
 *   the first's kept answer (a replay, or REUSED), as if sent after the first committed.
 * - A request is answered only after its batch's statement returned, that is committed.
 * - The WAL position (--write-lsn) is read once per batch, after it, on its connection.
 * - On Citus a batch would span shards: batching is off there (checked once, on the first write).
 */
import { classifyDbError } from '../errors.js';
import { StorageFault } from '../port.js';
import type { Conn, KeyedStatement, Statements } from './conn.js';
import { KEYED } from './idempotency.js';
import { CLAIM, relaxedStatement, TRANSACT, WRITE } from './writes.js';

/** At most this many writes go in one batch statement (a longer queue goes as several). */
export const WRITE_BATCH_MAX = 64;
/**
 * Write statements in flight at once before writes queue for a batch, by default: the
 * gateway passes its pool size (--db-pool-size), so writes queue in the batcher only when
 * they would otherwise queue for a connection, and a record held locked stalls no more
 * writes than it would unbatched.
 */
export const WRITE_BATCH_LANES = 10;
/**
 * At most this many writes wait in the batcher's queue, by default (--write-queue-max): 64
 * full batches. Past it a write is refused before it is sent (StorageFault `busy`: 503
 * UNAVAILABLE with Retry-After, nothing changed). At the gateway's default 10 lanes the whole
 * queue goes in about 7 batch statements per lane, well within --db-timeout; a longer queue
 * only means a database that is not keeping up, and the caller is better told so at once than
 * after its --db-timeout.
 */
export const WRITE_QUEUE_MAX = 64 * WRITE_BATCH_MAX;

/**
 * The single statements a batch carries (writes.ts WRITE, CLAIM, TRANSACT: one text per
 * statement) and the function letter kslate_write_batch knows them by. kslate_write_batch
 * (migration 0020) passes their arguments by position, so a statement whose arguments change
 * needs a successor of 0020 that knows them (test/db/write-batch.test.ts runs each through a
 * batch against the real function).
 */
export const BATCHED_STATEMENTS: ReadonlyMap<string, 'w' | 'c' | 'x'> = new Map([
  [WRITE.text, 'w'],
  [CLAIM.text, 'c'],
  [TRANSACT.text, 'x'],
]);

/**
 * The keyed statements a batch carries (idempotency.ts KEYED; Statements.keyed) and the letter
 * of their write function: in the batch a keyed write is `["key", rid, author, key, digest,
 * ttl, [letter, arguments...]]`, run through kslate_keyed (migration 0022), the frame the
 * keyed function alone runs too, and answered with the one row the keyed function answers.
 * Its key is taken in the batch's transaction and kept until its one commit, with the write
 * and its result. Checkpoint saves and refusals' answers are not batched (sent alone).
 */
export const BATCHED_KEYED: ReadonlyMap<string, 'w' | 'c' | 'x'> = new Map([
  [KEYED.write, 'w'],
  [KEYED.claim, 'c'],
  [KEYED.transact, 'x'],
]);

const BATCH = { name: 'kslate_write_batch', text: 'select i, r from kslate_write_batch($1::json)' };

/**
 * Relaxed durability (issue 38): the relaxed form of each batched statement (writes.ts
 * relaxedStatement: the same arguments, synchronous_commit off for its transaction) is batched
 * as its strict one is; a batch whose every write is relaxed goes as BATCH_RELAXED, a batch
 * with one strict write as BATCH (strict as a whole, as a transaction with one strict write is).
 */
const RELAXED_STATEMENTS: ReadonlyMap<string, 'w' | 'c' | 'x'> = new Map(
  [...BATCHED_STATEMENTS].map(([text, letter]) => [relaxedStatement({ name: '', text }).text, letter]),
);
const BATCH_RELAXED = relaxedStatement(BATCH);

export interface BatchOptions {
  maxBatch?: number;
  lanes?: number;
  /** Writes that may wait in the queue; past it a write is refused (`busy`). Default WRITE_QUEUE_MAX. */
  maxQueued?: number;
  /** A write refused because the queue held maxQueued writes. */
  onQueueFull?: () => void;
  /** Every write statement sent: 1 for a write alone, n for a batch of n. */
  onBatch?: (size: number) => void;
}

/** A write waiting in the queue. */
interface Pending {
  fn: (s: Statements) => Promise<unknown>;
  wantLsn: boolean;
  resolve(v: { value: unknown; lsn: string | null }): void;
  reject(e: unknown): void;
}

/** A write's statement, captured: sent in a batch (or alone) and answered through `answer`. */
interface Captured {
  letter: 'w' | 'c' | 'x';
  /** Sent as the relaxed form of its statement (issue 38). */
  relaxed: boolean;
  name: string;
  text: string;
  /** The write function's arguments (class and record first: the batch's sort order). */
  values: readonly unknown[];
  /** A keyed write (Statements.keyed): sent alone as its own message, in a batch through kslate_keyed. */
  keyed: KeyedStatement | null;
  wantLsn: boolean;
  lsn: string | null;
  answer(rows: unknown[]): void;
  fail(e: unknown): void;
}

export class WriteBatcher {
  private inFlight = 0;
  private readonly queue: Pending[] = [];
  /** Whether the database is Citus (no batching); undefined until known. */
  private citus: boolean | undefined;
  private asking = false;
  private readonly maxBatch: number;
  private readonly lanes: number;
  private readonly maxQueued: number;

  constructor(
    private readonly conn: Conn,
    private readonly opts: BatchOptions = {},
  ) {
    this.maxBatch = Math.max(1, opts.maxBatch ?? WRITE_BATCH_MAX);
    this.lanes = Math.max(1, opts.lanes ?? WRITE_BATCH_LANES);
    this.maxQueued = Math.max(1, opts.maxQueued ?? WRITE_QUEUE_MAX);
  }

  /** Whether writes are being batched (false before the first write has told whether the database is Citus). */
  get active(): boolean {
    return this.citus === false;
  }

  /** Run one write (its statement-building function), alone or in a batch; with its WAL position when `wantLsn`. */
  run<T>(fn: (s: Statements) => Promise<T>, wantLsn: boolean): Promise<{ value: T; lsn: string | null }> {
    if (this.citus !== false) {
      this.askCitus();
      return this.alone(fn, wantLsn);
    }
    if (this.inFlight < this.lanes) return this.track(this.alone(fn, wantLsn));
    if (this.queue.length >= this.maxQueued) {
      this.opts.onQueueFull?.();
      return Promise.reject(
        new StorageFault(
          'busy',
          new Error(
            `This gateway already has ${this.maxQueued} writes waiting for the database (--write-queue-max), which is not keeping up; this write was not sent, so nothing changed: retry after Retry-After.`,
          ),
        ),
      );
    }
    return new Promise((resolve, reject) => {
      this.queue.push({ fn, wantLsn, resolve: resolve as Pending['resolve'], reject });
    });
  }

  private askCitus(): void {
    if (this.asking || this.citus !== undefined) return;
    this.asking = true;
    this.conn.citus().then(
      (c) => {
        this.citus = c;
        this.asking = false;
      },
      () => {
        this.asking = false; // asked again on a later write
      },
    );
  }

  /** A write as its own statement (the unbatched path). */
  private alone<T>(fn: (s: Statements) => Promise<T>, wantLsn: boolean): Promise<{ value: T; lsn: string | null }> {
    this.opts.onBatch?.(1);
    return wantLsn ? this.conn.thenLsn(fn) : fn(this.conn).then((value) => ({ value, lsn: null }));
  }

  /** Holds a lane until `p` settles, then sends what queued meanwhile. */
  private track<T>(p: Promise<T>): Promise<T> {
    this.inFlight++;
    const done = () => {
      this.inFlight--;
      this.pump();
    };
    p.then(done, done);
    return p;
  }

  private pump(): void {
    while (this.inFlight < this.lanes && this.queue.length > 0) {
      const items = this.queue.splice(0, this.maxBatch);
      if (items.length === 1) {
        const it = items[0];
        this.track(this.alone(it.fn, it.wantLsn)).then(it.resolve, it.reject);
      } else this.track(this.batch(items));
    }
  }

  /** Send `items` as one batch statement; settles once every item's statement is answered. */
  private async batch(items: Pending[]): Promise<void> {
    const caps: Captured[] = [];
    let capturing = true;
    for (const it of items) {
      let cap: Captured | undefined;
      const s: Statements = {
        exec: <R>(name: string, text: string, values: readonly unknown[]) => {
          const strict = BATCHED_STATEMENTS.get(text);
          const letter = strict ?? RELAXED_STATEMENTS.get(text);
          // A statement the batch does not carry, or one sent later: alone.
          if (!capturing || cap !== undefined || letter === undefined) return this.conn.exec<R>(name, text, values);
          return new Promise<{ rows: R[] }>((resolve, reject) => {
            cap = { letter, relaxed: strict === undefined, name, text, values, keyed: null, wantLsn: it.wantLsn, lsn: null, answer: (rows) => resolve({ rows: rows as R[] }), fail: reject };
            caps.push(cap);
          });
        },
        keyed: <R>(k: KeyedStatement) => {
          const letter = BATCHED_KEYED.get(k.text);
          if (!capturing || cap !== undefined || letter === undefined) return this.conn.keyed<R>(k);
          return new Promise<R[]>((resolve, reject) => {
            cap = { letter, relaxed: k.relaxed, name: '', text: k.text, values: k.values, keyed: k, wantLsn: it.wantLsn, lsn: null, answer: resolve as Captured['answer'], fail: reject };
            caps.push(cap);
          });
        },
        named: (name, values, build) => this.conn.named(name, values, build),
        simple: (text) => this.conn.simple(text),
        citus: () => this.conn.citus(),
        // Batching runs only where the database is known not to be Citus (active).
        relaxable: () => true,
      };
      // The write functions send their one statement before their first await: captured now.
      it.fn(s).then(async (value) => {
        let lsn = cap?.lsn ?? null;
        // Not captured (sent alone on the pool): its position read after it, on any connection.
        if (cap === undefined && it.wantLsn) lsn = (await this.conn.thenLsn(async () => undefined).catch(() => ({ lsn: null }))).lsn;
        it.resolve({ value, lsn });
      }, it.reject);
    }
    capturing = false;
    if (caps.length === 0) return;
    if (caps.length === 1) return this.sendAlone(caps[0]);

    // By record; Array.prototype.sort is stable, so one record's writes keep their order.
    const sorted = caps
      .map((c, k) => ({ c, k }))
      .sort((a, b) => cmp(a.c.values[0], b.c.values[0]) || cmp(a.c.values[1], b.c.values[1]) || a.k - b.k)
      .map((x) => x.c);
    const wantLsn = sorted.some((c) => c.wantLsn);
    const param = JSON.stringify(
      sorted.map((c) =>
        c.keyed === null
          ? [c.letter, ...c.values]
          : ['key', c.keyed.key.rid, c.keyed.key.author, c.keyed.key.key, c.keyed.key.digest, c.keyed.key.ttlSeconds, [c.letter, ...c.values]],
      ),
    );
    const st = sorted.every((c) => c.relaxed) ? BATCH_RELAXED : BATCH;
    this.opts.onBatch?.(sorted.length);
    let res: { rows: { i: number; r: unknown }[] };
    let lsn: string | null = null;
    try {
      if (wantLsn) ({ value: res, lsn } = await this.conn.thenLsn((on) => on.exec<{ i: number; r: unknown }>(st.name, st.text, [param])));
      else res = await this.conn.exec<{ i: number; r: unknown }>(st.name, st.text, [param]);
    } catch (e) {
      if (!rolledBack(e)) {
        for (const c of sorted) c.fail(e);
        return;
      }
      // A write raised: nothing of the batch committed. Each again alone, one record's in order.
      const byRecord = new Map<string, Captured[]>();
      for (const c of sorted) {
        const key = JSON.stringify([c.values[0], c.values[1]]);
        const list = byRecord.get(key);
        if (list) list.push(c);
        else byRecord.set(key, [c]);
      }
      await Promise.all(
        [...byRecord.values()].map(async (list) => {
          for (const c of list) {
            // The batch's backend may not have released the key yet (the error comes before
            // the abort): wait for it, or this write alone would answer IN_USE for its own key.
            if (c.keyed !== null) {
              const { author, key } = c.keyed.key;
              const waited = await this.conn.exec(IDEMPOTENCY_WAIT.name, IDEMPOTENCY_WAIT.text, [author, key]).then(
                () => true,
                (e: unknown) => (c.fail(e), false),
              );
              if (!waited) continue;
            }
            await this.sendAlone(c);
          }
        }),
      );
      return;
    }
    const rows: unknown[][] = sorted.map(() => []);
    for (const row of res.rows) rows[row.i]?.push(row.r);
    sorted.forEach((c, k) => {
      c.lsn = lsn;
      c.answer(rows[k]);
    });
  }

  /** A captured statement sent as its own statement (a keyed one as its own message). */
  private async sendAlone(c: Captured): Promise<void> {
    this.opts.onBatch?.(1);
    const send = async (st: Statements): Promise<unknown[]> => {
      const k = c.keyed;
      return k !== null ? st.keyed(k) : (await st.exec(c.name, c.text, c.values)).rows;
    };
    try {
      if (c.wantLsn) {
        const { value, lsn } = await this.conn.thenLsn(send);
        c.lsn = lsn;
        c.answer(value);
      } else c.answer(await send(this.conn));
    } catch (e) {
      c.fail(e);
    }
  }
}

/** Migration 0026: waits until no transaction holds an idempotency key's lock. */
const IDEMPOTENCY_WAIT = { name: 'kslate_idempotency_wait', text: 'select kslate_idempotency_wait($1, $2)' };

function cmp(a: unknown, b: unknown): number {
  const x = String(a);
  const y = String(b);
  return x < y ? -1 : x > y ? 1 : 0;
}

/**
 * Whether the server answered the batch with an error that rolled it back and that the
 * batch's writes, each alone, may not meet: a write's own fault. Not a timeout (the budget is
 * spent; also how a shutdown cancels statements), a lost or unreachable server (the outcome
 * is unknown) or a missing schema.
 */
function rolledBack(e: unknown): boolean {
  const code = (e as { code?: unknown } | null)?.code;
  if (typeof code !== 'string' || !/^[0-9A-Z]{5}$/.test(code)) return false;
  const fault = classifyDbError(e);
  return fault === null || fault === 'data';
}
