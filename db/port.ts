/**
 * The database port: what handlers need from storage, named by their need (style habit 6).
 * Handlers import only these types; `db/kysely` implements them over PostgreSQL.
 */

/** A premise as stored: `{ field, version, kind?, inferred? }`. */
export interface StoredPremise {
  field: string;
  version: number;
  kind?: string;
  inferred?: boolean;
}

/** A value as one write stored it, with who wrote it, on what grounds and when (an entry, a change). */
export interface WrittenRow {
  value: unknown;
  author: string;
  identity_strength: string | null;
  evidence: string | null;
  based_on: StoredPremise[] | null;
  invocation: Record<string, unknown> | null;
  created_at: Date;
}

export interface EntryRow extends WrittenRow {
  seq: number;
}

export interface FieldRow {
  name: string;
  kind: string;
  value: unknown;
  version: number;
  /** The record version this field's last applied write produced. */
  record_version: number;
  author: string | null;
  identity_strength: string | null;
  evidence: string | null;
  based_on: StoredPremise[] | null;
  invocation: Record<string, unknown> | null;
  updated_at: Date;
  owner: string | null;
  lease_expires_at: Date | null;
  /** Task fields: an owner whose lease has not expired by the database clock. */
  lease_held: boolean;
  lease_lapsed: boolean;
  /** Append fields only, newest last; capped by the read's entriesLimit and byte budget. */
  entries?: EntryRow[];
  /** Append fields of a get: older entries the read wanted were left out by the byte budget. */
  entries_more?: boolean;
  /** Size of the row for byte budgets (value, evidence, premises, invocation, overhead). */
  bytes?: number;
  /** A get's byte budget ran out before this field: its value was not read. */
  omitted?: boolean;
  /**
   * A get's value as its stored JSON text (`value` is then undefined): the answer carries it
   * as is instead of parsing and re-serialising it (handlers/pipeline.ts fieldJson).
   */
  valueText?: string;
}

/** A get: which fields, how many entries, and the byte budget of the response. */
export interface ReadRecordOptions {
  /** Field names (null = every written field). */
  fields: string[] | null;
  /** Newest entries per append field (null = as many as the budget allows). */
  entriesLimit: number | null;
  /** Only entries with seq below this (a continuation), or null. */
  entriesBeforeSeq: number | null;
  /** Fields (in name order) then entries are kept while their running size stays within this; the first of each always. */
  maxBytes: number;
}

export interface RecordRow {
  id: number;
  class: string;
  rid: string;
  record_version: number;
  created_at: Date;
  /** The record's own expiry (ttl_seconds, migration 0013); null when it has none. */
  expires_at?: Date | null;
  /** Its last applied write (the class ttl counts from it). */
  last_write_at?: Date;
  fields: FieldRow[];
}

/** How a history row keeps the written value. */
export type HistoryValue =
  | { kind: 'none' }
  | { kind: 'whole'; value: unknown }
  | { kind: 'digest'; size: number; sha256: string };

export interface HistoryInsert {
  class: string;
  rid: string;
  field: string;
  op: 'put' | 'append' | 'claim' | 'release' | 'takeover';
  outcome: string;
  version?: number | null;
  value: HistoryValue;
  author: string;
  identity_strength: string | null;
  evidence?: string | null;
  expected_version?: number | null;
  based_on?: StoredPremise[] | null;
  invocation?: Record<string, unknown> | null;
}

/**
 * A page of history as readHistory returns it: each row as the JSON it was rendered to when it
 * was written (migration 0008, `kslate_history_text`: the API's history row, `based_on` and
 * `created_at` (UTC) its last keys), newest first, in runs: each run is rows joined by `,`,
 * and the runs joined by `,` are the page's JSON array without its brackets. Rows the reader
 * asked to see marked (`mark`) come as `RS <json> US` (ASCII 30 and 31, which JSON text cannot
 * hold unescaped), for it to rewrite their ends; a row never spans two runs.
 */
export interface HistoryPage {
  runs: string[];
  /** How many rows the runs hold. */
  count: number;
  /** The seq of its last (oldest) row; null for an empty page. */
  lastSeq: number | null;
  /** Older rows remain. */
  more: boolean;
}

/**
 * Which rows of a history page come marked: none, those with premises (a reader whose role
 * does not read every field), or all (a gateway whose time zone is not UTC).
 */
