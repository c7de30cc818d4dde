/**
 * The database port (db/port.ts) over PostgreSQL: Kysely typed by the tables (schema.ts) over
 * a node-postgres pool (pool.ts). One file per concern, each a set of functions taking the
 * pool (`Conn`, or its Kysely) or a transaction first:
 *
 *   record.ts      a get and a checkpoint load         history.ts     a history page
 *   query.ts       query by field values                writes.ts      every write, one statement each
 *   classes.ts     classes and kslate_meta              read-sets.ts   read sets and scope owners
 *   change-log.ts  what the watch streams read          sweep.ts       the worker's sweep
 *   sessions.ts    the web console's sessions           replicas.ts    where reads go given standbys
 *
 * PgDb only binds them to one pool and turns driver faults into a StorageFault; a request's
 * session (`session()`) also sends its reads through replicas.ts and remembers the WAL
 * position its writes reached (X-Kslate-Lsn). Why Kysely,
 * and where its query builder is used rather than SQL text: docs/decisions.md.
 */
import type pg from 'pg';
import type {
  ChangeLog,
  ClaimWrite,
  TransactRequest,
  ClassUpsert,
  Db,
  DbSession,
  HistoryInsert,
  KeyedRun,
  TxDb,
  HistoryMark,
  LogPosition,
  NewConsoleSession,
  QueryFilter,
  ReadRecordOptions,
  RetentionRules,
  RetentionWalk,
  RoleSubjects,
  SweepDb,
  WriteRequest,
} from '../port.js';
import { toStorageFault } from '../errors.js';
import * as changeLog from './change-log.js';
import * as classes from './classes.js';
import { Conn, type Statements } from './conn.js';
import * as history from './history.js';
import * as idempotency from './idempotency.js';
import * as query from './query.js';
import * as readSets from './read-sets.js';
import * as record from './record.js';
import * as sessions from './sessions.js';
import * as sweep from './sweep.js';
import * as writes from './writes.js';
import { ReadRouter, type ReplicaOptions } from './replicas.js';
import { WriteBatcher, type BatchOptions } from './batch.js';
import { formatLsn, parseLsn } from '../lsn.js';

export { cancelOwnStatements, CLIENT_CHECK_MS, CLIENT_TIMEOUT_MESSAGE, createPool, namedQuery, poolConfig, runNamed, type PgOptions } from './pool.js';
export { ROW_OVERHEAD_BYTES } from './conn.js';
export { REPLICA_DEFAULTS, type ReplicaOptions } from './replicas.js';
export { queryRecordsStatement } from './query.js';
export { CLAIM, WRITE } from './writes.js';
export { WRITE_BATCH_LANES, WRITE_BATCH_MAX, WRITE_QUEUE_MAX, type BatchOptions } from './batch.js';
export type { Database } from './schema.js';

/** A request's state in its session (PgDb.session): the token its reads need, the position its writes reached. */
interface RequestState {
  min: bigint | null;
  lsn: bigint | null;
}

export class PgDb implements TxDb, SweepDb, ChangeLog {
  private readonly conn: Conn;
  /** Where reads go when standbys are given (useReplicas); absent: everything on this pool. */
  private router: ReadRouter<PgDb> | null = null;
  /** Set on a session only (session()). */
  private readonly req: RequestState | null = null;
  /** Set on a keyed view only (keyed()): its write statements take this key (migration 0016). */
  private readonly keyRun: KeyedRun | null = null;
  /**
   * Whether a session's writes read their WAL position (one more round trip each): 'auto'
   * reads it when standbys are given (useReplicas), the only case where this gateway's own
   * reads use the token; 'on' for a fleet whose other gateways have standbys.
   */
  writeLsn: 'auto' | 'on' | 'off' = 'auto';
  /** Coalesced writes (batch.ts, --write-batching): null, each write its own statement. */
  private batcher: WriteBatcher | null = null;

  constructor(
    readonly pool: pg.Pool,
    private readonly onSchemaMissing?: () => void,
  ) {
    this.conn = new Conn(pool);
  }

  /**
   * Serve reads from these standbys (one PgDb per standby's pool), by the rules of replicas.ts.
   * Resolves once their first probe answered (a standby down at start is retried later).
   */
  useReplicas(standbys: PgDb[], opts: ReplicaOptions): Promise<void> {
    this.router?.stop();
    this.router = new ReadRouter<PgDb>(this, standbys, opts);
    return this.router.start();
  }

  /**
   * Coalesce the puts, appends, claims and transactions of this pool's sessions, with an
   * idempotency key or not (batch.ts; --write-batching on), or not (`null`). Not those of a
   * transaction (a dry run): they run on its connection.
   */
  batchWrites(opts: BatchOptions | null): void {
    this.batcher = opts === null ? null : new WriteBatcher(this.conn, opts);
  }

