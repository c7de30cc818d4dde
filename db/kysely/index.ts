/**
 * The database port (db/port.ts) over PostgreSQL: Kysely typed by the tables (schema.ts) over
 * a node-postgres pool (pool.ts). One file per concern, each a set of functions taking the
 * pool (`Conn`, or its Kysely) or a transaction first:
 *
 *   record.ts      a get and a checkpoint load         history.ts     a history page
 *   query.ts       query by field values                writes.ts      every write, one statement each
 *   classes.ts     classes and kslate_meta              read-sets.ts   read sets and scope owners
 *   change-log.ts  what the watch streams read          sweep.ts       the worker's sweep
 *   sessions.ts    the web console's sessions
 *
 * PgDb only binds them to one pool and turns driver faults into a StorageFault. Why Kysely,
 * and where its query builder is used rather than SQL text: docs/decisions.md.
 */
import type pg from 'pg';
import type {
  ChangeLog,
  ClaimWrite,
  ClassUpsert,
  Db,
  HistoryInsert,
  IdempotencyAnswer,
  TxDb,
  HistoryMark,
  LogPosition,
  NewConsoleSession,
  QueryFilter,
  ReadRecordOptions,
  RoleSubjects,
  SweepDb,
  WriteRequest,
} from '../port.js';
import { toStorageFault } from '../errors.js';
import * as changeLog from './change-log.js';
import * as classes from './classes.js';
import { Conn } from './conn.js';
import * as history from './history.js';
import * as idempotency from './idempotency.js';
import * as query from './query.js';
import * as readSets from './read-sets.js';
import * as record from './record.js';
import * as sessions from './sessions.js';
import * as sweep from './sweep.js';
import * as writes from './writes.js';

export { cancelOwnStatements, CLIENT_CHECK_MS, CLIENT_TIMEOUT_MESSAGE, createPool, namedQuery, poolConfig, runNamed, type PgOptions } from './pool.js';
export { ROW_OVERHEAD_BYTES } from './conn.js';
export { queryRecordsStatement } from './query.js';
export { CLAIM, WRITE } from './writes.js';
export type { Database } from './schema.js';

export class PgDb implements TxDb, SweepDb, ChangeLog {
  private readonly conn: Conn;

  constructor(
    readonly pool: pg.Pool,
    private readonly onSchemaMissing?: () => void,
  ) {
    this.conn = new Conn(pool);
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
    return this.guard(() => record.readRecord(this.conn, cls, rid, opts));
  }

  loadCheckpoint(cls: string, rid: string, role: string) {
    return this.guard(() => record.loadCheckpoint(this.kysely, cls, rid, role));
  }

  queryRecords(cls: string, filters: QueryFilter[], opts: { afterId: number; limit: number; fields: string[]; maxBytes: number }) {
    return this.guard(() => query.queryRecords(this.conn, cls, filters, opts));
  }

  readHistory(cls: string, rid: string, opts: { fields: string[] | null; beforeSeq: number | null; limit: number; maxBytes: number; mark: HistoryMark }) {
    return this.guard(() => history.readHistory(this.conn, cls, rid, opts));
  }

  recordOrHistoryExists(cls: string, rid: string) {
    return this.guard(() => history.recordOrHistoryExists(this.kysely, cls, rid));
  }

  // ---- transactions and idempotency keys (migration 0011, issue 33) ---------------------

  async transaction<T>(fn: (tx: TxDb) => Promise<T>, opts: { rollback?: boolean } = {}): Promise<T> {
    const client = await this.guard(() => this.pool.connect());
    let done = false;
    let broken: Error | undefined;
    try {
      await this.guard(() => client.query('begin'));
      const out = await fn(new PgDb(onClient(client), this.onSchemaMissing));
      await this.guard(() => client.query(opts.rollback ? 'rollback' : 'commit'));
      done = true;
      return out;
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
      client.release(broken);
    }
  }

  takeIdempotencyKey(author: string, key: string, digest: string) {
    return this.guard(() => idempotency.takeIdempotencyKey(this.conn, author, key, digest));
  }

  storeIdempotencyKey(a: IdempotencyAnswer) {
    return this.guard(() => idempotency.storeIdempotencyKey(this.conn, a));
  }

  purgeIdempotencyKeys(limit: number) {
    return this.guard(() => idempotency.purgeIdempotencyKeys(this.kysely, limit));
  }

  countIdempotencyKeys() {
    return this.guard(() => idempotency.countIdempotencyKeys(this.kysely));
  }

  // ---- writes --------------------------------------------------------------------------

  writeField(w: WriteRequest) {
    return this.guard(() => writes.writeField(this.conn, w));
  }

  claim(c: ClaimWrite) {
    return this.guard(() => writes.claim(this.conn, c));
  }

  saveCheckpoint(cls: string, rid: string, role: string, document: Record<string, unknown>, author: string) {
    return this.guard(() => writes.saveCheckpoint(this.kysely, cls, rid, role, document, author));
  }

  insertRejection(row: HistoryInsert) {
    return this.guard(() => writes.insertRejection(this.kysely, row));
  }

  // ---- classes, read sets ----------------------------------------------------------------

  listClasses() {
    return this.guard(() => classes.listClasses(this.kysely));
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
    return this.guard(() => changeLog.logHead(this.kysely));
  }

  readLog(classList: string[], after: LogPosition, opts: { upTo: LogPosition | null; limit: number; maxBytes: number }) {
    return this.guard(() => changeLog.readLog(this.kysely, classList, after, opts));
  }

  readRecordChanges(cls: string, rid: string, afterRecordVersion: number, opts: { limit: number; maxBytes: number }) {
    return this.guard(() => changeLog.readRecordChanges(this.kysely, cls, rid, afterRecordVersion, opts));
  }

  firstChangeSince(cls: string, since: Date) {
    return this.guard(() => changeLog.firstChangeSince(this.kysely, cls, since));
  }

  // ---- the sweep -------------------------------------------------------------------------

  acquireLease(name: string, holder: string, ttlSeconds: number) {
    return this.guard(() => sweep.acquireLease(this.kysely, name, holder, ttlSeconds));
  }

  releaseLease(name: string, holder: string) {
    return this.guard(() => sweep.releaseLease(this.kysely, name, holder));
  }

  expireRecords(cls: string, ttlSeconds: number, limit: number) {
    return this.guard(() => sweep.expireRecords(this.kysely, cls, ttlSeconds, limit));
  }

  purgeExpired(limit: number) {
    return this.guard(() => sweep.purgeExpired(this.kysely, limit));
  }

  flagLapsedLeases(limit: number) {
    return this.guard(() => sweep.flagLapsedLeases(this.kysely, limit));
  }

  gauges(classList: string[], roles: RoleSubjects[]) {
    return this.guard(() => sweep.gauges(this.kysely, classList, roles));
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