export type HistoryMark = 'none' | 'premises' | 'all';

/** A marked row in HistoryPage.runs. */
export const HISTORY_MARKED_ROW = /\x1e([^\x1f]*)\x1f/g;

/** What a put or append (alone or in a transaction) rests on, as the write functions judge it under the lock. */
export interface WriteGrounds {
  evidence: string | null;
  /** The premises stored with the write (explicit or inferred); null when none. */
  based_on: StoredPremise[] | null;
  invocation: Record<string, unknown> | null;
  /** STALE unless the field is at this version (a versioned put's expected_version); null: no check. */
  expectVersion: number | null;
  /** The `expected_version` the history row records. */
  expected_version: number | null;
  /** Each must still hold: the field at that version; a fence, leased by the writer when the lock was taken. */
  premises: readonly StoredPremise[];
  /** The resolve gate: roles that must have saved a checkpoint on the record; null when the write is not gated. */
  requiredCheckpoints: readonly string[] | null;
}

/**
 * A put or append as `Db.writeField` decides and applies it under the record's lock in one
 * round trip (kslate_write, migration 0010): every check left after the gateway's own (STALE,
 * the resolve gate, STALE_PREMISE with fences) is judged there, in the order of the spec.
 */
export interface WriteRequest extends WriteGrounds {
  class: string;
  rid: string;
  field: string;
  kind: 'versioned' | 'soft' | 'append';
  op: 'put' | 'append';
  /** The new value (put) or entry (append). */
  value: unknown;
  author: string;
  identity_strength: string;
  /** Set or extend the record's expiry to this many seconds after the write (issue 37); null leaves it. */
  ttl_seconds?: number | null;
  /**
   * The field is relaxed (issue 38, class `durability: relaxed`): the write's transaction
   * commits without waiting for its WAL flush (synchronous_commit = off). Absent: strict.
   */
  relaxed?: boolean;
}

/** A premise that moved (STALE_PREMISE), as its error body lists it. */
export interface MovedPremise {
  field: string;
  your_version: number;
  current_version: number;
  current_author: string | null;
  current_evidence: string | null;
}

/**
 * What `Db.writeField` decided. Every outcome but `applied` wrote nothing but its history row
 * (`invalid_checkpoint`: none). `current_version` and `current_author` describe the written
 * field when the lock was taken.
 */
export type WriteResult =
  | { outcome: 'applied'; version: number; record_version: number; created: boolean; expires_at?: Date | null }
  | {
      outcome: 'stale';
      current_version: number;
      /** The field's current row; null when it has none. */
      current: { value: unknown; author: string | null; evidence: string | null; updated_at: Date } | null;
    }
  | { outcome: 'stale_premise'; current_version: number; current_author: string | null; moved: MovedPremise[] }
  | { outcome: 'invalid_checkpoint'; missing: string[] };

/** A claim as `Db.claim` decides and applies it in one round trip (migration 0006). */
export interface ClaimWrite {
  class: string;
  rid: string;
  field: string;
  author: string;
  identity_strength: string;
  /** 0 releases. */
  lease_seconds: number;
  invocation: Record<string, unknown> | null;
}

export interface ClaimResult {
  /** `held`: another identity holds the lease (only the history row was written). */
  outcome: 'held' | 'claim' | 'renew' | 'takeover' | 'release';
  /** The field's new version; for `held`, its current one. */
  version: number;
  record_version: number | null;
  created: boolean;
  /** The owner after the claim (none after a release); for `held`, the holder. */
  owner: string | null;
  lease_expires_at: Date | null;
  took_over_from: string | null;
}

/**
 * One write of a transaction (`Db.transact`): a put or append as `WriteRequest` has it, or a
 * claim. A write the gateway did not parse (after the first refused one) carries only what
 * its history row records.
 */
export interface TransactWrite extends WriteGrounds {
  op: 'put' | 'append' | 'claim';
  field: string;
  kind: 'versioned' | 'soft' | 'append' | 'task' | null;
  /** The value (put) or entry (append), stored as sent; absent for a claim. */
  value?: unknown;
  hasValue: boolean;
  /** A claim's lease (0 releases). */
  lease_seconds: number | null;
  /** What the write's row keeps when it is refused by the gateway or not applied. */
  kept: HistoryValue;
}