  /** Whether writes are being coalesced now (false on Citus, and before the first write told whether it is). */
  get batchingWrites(): boolean {
    return this.batcher?.active ?? false;
  }

  /** Called once if the primary refuses to tell a write's WAL position: writes then answer without X-Kslate-Lsn. */
  set onLsnUnsupported(fn: (e: Error) => void) {
    this.conn.onNoLsn = fn;
  }

  /** The standbys' state (metrics, /readyz detail); empty without standbys. */
  replicaStatus() {
    return this.router?.status() ?? [];
  }

  /** Stop probing the standbys (their pools are the caller's to end). */
  stopReplicas(): void {
    this.router?.stop();
  }

  /**
   * A request's view of this database (db/port.ts DbSession): its reads honour `minLsn` (a
   * valid LSN or null: the transport checked it) and its writes remember the WAL position they
   * reached, for the answer's X-Kslate-Lsn.
   */
  session(minLsn: string | null): DbSession {
    const s = Object.create(this) as PgDb;
    Object.defineProperty(s, 'req', { value: { min: minLsn === null ? null : parseLsn(minLsn), lsn: null } satisfies RequestState });
    return s as PgDb & DbSession;
  }

  /** The WAL position at or after the commit of every write this session made; null outside a session or before a write. */
  get lsn(): string | null {
    return this.req?.lsn == null ? null : formatLsn(this.req.lsn);
  }

  /** db/port.ts Db.rememberCurrentLsn: the WAL insert position now, on the primary, into this session's answer. */
  async rememberCurrentLsn(): Promise<void> {
    await this.write(async () => undefined);
  }

  /** A read the router may send to a standby. */
  private route<T>(fn: (db: PgDb) => Promise<T>): Promise<T> {
    if (this.router === null) return this.guard(() => fn(this));
    return this.router.read(this.req?.min ?? null, (db) => db.guard(() => fn(db)));
  }

  /**
   * A write on the primary; in a session, followed by the WAL position on the same connection.
   * `batched`: a write the batcher may coalesce with others (put, append, claim, transaction).
   */
  private write<T>(fn: (s: Statements) => Promise<T>, batched = false): Promise<T> {
    const req = this.req;
    const wanted = this.writeLsn === 'on' || (this.writeLsn === 'auto' && this.router !== null);
    const batcher = batched ? this.batcher : null;
    if (batcher !== null) {
      return this.guard(async () => {
        const { value, lsn } = await batcher.run(fn, req !== null && wanted);
        const n = lsn === null ? null : parseLsn(lsn);
        if (req !== null && n !== null && (req.lsn === null || n > req.lsn)) req.lsn = n;
        return value;
      });
    }
    if (req === null || !wanted) return this.guard(() => fn(this.conn));
    return this.guard(async () => {
      const { value, lsn } = await this.conn.thenLsn(fn);
      const n = lsn === null ? null : parseLsn(lsn);
      if (n !== null && (req.lsn === null || n > req.lsn)) req.lsn = n;
      return value;
    });
  }

  /** pg_last_wal_replay_lsn() (the router's probe of a standby). */
  async replayLsn(): Promise<string | null> {
    const { rows } = await this.conn.exec<{ lsn: string | null }>('kslate_replay_lsn', 'select pg_last_wal_replay_lsn()::text as lsn', []);
    return rows[0]?.lsn ?? null;
  }

  /**
   * One connection of this (standby's) pool that has replayed `lsn`, checked on it, as a PgDb
   * whose every statement runs on that connection (ReplicaTarget.pinnedAt); null when it has not.
   */
  pinnedAt(lsn: string): Promise<{ db: PgDb; release(err?: unknown): void } | null> {
    return this.guard(async () => {
      const client = await this.pool.connect();
      let done = false;
      const release = (err?: unknown) => {
        if (done) return;
        done = true;
        client.release(err === undefined ? undefined : err instanceof Error ? err : true);
      };
      try {
        const { rows } = await client.query<{ ok: boolean }>('select pg_last_wal_replay_lsn() >= $1::pg_lsn as ok', [lsn]);
        if (rows[0]?.ok !== true) {
          release();
          return null;
        }
      } catch (e) {
        release(e);
        throw e;
      }
      // A pool of this one connection: Kysely checks it out and "releases" it per statement.
      const one = { query: (...a: unknown[]) => (client.query as (...x: unknown[]) => unknown)(...a), release: () => undefined };
      const pool = { connect: async () => one, query: one.query, end: async () => undefined, on: () => pool } as unknown as pg.Pool;
      return { db: new PgDb(pool), release };
    });
  }