/**
 * A transaction on one record (kslate_transact, migration 0012): every write decided in index
 * order under one lock against the state the earlier ones left, all applied with one record
 * version, or none.
 */
export interface TransactRequest {
  class: string;
  rid: string;
  /** The transaction's id (a UUID), on every history row of the attempt. */
  txn: string;
  author: string;
  identity_strength: string;
  writes: TransactWrite[];
  /** A write the gateway refused before the lock: the writes before it are still decided first. */
  stop: { index: number; outcome: string | null } | null;
  /** Sets or extends the record's own expiry when every write applies (issue 37); null/absent: leave it. */
  ttl_seconds?: number | null;
  /** Every write is of a relaxed field (issue 38): commit without waiting for the WAL flush. Absent: strict. */
  relaxed?: boolean;
}

/** What each applied write of a transaction got. */
export type TransactApplied =
  | { op: 'put' | 'append'; version: number }
  | { op: 'claim'; outcome: ClaimResult['outcome']; version: number; owner: string | null; lease_expires_at: Date | null; took_over_from: string | null };

export type TransactResult =
  | {
      outcome: 'applied';
      record_version: number;
      created: boolean;
      writes: TransactApplied[];
      /** The transaction id it ran under, when a keyed replay answers one drawn before (migration 0016). */
      txn?: string;
      /** The record's own expiry after the transaction set or extended it (`ttl_seconds`); null when it sent none. */
      expires_at: Date | null;
    }
  | {
      outcome: 'rejected';
      /** The first write in index order that was refused. */
      index: number;
      /** Its decision as a single write gets it; `stop` = the gateway's own refusal at `stop.index`. */
      decision: Exclude<WriteResult, { outcome: 'applied' }> | (ClaimResult & { outcome: 'held' }) | { outcome: 'stop' };
    };

export interface CheckpointRow {
  checkpoint_id: number;
  document: Record<string, unknown>;
  record_version: number;
}

/** One query filter: a value field compared with any of `values`, or a task field's `owner`. */
export interface QueryFilter {
  field: string;
  values?: unknown[];
  owner?: string;
}

export interface QueryRow {
  id: number;
  rid: string;
  record_version: number;
  /** Current rows of the requested fields; append fields carry their latest entry only. */
  fields: FieldRow[];
}

export interface ClassRow {
  name: string;
  namespace: string;
  spec: unknown;
  gone: boolean;
  status: unknown;
  updated_at: Date;
}

/** What the reconciler decided for one manifest. */
export interface ClassUpsert {
  name: string;
  namespace: string;
  spec: unknown;
}

/** A new console session (migration 0009, docs/console.md): `id` is the SHA-256 of the cookie's secret. */
export interface NewConsoleSession {
  id: string;
  author: string;
  /** The credential, sealed under a key only the cookie's secret gives. */
  sealed: string;
  ttlSeconds: number;
  /** The author's live sessions kept, this one included; older ones (and expired ones) are deleted. */
  maxPerAuthor: number;
}

export interface ConsoleSession {
  author: string;
  sealed: string;
  expiresAt: Date;
}

/** The web console's sign-in sessions, shared by every replica. */
export interface ConsoleSessions {
  createConsoleSession(s: NewConsoleSession): Promise<void>;
  /** The session with this id unless it expired (database clock); null otherwise. */
  readConsoleSession(id: string): Promise<ConsoleSession | null>;
  deleteConsoleSession(id: string): Promise<void>;
}

/** A write's Idempotency-Key as its keyed statement takes it (migration 0016). */
export interface IdempotencyKey {
  author: string;
  key: string;
  /** SHA-256 of the request (operation and input): the same key with another request is refused. */
  digest: string;
  ttlSeconds: number;
  /** The record the write names: where the key lives on Citus. */
  rid: string;
}

/**
 * One keyed write (handlers/write-once.ts, `Db.keyed`): each write statement of a keyed Db
 * takes the key, runs the write and stores its result rows under the key, in one statement;
 * or replays the stored rows. What the statements found is written here.
 */
export interface KeyedRun {
  key: IdempotencyKey;
  /** A keyed write statement answered (its result is stored, or was stored before). */
  ran: boolean;
  /** That answer was the stored one: nothing was written now. */
  replayed: boolean;
  /**
   * The history row of a refusal the gateway decided (`insertRejection` on a keyed Db): it is
   * written with the refusal's stored answer, by `Db.keepAnswer`.
   */
  rejection: HistoryInsert | null;
}

/**
 * What a keyed statement answers instead of running its write: the key is taken by another
 * statement now (`in_use`), holds another request's answer (`reused`), or holds this
 * request's answer stored as sent (`replay`, with `status` and `body`).
 */
export class KeyRefusal extends Error {
  constructor(
    readonly state: 'in_use' | 'reused' | 'replay',
    readonly status: number | null = null,
    readonly body: string | null = null,
  ) {
    super(`idempotency key ${state}`);
  }
}

/** The Db of one open transaction (`Db.transaction`: a dry run). */
export type TxDb = Db;

export interface Db extends ConsoleSessions {
  /**
   * Run `fn` in one transaction on one connection: committed when it returns (unless
   * `rollback`: a dry run), rolled back when it throws. Every call of `fn` goes through `tx`.
   */
  transaction<T>(fn: (tx: TxDb) => Promise<T>, opts?: { rollback?: boolean }): Promise<T>;
  /**
   * This Db with its write statements keyed by `run.key` (migration 0016): writeField, claim,
   * transact and saveCheckpoint each run as one statement that takes the key, replays its
   * stored result rows or runs the write and stores them; they throw KeyRefusal when the key
   * is in use, reused, or holds an answer stored as sent. `insertRejection` is kept for
   * `keepAnswer`.
   */
  keyed(run: KeyedRun): Db;
  /**
   * Store the answer (as sent) of a keyed write refused before its write statement, with
   * `run.rejection`'s history row, in one statement; throws KeyRefusal when the key is not
   * free (a replay: the answer stored first).
   */
  keepAnswer(run: KeyedRun, status: number, body: string): Promise<void>;
  /** Read a record with the named fields, bounded by `maxBytes` (see ReadRecordOptions). */
  readRecord(cls: string, rid: string, opts: ReadRecordOptions): Promise<RecordRow | null>;
  /**
   * History newest first, restricted to `fields` (null = all), rows with seq < beforeSeq: at
   * most `limit` rows, fewer when their running size passes `maxBytes` (the first row always).
   * `more` is true when older rows remain.
   */
  readHistory(
    cls: string,
    rid: string,
    opts: { fields: string[] | null; beforeSeq: number | null; limit: number; maxBytes: number; mark: HistoryMark },
  ): Promise<HistoryPage>;
  /**
   * Where class retention purged the record's history (issue 37): the newest time and the
   * greatest seq among its purged rows; null when none was purged.
   */
  historyTruncation(cls: string, rid: string): Promise<{ before: Date; beforeSeq: number } | null>;
  /** True when the record exists or any history row names it. */
  recordOrHistoryExists(cls: string, rid: string): Promise<boolean>;
  /** A rejection decided in the gateway, before the record's lock (scope, identity, evidence): one statement. */
  insertRejection(row: HistoryInsert): Promise<void>;
  /**
   * Decide and apply a put or append under the record's lock in one round trip: the applied
   * write, or the rejection (its history row written in the same statement).
   */
  writeField(w: WriteRequest): Promise<WriteResult>;
  /** Save a role's checkpoint on an existing record under its lock; null when the record does not exist. */
  saveCheckpoint(cls: string, rid: string, role: string, document: Record<string, unknown>, author: string): Promise<{ checkpoint_id: number; record_version: number } | null>;
  /** Decide and apply a claim (HELD included, with its history row) in one round trip. */
  claim(c: ClaimWrite): Promise<ClaimResult>;
  /** Decide and apply a transaction on one record in one round trip (its history rows included). */
  transact(t: TransactRequest): Promise<TransactResult>;
  listClasses(): Promise<ClassRow[]>;
  /** Upsert live classes and mark every other class gone, in one transaction. */
  applyClasses(live: ClassUpsert[], refused: { name: string; reason: string }[], markGone: boolean): Promise<void>;
  /** A value of the kslate_meta table (e.g. the cursor key). */
  meta(key: string): Promise<string | null>;
  /** The record's current fields and a role's checkpoint; null when the record does not exist. */
  loadCheckpoint(
    cls: string,
    rid: string,
    role: string,
  ): Promise<{ record_version: number; checkpoint: CheckpointRow | null; fields: FieldRow[] } | null>;
  /**
   * Records of a class matching every filter, by creation (id) after `afterId`: at most
   * `limit`, fewer when their running size passes `maxBytes` (the first always). `more` is
   * true when further matches remain.
   */
  queryRecords(
    cls: string,
    filters: QueryFilter[],
    opts: { afterId: number; limit: number; fields: string[]; maxBytes: number },
  ): Promise<{ rows: QueryRow[]; more: boolean }>;
  /**
   * Use a scope as `author`: returns the scope's owner, which is `author` unless another
   * identity used it within `windowSeconds` (then that identity, unchanged).
   */
  claimScope(scope: string, author: string, windowSeconds: number): Promise<string>;
  /** Remember that (author, scope) saw these field versions now. */
  recordReads(author: string, scope: string, cls: string, reads: { rid: string; field: string; version: number }[]): Promise<void>;
  /** Delete read-set entries and scope owners idle longer than the window; returns rows deleted. */
  pruneReadSets(windowSeconds: number): Promise<number>;
  /**
   * Put the primary's WAL position now into the request's answer (X-Kslate-Lsn), for an answer
   * that stands for a write committed earlier (an idempotent replay): any position now is after
   * that commit. Optional: a database without request sessions has nothing to remember it in.
   */
  rememberCurrentLsn?(): Promise<void>;
  /** The fields of one record (author, scope) read within the window, at the version last read. */
  readSet(author: string, scope: string, cls: string, rid: string, windowSeconds: number): Promise<{ field: string; version: number }[]>;
}