  /** pg_current_wal_lsn() (the router's sample of the primary). */
  async walLsn(): Promise<string> {
    const { rows } = await this.conn.exec<{ lsn: string }>('kslate_wal_lsn', 'select pg_current_wal_lsn()::text as lsn', []);
    return rows[0].lsn;
  }

  /** Kysely over the pool, typed by the tables (also what ends the pool: `kysely.destroy()`). */
  get kysely() {
    return this.conn.kysely;
  }

  /** Every port call goes through here: driver faults become a StorageFault (the handlers answer 503 UNAVAILABLE). */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toStorageFault(e, this.onSchemaMissing);
    }
  }

  // ---- reading a record, query, history ---------------------------------------------------

  readRecord(cls: string, rid: string, opts: ReadRecordOptions) {
    return this.route((db) => record.readRecord(db.conn, cls, rid, opts));
  }

  loadCheckpoint(cls: string, rid: string, role: string) {
    return this.route((db) => record.loadCheckpoint(db.kysely, cls, rid, role));
  }

  queryRecords(cls: string, filters: QueryFilter[], opts: { afterId: number; limit: number; fields: string[]; maxBytes: number }) {
    return this.route((db) => query.queryRecords(db.conn, cls, filters, opts));
  }

  readHistory(cls: string, rid: string, opts: { fields: string[] | null; beforeSeq: number | null; limit: number; maxBytes: number; mark: HistoryMark }) {
    return this.route((db) => history.readHistory(db.conn, cls, rid, opts));
  }

  recordOrHistoryExists(cls: string, rid: string) {
    return this.route((db) => history.recordOrHistoryExists(db.kysely, cls, rid));
  }

  // ---- transactions and idempotency keys (migration 0011, issue 33) ---------------------

  async transaction<T>(fn: (tx: TxDb) => Promise<T>, opts: { rollback?: boolean } = {}): Promise<T> {
    const client = await this.guard(() => this.pool.connect());
    let done = false;
    let broken: Error | undefined;
    let out: T;
    try {
      await this.guard(() => client.query('begin'));
      out = await fn(new PgDb(onClient(client), this.onSchemaMissing));
      await this.guard(() => client.query(opts.rollback ? 'rollback' : 'commit'));
      done = true;
    } catch (e) {
      if (!done) {
        try {
          await client.query('rollback');
        } catch (r) {
          broken = r instanceof Error ? r : new Error(String(r));
        }
      }
      throw e;
    } finally {
      // Released before anything else runs: a request never holds two connections at once
      // (64 writers on a pool of 10 would wait on each other).
      client.release(broken);
    }
    // A session's answer carries the WAL position its writes reached (X-Kslate-Lsn): read
    // after the commit, so a failure to read it cannot undo the write.
    if (!opts.rollback && this.req) await this.rememberCurrentLsn().catch(() => undefined);
    return out;
  }

  /** db/port.ts Db.keyed: this Db (a session's too) with its write statements keyed. */
  keyed(run: KeyedRun): PgDb {
    const s = Object.create(this) as PgDb;
    Object.defineProperty(s, 'keyRun', { value: run });
    return s;
  }

  keepAnswer(run: KeyedRun, status: number, body: string) {
    return this.write((s) => idempotency.keepAnswer(s, run, status, body));
  }

  purgeIdempotencyKeys(limit: number) {
    return this.guard(() => idempotency.purgeIdempotencyKeys(this.kysely, limit));
  }

  countIdempotencyKeys() {
    return this.guard(() => idempotency.countIdempotencyKeys(this.kysely));
  }

  // ---- writes --------------------------------------------------------------------------

  writeField(w: WriteRequest) {
    const k = this.keyRun;
    // Keyed or not, coalesced (batch.ts): a keyed write takes its key in its batch's transaction.
    return this.write((s) => (k ? idempotency.writeFieldKeyed(s, k, w) : writes.writeField(s, w)), true);
  }

  claim(c: ClaimWrite) {
    const k = this.keyRun;
    return this.write((s) => (k ? idempotency.claimKeyed(s, k, c) : writes.claim(s, c)), true);
  }

  transact(t: TransactRequest) {
    const k = this.keyRun;
    return this.write((s) => (k ? idempotency.transactKeyed(s, k, t) : writes.transact(s, t)), true);
  }

  saveCheckpoint(cls: string, rid: string, role: string, document: Record<string, unknown>, author: string) {
    const k = this.keyRun;
    return this.write((s) =>
      k ? idempotency.saveCheckpointKeyed(s, k, cls, rid, role, document, author) : writes.saveCheckpoint(s, cls, rid, role, document, author),
    );
  }

  insertRejection(row: HistoryInsert) {
    // Keyed: written with the refusal's stored answer, in its one statement (keepAnswer).
    if (this.keyRun) {
      this.keyRun.rejection = row;
      return Promise.resolve();
    }
    return this.guard(() => writes.insertRejection(this.kysely, row));
  }

  // ---- classes, read sets ----------------------------------------------------------------

  listClasses() {
    return this.route((db) => classes.listClasses(db.kysely));
  }

  applyClasses(live: ClassUpsert[], refused: { name: string; reason: string }[], markGone: boolean) {
    return this.guard(() => classes.applyClasses(this.kysely, live, refused, markGone));
  }

  meta(key: string) {
    return this.guard(() => classes.meta(this.kysely, key));
  }

  claimScope(scope: string, author: string, windowSeconds: number) {
    return this.guard(() => readSets.claimScope(this.kysely, scope, author, windowSeconds));
  }

  recordReads(author: string, scope: string, cls: string, reads: { rid: string; field: string; version: number }[]) {
    return this.guard(() => readSets.recordReads(this.kysely, author, scope, cls, reads));
  }

  pruneReadSets(windowSeconds: number) {
    return this.guard(() => readSets.pruneReadSets(this.kysely, windowSeconds));
  }

  readSet(author: string, scope: string, cls: string, rid: string, windowSeconds: number) {
    return this.guard(() => readSets.readSet(this.kysely, author, scope, cls, rid, windowSeconds));
  }

  // ---- the change log (migration 0007, issue 16) ------------------------------------------

  logHead() {
    return this.guard(async () => changeLog.logHead(this.kysely, await this.conn.citus()));
  }

  readLog(classList: string[], after: LogPosition, opts: { upTo: LogPosition | null; limit: number; maxBytes: number }) {
    return this.guard(async () => changeLog.readLog(this.kysely, classList, after, opts, await this.conn.citus()));
  }

  readRecordChanges(cls: string, rid: string, afterRecordVersion: number, opts: { limit: number; maxBytes: number }) {
    return this.guard(() => changeLog.readRecordChanges(this.kysely, cls, rid, afterRecordVersion, opts));
  }

  firstChangeSince(cls: string, since: Date) {
    return this.guard(async () => changeLog.firstChangeSince(this.kysely, cls, since, await this.conn.citus()));
  }

  // ---- the sweep -------------------------------------------------------------------------

  acquireLease(name: string, holder: string, ttlSeconds: number) {
    return this.guard(() => sweep.acquireLease(this.kysely, name, holder, ttlSeconds));
  }

  releaseLease(name: string, holder: string) {
    return this.guard(() => sweep.releaseLease(this.kysely, name, holder));
  }

  expireRecords(cls: string, ttlSeconds: number, limit: number) {
    return this.guard(async () => sweep.expireRecords(this.kysely, cls, ttlSeconds, limit, await this.conn.citus()));
  }

  expireDueRecords(limit: number) {
    return this.guard(async () => sweep.expireRecords(this.kysely, '', null, limit, await this.conn.citus()));
  }

  purgeExpired(limit: number) {
    return this.guard(async () => sweep.purgeExpired(this.kysely, limit, await this.conn.citus()));
  }

  historyTruncation(cls: string, rid: string) {
    return this.guard(() => sweep.historyTruncation(this.kysely, cls, rid));
  }

  purgeHistory(cls: string, walk: RetentionWalk, rules: RetentionRules, limit: number) {
    return this.guard(() => sweep.purgeHistoryBatch(this.kysely, cls, walk, rules, limit));
  }

  purgesByRecord() {
    return this.guard(() => this.conn.citus());
  }

  flagLapsedLeases(limit: number) {
    return this.guard(async () => sweep.flagLapsedLeases(this.kysely, limit, await this.conn.citus()));
  }

  gauges(classList: string[], roles: RoleSubjects[]) {
    return this.guard(async () => sweep.gauges(this.kysely, classList, roles, await this.conn.citus()));
  }

  // ---- the web console's sessions (migration 0009) --------------------------------------

  createConsoleSession(s: NewConsoleSession) {
    return this.guard(() => sessions.createConsoleSession(this.kysely, s));
  }

  readConsoleSession(id: string) {
    return this.guard(() => sessions.readConsoleSession(this.kysely, id));
  }

  deleteConsoleSession(id: string) {
    return this.guard(() => sessions.deleteConsoleSession(this.kysely, id));
  }

  purgeConsoleSessions(limit: number) {
    return this.guard(() => sessions.purgeConsoleSessions(this.kysely, limit));
  }
}

/**
 * One checked-out connection seen as a pool (what Conn and Kysely take): every statement of a
 * transaction goes to it, and releasing it is left to `PgDb.transaction`.
 */
function onClient(client: pg.PoolClient): pg.Pool {
  const borrowed = { query: client.query.bind(client), release() {} };
  return { query: client.query.bind(client), connect: async () => borrowed, end: async () => {} } as unknown as pg.Pool;
}