/**
 * A request's view of the database (docs/ha.md "Reads from standbys"): its reads may be served
 * by a standby that has replayed the request's read-your-writes token, and it remembers the WAL
 * position its writes reached, which the transports return as `X-Kslate-Lsn`.
 */
export interface DbSession extends Db {
  /** At or after the commit record of every write made through this session; null before one (or where unknown). */
  readonly lsn: string | null;
  rememberCurrentLsn(): Promise<void>;
}

/** A database that can open request sessions (PgDb); one that cannot is used as it is. */
export interface SessionDb extends Db {
  /** `minLsn`: the request's `X-Kslate-Min-Lsn`, already checked (db/lsn.ts), or null. */
  session(minLsn: string | null): DbSession;
}

/** The worker's gauges, computed in the sweep (decisions §5; interface "Worker metrics"). */
export interface WorkerGauges {
  /** Live records per class. */
  records: Map<string, number>;
  /** History rows per class (rows of expired records awaiting the purge excluded). */
  historyRows: Map<string, number>;
  /** Task fields with a lapsed lease nobody reclaimed. */
  leasesLapsed: number;
  /** When the oldest retained history row of each class was written (classes with no history left out). */
  oldestHistory?: Map<string, Date>;
  /** `class/role` → live records of the class on which no identity of the role wrote. */
  roleWroteNothing: Map<string, number>;
  /** Idempotency keys stored (issue 33), expired ones awaiting the purge included. */
  idempotencyKeys?: number;
}

/** A class's `history` spec in seconds; `spec` (its text) restarts the purge's walk when it changes. */
export interface RetentionRules {
  maxAgeSeconds: number | null;
  keepLast: number | null;
  rejectedMaxAgeSeconds: number | null;
  spec: string;
}

/**
 * The purge's walks: every row by age, rejected rows by age, the (record, field)s written
 * since the last walk, and the records whose checkpoints were saved since the last walk.
 */
export type RetentionWalk = 'age' | 'rejected' | 'fields' | 'checkpoints';

/** A role as the gauge needs it: who belongs (subjects, `ns/*` wildcards included). */
export interface RoleSubjects {
  class: string;
  role: string;
  subjects: string[];
}

/** What the sweep needs from storage, beyond the class table. Every time comes from the database clock. */
export interface SweepDb {
  listClasses(): Promise<ClassRow[]>;
  applyClasses(live: ClassUpsert[], refused: { name: string; reason: string }[], markGone: boolean): Promise<void>;
  pruneReadSets(windowSeconds: number): Promise<number>;
  /** Delete up to `limit` expired console sessions; returns how many. */
  purgeConsoleSessions(limit: number): Promise<number>;
  /** Delete up to `limit` expired idempotency keys; returns how many. */
  purgeIdempotencyKeys(limit: number): Promise<number>;
  /** Idempotency keys stored (expired ones awaiting the purge included). */
  countIdempotencyKeys(): Promise<number>;
  /**
   * Take (or renew) the named lease for `ttlSeconds` when it is free, expired or already
   * `holder`'s; false when someone else holds it.
   */
  acquireLease(name: string, holder: string, ttlSeconds: number): Promise<boolean>;
  /** Give the lease up (only if `holder` still holds it). */
  releaseLease(name: string, holder: string): Promise<void>;
  /**
   * Delete up to `limit` records of `cls` whose last applied write is older than
   * `ttlSeconds`, skipping any a writer holds locked, in one transaction: the record row,
   * its fields and checkpoints go, its history and entries are queued for the purge.
   */
  expireRecords(cls: string, ttlSeconds: number, limit: number): Promise<number>;
  /** As expireRecords, for records of any class whose own expiry (ttl_seconds) has passed. */
  expireDueRecords(limit: number): Promise<number>;
  /** Purge at most `limit` history rows and `limit` entries of expired records; `more` when some remain. */
  purgeExpired(limit: number): Promise<{ historyRows: number; entries: number; finished: number; more: boolean }>;
  /** Flag up to `limit` task fields whose lease expired unreclaimed as lapsed; returns how many. */
  flagLapsedLeases(limit: number): Promise<number>;
  /**
   * One bounded batch of a class's history retention (issue 37, migration 0013): at most
   * `limit` rows read past the walk's cursor, the purgeable ones deleted, the cursor moved.
   */
  purgeHistory(cls: string, walk: RetentionWalk, rules: RetentionRules, limit: number): Promise<{ purged: number; scanned: number; more: boolean }>;
  /**
   * Whether a `purgeHistory` batch purges record by record, one call per record on its node
   * (Citus, migration 0018), rather than in one statement: its rows cost far more each, so
   * the sweep probes with a small first batch before it has measured a rate.
   */
  purgesByRecord(): Promise<boolean>;
  gauges(classes: string[], roles: RoleSubjects[]): Promise<WorkerGauges>;
}

/**
 * A storage failure that is not the caller's fault (or only of what it sent): the database
 * layer raises it, the handlers map it to the spec's answer (handlers/index.ts `asSvcError`),
 * so the database layer never depends on the handlers.
 * - `unreachable`: no connection; nothing was sent (503 UNAVAILABLE)
 * - `lost`: the connection ended while a statement was in flight; a write may have been
 *   applied (503 UNAVAILABLE saying so)
 * - `timeout`: the request's database budget ran out (503 UNAVAILABLE)
 * - `data`: a value the database cannot store, e.g. a NUL character (400 MALFORMED)
 * - `schema`: tables missing (503 UNAVAILABLE); `reapplying` when this process was told to
 *   apply them again (a Node gateway), not when nothing will (Workers never migrate)
 */
/**
 * `busy`: the gateway refused the write before sending it, its write queue full (batch.ts,
 * --write-queue-max); nothing was sent, retrying is safe.
 */
export type StorageFaultKind = 'unreachable' | 'lost' | 'timeout' | 'data' | 'schema' | 'busy';

export class StorageFault extends Error {
  constructor(
    readonly kind: StorageFaultKind,
    override readonly cause?: unknown,
    /** `schema`: someone was told to apply the schema again (the gateway's onSchemaMissing). */
    readonly reapplying = false,
  ) {
    super(`database ${kind}: ${cause instanceof Error ? cause.message : String(cause ?? 'no detail')}`);
    this.name = 'StorageFault';
  }
}

/**
 * Positions in the class change log (migration 0007; issue 35 for Citus), pure helpers (here, the only db module handlers may import).
 *
 * A history row's `tx` is a transaction id of the node that wrote it: on plain PostgreSQL one
 * server, on Citus the worker holding the record's shard (its write functions are delegated
 * there). Transaction ids of different nodes are not comparable, so a position is a vector:
 * one `(tx, id)` per node group. The group of a row is its history id's high bits: Citus draws
 * a distributed table's identity on each node from that node's own range (`group << 48`), and
 * on plain PostgreSQL every id is below 2^48, so everything is group 0 and a position is the
 * single `(tx, id)` it always was. A group missing from a position means nothing of that
 * group has been read (below every row).
 */

/** One node group's part of a position: every change of that group at or below `(tx, id)` has been read. */
export interface NodePos {
  /** A transaction id (xid8) as decimal text (it can pass 2^53). */
  tx: string;
  id: number;
}

/** A position in the change log: per node group (decimal text), the last `(tx, id)` read. */
export type LogPosition = Readonly<Record<string, NodePos>>;

/** History ids of node group g start at g * 2^48 (Citus's per-node identity ranges). */
export const GROUP_SPAN = 2 ** 48;

/** A change's place in its node group's log. */
export interface GroupPos extends NodePos {
  group: string;
}

/** `(tx, id)` order within one group. */
export function compareNode(a: NodePos, b: NodePos): number {
  if (a.tx !== b.tx) {
    const ta = BigInt(a.tx);
    const tb = BigInt(b.tx);
    if (ta !== tb) return ta < tb ? -1 : 1;
  }
  return a.id - b.id;
}

/** Whether `pos` already holds the row at `(tx, id)` (read at or before it). */
export function covers(pos: LogPosition, row: GroupPos): boolean {
  const p = pos[row.group];
  return p !== undefined && compareNode(row, p) <= 0;
}

/** `pos` moved to the row at `(tx, id)` in its group (a new object). */
export function advance(pos: LogPosition, row: GroupPos): LogPosition {
  return { ...pos, [row.group]: { tx: row.tx, id: row.id } };
}

/** Whether `a` is past `b` in some group (a group missing counts as below everything). */
export function ahead(a: LogPosition, b: LogPosition): boolean {
  for (const g of Object.keys(a)) {
    const q = b[g];
    if (q === undefined || compareNode(a[g], q) > 0) return true;
  }
  return false;
}

/** The later of `a` and `b` in every group. */
export function join(a: LogPosition, b: LogPosition): LogPosition {
  if (!ahead(b, a)) return a;
  if (!ahead(a, b)) return b;
  const out: Record<string, NodePos> = { ...a };
  for (const g of Object.keys(b)) if (out[g] === undefined || compareNode(b[g], out[g]) > 0) out[g] = b[g];
  return out;
}

/** The groups of a position in a fixed order (numeric). */
export function groups(pos: LogPosition): string[] {
  return Object.keys(pos).sort((x, y) => Number(x) - Number(y));
}
/** One applied change, as the change log and a record's history give it. */
export interface ChangeRow extends WrittenRow {
  /** Log position; null on a row written before migration 0007 (per-record reads only). */
  tx: string | null;
  /** The history row's id (history `seq`). */
  id: number;
  /**
   * The node group whose transaction ids `tx` is in (the node that wrote the row; migration
   * 0027): '0' on plain PostgreSQL.
   */
  group: string;
  class: string;
  rid: string;
  field: string;
  op: string;
  version: number | null;
  record_version: number;
  /** Size for byte budgets (value, evidence, premises, invocation, overhead). */
  bytes: number;
}

/** What the watch streams read (issue 16): the class log and a record's applied history. */
export interface ChangeLog {
  /**
   * The log's frontier now: every change at or below it has finished (committed or rolled
   * back); later ones may still commit.
   */
  logHead(): Promise<LogPosition>;
  /**
   * Applied changes of `classes` after `after` (and at most `upTo`), in `(tx, id)` order,
   * only below the oldest transaction still running: at most `limit` rows, fewer when their
   * running size passes `maxBytes` (the first always). `frontier` is set when the read was
   * complete (no row left out by the limits): then no change of these classes can appear at
   * or below it later, and the reader may move there.
   */
  readLog(
    classes: string[],
    after: LogPosition,
    opts: { upTo: LogPosition | null; limit: number; maxBytes: number },
  ): Promise<{ rows: ChangeRow[]; frontier: LogPosition | null }>;
  /** Applied changes of one record with record_version above `afterRecordVersion`, in that order (rows of an expired record left out). */
  readRecordChanges(cls: string, rid: string, afterRecordVersion: number, opts: { limit: number; maxBytes: number }): Promise<ChangeRow[]>;
  /** The first change of the class created at or after `since` (database clock), or null. */
  firstChangeSince(cls: string, since: Date): Promise<{ pos: LogPosition; created_at: Date } | null>;
}
