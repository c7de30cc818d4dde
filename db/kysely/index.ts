/**
 * The database port over PostgreSQL with Kysely and pg. Data access is plain SQL through
 * Kysely's `sql` tag where one statement does several things (the write path), so each
 * applied write is: lock (one select), apply (one statement), commit.
 */
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import pgUtils from 'pg/lib/utils.js';
import type {
  ChangeLog,
  ChangeRow,
  LogPosition,
  QueryFilter,
  ReadRecordOptions,
  ClassRow,
  ClassUpsert,
  Db,
  EntryRow,
  FieldRow,
  HistoryInsert,
  HistoryMark,
  RecordRow,
  RoleSubjects,
  SweepDb,
  ClaimResult,
  ClaimWrite,
  WriteRequest,
  WriteResult,
} from '../port.js';
import { toStorageFault } from '../errors.js';
import * as sweepSql from './sweep.js';
import { notPurged } from './sweep.js';
import { NamedQuery, type NamedResult, type Shapes } from './named-query.js';

// int8 and numeric counters fit in a JS number for any realistic store (2^53).
const types = {
  getTypeParser(oid: number, format?: 'text' | 'binary') {
    if (oid === 20) return (v: string) => Number(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
};

export interface PgOptions {
  connectionString: string;
  max?: number;
  /**
   * Budget for one statement, a lock wait and a transaction left idle, enforced by the server
   * (statement_timeout, lock_timeout, idle_in_transaction_session_timeout) and, a second later,
   * by the client too: a frozen server never fires its own timeouts. Default 10 s.
   */
  timeoutMs?: number;
  /** Called when a statement finds the schema missing, so the runtime can re-apply it. */
  onSchemaMissing?: () => void;
  onPoolError?: (e: Error) => void;
  /** application_name of the sessions (at most 63 bytes). */
  applicationName?: string;
}

/**
 * Cancel the statements still running in this process's sessions (named `applicationName`),
 * from a connection of `pool`: a write cut off at shutdown must not commit afterwards.
 * Returns how many were cancelled.
 */
export async function cancelOwnStatements(pool: pg.Pool, applicationName: string): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `select count(*) filter (where pg_cancel_backend(pid)) as n from pg_stat_activity
      where application_name = $1 and pid <> pg_backend_pid() and state = 'active'`,
    [applicationName],
  );
  return Number(rows[0]?.n ?? 0);
}

/** How often a backend checks that its client is still connected (client_connection_check_interval). */
export const CLIENT_CHECK_MS = 1_000;

/** pg's client-side query timeout error (node_modules/pg/lib/client.js, `query_timeout`). */
export const CLIENT_TIMEOUT_MESSAGE = 'Query read timeout';

/**
 * pg's `query_timeout` answers the caller but leaves the timed-out query active on the
 * connection, so the next query would queue behind it. Such a client is ended here (pg ends
 * a client with an active query by destroying its socket, without an 'error' event), and the
 * pool drops an ending client when it is released instead of handing it out again.
 */
class TimeoutSafeClient extends pg.Client {
  constructor(config?: string | pg.ClientConfig) {
    super(config);
    // A checked-out client whose session the server ends (idle_in_transaction_session_timeout)
    // emits 'error' with no pool listener attached; the query in flight gets the error anyway,
    // so this listener only keeps the process from crashing.
    this.on('error', () => undefined);
  }

  override query(...args: unknown[]): any {
    const onTimeout = (e: unknown) => {
      if (e instanceof Error && e.message === CLIENT_TIMEOUT_MESSAGE) void this.end().catch(() => undefined);
    };
    const last = args[args.length - 1];
    if (typeof last === 'function') {
      args[args.length - 1] = (err: unknown, res: unknown) => {
        if (err) onTimeout(err);
        (last as (err: unknown, res: unknown) => void)(err, res);
      };
    }
    const out = (super.query as (...a: unknown[]) => unknown)(...args);
    if (out && typeof (out as Promise<unknown>).then === 'function') (out as Promise<unknown>).catch(onTimeout);
    return out;
  }
}

/**
 * The pool settings of `createPool` without the client class: also what the Workers adapter
 * gives `@neondatabase/serverless`'s pg-compatible Pool.
 */
export function poolConfig(opts: PgOptions): pg.PoolConfig {
  const timeoutMs = Math.max(1, Math.round(opts.timeoutMs ?? 10_000));
  return {
    connectionString: opts.connectionString,
    max: opts.max ?? 20,
    connectionTimeoutMillis: Math.min(5_000, timeoutMs),
    idleTimeoutMillis: 30_000,
    statement_timeout: timeoutMs,
    lock_timeout: timeoutMs,
    idle_in_transaction_session_timeout: timeoutMs,
    // After the server's own timeouts, so a live server answers 57014/55P03 first.
    query_timeout: timeoutMs + 1_000,
    // Names the process's sessions in pg_stat_activity (and lets it cancel its own on exit).
    ...(opts.applicationName ? { application_name: opts.applicationName } : {}),
    types,
  };
}

export function createPool(opts: PgOptions): pg.Pool {
  const pool = new pg.Pool({
    ...poolConfig(opts),
    Client: TimeoutSafeClient,
    // A write is one autocommitted statement (kslate_write, kslate_claim): were the connection lost
    // while the statement waits for a row lock (the process killed, the client ended after a
    // client-side timeout), the server would still commit it when the lock comes, unseen.
    // With this (PostgreSQL 14+) the backend checks its client every second while it runs or
    // waits and aborts the statement once the client is gone. A startup parameter, like the
    // timeouts, so it costs no round trip.
    options: `-c client_connection_check_interval=${CLIENT_CHECK_MS}`,
  });
  // An idle client losing its server emits 'error' on the pool; without a listener Node
  // would crash. The pool replaces the client on next use, which is how we recover.
  pool.on('error', (e) => opts.onPoolError?.(e));
  return pool;
}

/**
 * A named statement on a node-postgres pool made by createPool (its type parsers), described
 * on its first run only (named-query.ts). The name must always go with the same text.
 */
export function runNamed<R>(pool: pg.Pool, name: string, text: string, values: unknown[]): Promise<NamedResult<R>> {
  return pool.query(namedQuery<R>(pool, name, text, values) as never) as Promise<NamedResult<R>>;
}

/**
 * The query runNamed sends, for a client of `pool`. Descriptions are kept per pool: one pool
 * is one database, and two databases may answer one statement text with different columns.
 */
export function namedQuery<R>(pool: pg.Pool, name: string, text: string, values: unknown[]): NamedQuery<R> {
  let shapes = shapesByPool.get(pool);
  if (shapes === undefined) shapesByPool.set(pool, (shapes = new Map()));
  return new NamedQuery<R>(name, text, values, shapes, types, pgUtils.prepareValue);
}
const shapesByPool = new WeakMap<pg.Pool, Shapes>();

const j = (v: unknown) => (v === undefined ? null : JSON.stringify(v));

/** The claim of migration 0006, named. */
export const CLAIM = {
  name: 'kslate_claim',
  text: 'select outcome, version, record_version, created, owner, lease_expires_ms, took_over_from from kslate_claim($1, $2, $3, $4, $5, $6, $7)',
};

/** The put and append of migration 0010, named: decided and applied, or refused, in one statement. */
export const WRITE = {
  name: 'kslate_write',
  text: 'select outcome, version, record_version, created, cur_author, cur_value, cur_evidence, cur_updated_ms, moved, missing from kslate_write($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text[], $9, $10, $11, $12, $13, $14, $15)',
};

function mapField(r: Record<string, unknown>): FieldRow {
  return {
    name: r.name as string,
    kind: r.kind as string,
    value: r.value,
    version: Number(r.version),
    record_version: Number(r.record_version),
    author: (r.author as string) ?? null,
    identity_strength: (r.identity_strength as string) ?? null,
    evidence: (r.evidence as string) ?? null,
    based_on: (r.based_on as FieldRow['based_on']) ?? null,
    invocation: (r.invocation as FieldRow['invocation']) ?? null,
    updated_at: r.updated_at as Date,
    owner: (r.owner as string) ?? null,
    lease_expires_at: (r.lease_expires_at as Date) ?? null,
    lease_held: Boolean(r.lease_held),
    lease_lapsed: Boolean(r.lease_lapsed),
    ...(r.sz !== undefined ? { bytes: Number(r.sz) } : {}),
    ...(r.omitted ? { omitted: true } : {}),
  };
}

/** A timestamp as whole epoch milliseconds (truncated, as the driver's Date parsing does). */
const epochMs = (col: ReturnType<typeof sql>) => sql`floor(extract(epoch from ${col}) * 1000)::bigint`;

/** One field of readRecord's packed array (the order of its json_build_array). */
function unpackField(a: unknown[]): FieldRow {
  return {
    name: a[0] as string,
    kind: a[1] as string,
    value: a[2],
    version: a[3] as number,
    record_version: a[4] as number,
    author: (a[5] as string) ?? null,
    identity_strength: (a[6] as string) ?? null,
    evidence: (a[7] as string) ?? null,
    based_on: (a[8] as FieldRow['based_on']) ?? null,
    invocation: (a[9] as FieldRow['invocation']) ?? null,
    updated_at: new Date(a[10] as number),
    owner: (a[11] as string) ?? null,
    lease_expires_at: a[12] === null ? null : new Date(a[12] as number),
    lease_held: Boolean(a[14]),
    lease_lapsed: Boolean(a[13]),
    bytes: a[15] as number,
  };
}

/** The columns mapField reads; `value` is an expression so a budgeted read can leave it out. */
function fieldColumns(value: ReturnType<typeof sql> = sql`f.value`) {
  return sql`f.name, f.kind, ${value} as value, f.version, f.record_version, f.author, f.identity_strength, f.evidence,
   f.based_on, f.invocation, f.updated_at, f.owner, f.lease_expires_at, f.lease_lapsed,
   kslate_lease_held(f.owner, f.lease_expires_at, now()) as lease_held`;
}

/** What a rendered row costs beyond its texts (keys, author, timestamps): a byte budget also bounds row counts. */
export const ROW_OVERHEAD_BYTES = 256;

// A row's size for byte budgets: `bytes` (migration 0003); for rows written before it, the
// stored size of its value and evidence (pg_column_size: no de-TOASTing or conversion, so
// cheap, but a compressed value counts at its compressed size).
const rowBytes = (a: string) =>
  sql.raw(
    `coalesce(${a}bytes, coalesce(pg_column_size(${a}value), 0) + coalesce(pg_column_size(${a}evidence), 0)) + ${ROW_OVERHEAD_BYTES}`,
  );
const HISTORY_BYTES = rowBytes('h.');
/** About how many bytes of history rows one text of a page holds (readHistory). */
const HISTORY_RUN_BYTES = 32 * 1024;
const FIELD_BYTES = rowBytes('f.');
const ENTRY_BYTES = rowBytes('e.');

/**
 * The get statements' field rows: the record's fields, or the named ones (the name filter is
 * explained in readRecord).
 */
const recordFields = (names: string[] | null) =>
  names ? sql`f.record_id = r.id and array_position(${names}::text[], f.name) is not null` : sql`f.record_id = r.id`;

export class PgDb implements Db, SweepDb, ChangeLog {
  readonly kysely: Kysely<any>;

  constructor(
    readonly pool: pg.Pool,
    private readonly onSchemaMissing?: () => void,
  ) {
    this.kysely = new Kysely<any>({ dialect: new PostgresDialect({ pool }) });
    this.describeOnce = pool instanceof pg.Pool;
  }

  /** Whether the pool is node-postgres's own (NamedQuery needs its connection). */
  private readonly describeOnce: boolean;

  /**
   * Run a hot statement as a named prepared statement: parsed and planned once per
   * connection, then only bound and executed (Kysely sends every statement unnamed). The
   * name must always go with the same text, so it names one statement shape.
   */
  private async named<R>(name: string, values: unknown[], build: () => ReturnType<typeof sql>): Promise<{ rows: R[] }> {
    let text = this.texts.get(name);
    if (text === undefined) {
      // Compiled once per name; the values given must be the template's parameters, in order.
      const c = build().compile(this.kysely);
      if (c.parameters.length !== values.length || c.parameters.some((p, i) => p !== values[i])) {
        throw new Error(`statement ${name}: the values given are not the template's parameters`);
      }
      text = c.sql;
      this.texts.set(name, text);
    }
    return this.exec<R>(name, text, values);
  }

  /**
   * A named statement: through NamedQuery (described on its first run only) on a node-postgres
   * pool; as a plain named query on any other pg-compatible pool (the Workers adapter's).
   */
  private exec<R>(name: string, text: string, values: unknown[]): Promise<{ rows: R[] }> {
    if (!this.describeOnce) return this.pool.query<R & pg.QueryResultRow>({ name, text, values });
    return runNamed<R>(this.pool, name, text, values);
  }


  /** SQL text of the named statements, by name. */
  private readonly texts = new Map<string, string>();

  /** Every port call goes through here: driver faults become a StorageFault (the handlers answer 503 UNAVAILABLE). */
  private async guard<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      throw toStorageFault(e, this.onSchemaMissing);
    }
  }

  readRecord(cls: string, rid: string, opts: ReadRecordOptions) {
    return this.guard(async () => {
      if (opts.rendered && opts.fields) {
        const row = await this.readRecordRendered(cls, rid, opts.fields, opts.maxBytes);
        // null: no such record; false: the fields need the rows (below).
        if (row !== false) return row;
      }
      const names = opts.fields;
      // One statement: the record and its fields (a row per field, or one row with null
      // field columns). Values come along only when all the fields fit the budget (nearly
      // always: a window over the whole set costs next to nothing). Otherwise fields are kept
      // in name order while their running size stays within maxBytes (the first always) and
      // only the kept ones' values are read, in a second statement; the rest come back `omitted`.
      // The fields come as ONE json text (an array of arrays, times as epoch milliseconds),
      // parsed once: the driver's per-row, per-column parsing (and its timestamp parser) cost
      // more than the read itself.
      // The name filter is `array_position(...) is not null`, not `name = any(...)`: with
      // `= any($2)` PostgreSQL 18 estimates the generic plan (unknown array) above the custom
      // one once the fields table is large and skewed, so the plan cache re-planned this named
      // statement on every execution (0.27 ms of PostgreSQL CPU per get against 0.12 ms with
      // the generic plan; docs/performance.md). A filter no estimate depends on costs the
      // same in both plans, so the generic plan is kept; the index scan is on record_id alone
      // and a record has few field rows.
      const res = await this.named<{ rec_id: number; rec_version: number; rec_created: number; fields: string }>(
        names ? 'kslate_read_record_some' : 'kslate_read_record',
        names ? [opts.maxBytes, names, cls, rid] : [opts.maxBytes, cls, rid],
        () => sql`
        select r.id as rec_id, r.record_version as rec_version, ${epochMs(sql`r.created_at`)} as rec_created,
          (select coalesce(json_agg(json_build_array(
              x.name, x.kind, case when x.fits then x.value end, x.version, x.record_version, x.author, x.identity_strength,
              x.evidence, x.based_on, x.invocation, ${epochMs(sql`x.updated_at`)}, x.owner, ${epochMs(sql`x.lease_expires_at`)},
              x.lease_lapsed, kslate_lease_held(x.owner, x.lease_expires_at, now()), x.sz, x.fits) order by x.name), '[]')::text
           from (select f.*, ${FIELD_BYTES} as sz, sum(${FIELD_BYTES}) over () <= ${opts.maxBytes} as fits
                 from fields f
                 where ${recordFields(names)}) x) as fields
        from records r
        where r.class = ${cls} and r.rid = ${rid}`,
      );
      const r = res.rows[0];
      if (!r) return null;
      const id = Number(r.rec_id);
      const packed = JSON.parse(r.fields) as unknown[][];
      const fields = packed.map(unpackField);
      if (packed.length > 0 && !packed[0][16]) {
        let running = 0;
        const kept: string[] = [];
        for (const f of fields) {
          running += f.bytes ?? 0;
          if (kept.length > 0 && running > opts.maxBytes) f.omitted = true;
          else kept.push(f.name);
        }
        const values = await sql<{ name: string; value: unknown }>`
          select name, value from fields where record_id = ${id} and name = any(${kept}::text[])`.execute(this.kysely);
        const byName = new Map(values.rows.map((v) => [v.name, v.value]));
        for (const f of fields) if (!f.omitted) f.value = byName.get(f.name) ?? null;
      }
      let spent = 0;
      for (const f of fields) if (!f.omitted) spent += f.bytes ?? 0;
      const appendFields = fields.filter((f) => f.kind === 'append' && !f.omitted);
      if (appendFields.length > 0) {
        const entries = await readEntries(this.kysely, id, appendFields.map((f) => f.name), {
          limit: opts.entriesLimit,
          beforeSeq: opts.entriesBeforeSeq,
          maxBytes: Math.max(0, opts.maxBytes - spent),
        });
        for (const f of appendFields) {
          const list = entries.get(f.name) ?? [];
          f.entries = list;
          // Seqs run 1..version without gaps, so what the read could have returned is known.
          const below = opts.entriesBeforeSeq === null ? f.version : Math.min(f.version, opts.entriesBeforeSeq - 1);
          const wanted = opts.entriesLimit === null ? below : Math.min(opts.entriesLimit, below);
          f.entries_more = list.length < wanted;
        }
      }
      const out: RecordRow = {
        id,
        class: cls,
        rid,
        record_version: Number(r.rec_version),
        created_at: new Date(Number(r.rec_created)),
        fields,
      };
      return out;
    });
  }

  /**
   * readRecord with `rendered` (ReadRecordOptions): the API's `fields` object as one JSON text
   * built by PostgreSQL (handlers/pipeline.ts renderField, for a reader who may read every
   * field, in UTC), the record's row and that text in one statement. A value is its stored
   * JSON text. false when the text cannot stand for the rows: the fields do not all fit
   * `maxBytes`, or one holds an append (entries), or `based_on` or `invocation` is not of the
   * shape the gateway writes (then renderField decides). One named statement per shape.
   * Whether all fit is a sum beside the string_agg, not readRecord's window (which marks each
   * row): the window's materialised pass cost ~10% of the statement's PostgreSQL CPU.
   */
  private async readRecordRendered(cls: string, rid: string, names: string[], maxBytes: number): Promise<RecordRow | null | false> {
    const utc = (col: string) =>
      sql.raw(`to_char(${col} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS')`);
    const res = await this.named<{ rec_id: number; rec_version: number; rec_created: number; fields: string | null }>(
      'kslate_read_record_rendered',
      [maxBytes, names, cls, rid],
      () => sql`
        select r.id as rec_id, r.record_version as rec_version, ${epochMs(sql`r.created_at`)} as rec_created,
          (select case when coalesce(bool_and(x.plain) and sum(x.sz) <= ${maxBytes}, true) then
              '{' || coalesce(string_agg(to_json(x.name)::text || ':{'
                || case when x.kind <> 'task' then '"value":' || coalesce(x.value::text, 'null') || ',' else '' end
                || '"version":' || x.version
                || case when x.author <> '' then ',"author":' || to_json(x.author)::text else '' end
                || case when x.identity_strength <> '' then ',"identity_strength":' || to_json(x.identity_strength)::text else '' end
                || coalesce(',"evidence":' || to_json(x.evidence)::text, '')
                || case when jsonb_typeof(x.based_on) = 'array' then ',"based_on":' || x.based_on::text else '' end
                || case when json_typeof(x.invocation) in ('object', 'array') then ',"invocation":' || x.invocation::text else '' end
                || ',"updated_at":"' || ${utc('x.updated_at')} || '+00:00"'
                || case when x.kind = 'task' and x.owner <> '' and x.held
                     then ',"owner":' || to_json(x.owner)::text
                       || coalesce(',"lease_expires_at":"' || ${utc('x.lease_expires_at')} || '+00:00"', '')
                     else '' end
                || case when x.kind = 'task' and (x.lease_lapsed or (x.owner <> '' and not x.held)) then ',"lease_lapsed":true' else '' end
                || '}', ',' order by x.name), '') || '}'
            end
           from (select f.*, kslate_lease_held(f.owner, f.lease_expires_at, now()) as held,
                   f.kind <> 'append'
                     and (f.based_on is null or jsonb_typeof(f.based_on) in ('array', 'null'))
                     and (f.invocation is null or json_typeof(f.invocation) in ('object', 'array', 'null')) as plain,
                   ${FIELD_BYTES} as sz
                 from fields f
                 where ${recordFields(names)}) x) as fields
        from records r
        where r.class = ${cls} and r.rid = ${rid}`,
    );
    const r = res.rows[0];
    if (!r) return null;
    if (r.fields === null) return false;
    return {
      id: Number(r.rec_id),
      class: cls,
      rid,
      record_version: Number(r.rec_version),
      created_at: new Date(Number(r.rec_created)),
      fields: [],
      fieldsText: r.fields,
    };
  }

  readHistory(cls: string, rid: string, opts: { fields: string[] | null; beforeSeq: number | null; limit: number; maxBytes: number; mark: HistoryMark }) {
    return this.guard(async () => {
      const { fields, beforeSeq, limit, maxBytes, mark } = opts;
      // One field uses history_record_field; otherwise history_record, filtering rows.
      // The page (limit + 1 rows, to see whether more remain) keeps the newest rows whose
      // running size stays within maxBytes (the first row always, so a page always
      // advances); the others pass the window with their values still TOASTed and are not
      // aggregated. Each row comes as the JSON it was rendered to when written (`rendered`,
      // migration 0008) and the page as ONE text (HistoryPage.rows), which the reader sends
      // as it is unless it asked for rows marked: rendering the columns at read time cost ~8
      // ms of CPU per 1,000 rows, and building 1,000 row objects in the driver ~3x a single
      // text. Rows older than 0008 are rendered here by the same function, in a subquery that
      // runs only for them (a whole-row reference in the scan itself cost ~0.3 ms a page).
      // Rows of an expired record's earlier life (notPurged) are left out after the LIMIT, not
      // inside it: they are that record's oldest rows (every id at most the purge mark), so the
      // newest rows past them are the same, and as a condition on `id` inside, where its value
      // is unknown when planning, it made the primary key look cheaper than the record's index:
      // a backward scan of every newer row of the whole table, filtered by record (after the
      // bench's puts, 180,000 rows skipped per page: 38 ms of PostgreSQL CPU instead of 4).
      // The record's key reaches the page through a LATERAL over `k` (`offset 0` keeps it from
      // being folded into constants): planned with the record's value known, a record holding
      // a tenth of the table looked dense enough for that same backward walk (with wider rows
      // it won on PostgreSQL 15 and 18 alike); as an outer reference it is estimated as an
      // average record, for which only the record's index makes sense.
      const marked =
        mark === 'all' ? sql`chr(30) || doc || chr(31)` : mark === 'premises' ? sql`case when based_on is null then doc else chr(30) || doc || chr(31) end` : sql`doc`;
      // A named statement per shape (fields, cursor, marks): planning this one cost ~0.4 ms
      // of PostgreSQL CPU per page, a third of its execution.
      const shape = `${fields === null ? 'all' : fields.length === 1 ? 'one' : 'some'}_${beforeSeq === null ? 'first' : 'before'}_${mark}`;
      // The page comes in runs of rows of about HISTORY_RUN_BYTES each, not as one text: a
      // string over ~128 KB is a large object to V8, and a page's worth of them per request
      // drove a mark-compact every ~30 pages under the chart's heap cap (2x the CPU per page).
      const q = sql<{ n: string; kept: string; last: string | null; rows: string | null }>`
        select count(*) as n, count(*) filter (where keep) as kept, min(id) filter (where keep) as last,
               string_agg(${marked}, ',' order by id desc) filter (where keep) as rows
        from (
          select page.*, n <= ${limit} and (running <= ${maxBytes} or n = 1) as keep
          from (
            select page.*, sum(page.sz) over w as running, row_number() over w as n
            from (select ${cls}::text as class, ${rid}::text as rid offset 0) k
            cross join lateral (
              select h.id, h.based_on,
                     coalesce(h.rendered, (select kslate_history_text(o) from history o where o.id = h.id)) as doc,
                     ${HISTORY_BYTES} as sz
              from history h
              where h.class = k.class and h.rid = k.rid
                ${fields && fields.length === 1 ? sql`and h.field = ${fields[0]}` : sql``}
                ${fields && fields.length !== 1 ? sql`and h.field = any(${fields}::text[])` : sql``}
                ${beforeSeq !== null ? sql`and h.id < ${beforeSeq}` : sql``}
              order by h.id desc
              limit ${limit + 1}) page
            where ${notPurged(cls, rid, sql`page.id`)}
            window w as (order by page.id desc)) page) x
        group by (running - sz) / ${sql.lit(HISTORY_RUN_BYTES)}
        order by (running - sz) / ${sql.lit(HISTORY_RUN_BYTES)}`.compile(this.kysely);
      const res = await this.exec<{ n: string; kept: string; last: string | null; rows: string | null }>(
        `kslate_history_${shape}`,
        q.sql,
        q.parameters as unknown[],
      );
      let n = 0;
      let count = 0;
      let lastSeq: number | null = null;
      const runs: string[] = [];
      for (const r of res.rows) {
        n += Number(r.n);
        count += Number(r.kept);
        if (r.last !== null) lastSeq = lastSeq === null ? Number(r.last) : Math.min(lastSeq, Number(r.last));
        if (r.rows !== null && r.rows !== '') runs.push(r.rows);
      }
      return { runs, count, lastSeq, more: n > count };
    });
  }

  recordOrHistoryExists(cls: string, rid: string) {
    return this.guard(async () => {
      const res = await sql<{ e: boolean }>`
        select exists (select 1 from records where class = ${cls} and rid = ${rid})
            or exists (select 1 from history h where h.class = ${cls} and h.rid = ${rid} and ${notPurged(cls, rid, sql`h.id`)}) as e`.execute(this.kysely);
      return Boolean(res.rows[0]?.e);
    });
  }

  insertRejection(row: HistoryInsert) {
    return this.guard(async () => {
      await insertRejection(this.kysely, row);
    });
  }

  writeField(w: WriteRequest) {
    return this.guard(async () => {
      const res = await this.exec<WriteRow>(WRITE.name, WRITE.text, [
        w.class,
        w.rid,
        w.field,
        w.kind,
        w.op,
        w.expectVersion,
        w.premises.length > 0 ? JSON.stringify(w.premises) : null,
        w.requiredCheckpoints,
        w.author,
        w.identity_strength,
        j(w.value),
        w.evidence,
        j(w.based_on),
        j(w.invocation),
        w.expected_version,
      ]);
      return writeResult(res.rows[0]);
    });
  }

  saveCheckpoint(cls: string, rid: string, role: string, document: Record<string, unknown>, author: string) {
    return this.guard(async () => {
      const res = await sql<{ checkpoint_id: number; record_version: number }>`
        select checkpoint_id, record_version from kslate_save_checkpoint(${cls}, ${rid}, ${role}, ${j(document)}, ${author})`.execute(this.kysely);
      const r = res.rows[0];
      return r ? { checkpoint_id: Number(r.checkpoint_id), record_version: Number(r.record_version) } : null;
    });
  }

  claim(c: ClaimWrite) {
    return this.guard(async () => {
      const res = await this.exec<Record<string, unknown>>(CLAIM.name, CLAIM.text, [
        c.class,
        c.rid,
        c.field,
        c.author,
        c.identity_strength,
        c.lease_seconds,
        j(c.invocation),
      ]);
      const r = res.rows[0];
      const out: ClaimResult = {
        outcome: r.outcome as ClaimResult['outcome'],
        version: Number(r.version),
        record_version: r.record_version === null ? null : Number(r.record_version),
        created: Boolean(r.created),
        owner: (r.owner as string) ?? null,
        lease_expires_at: r.lease_expires_ms === null ? null : new Date(Number(r.lease_expires_ms)),
        took_over_from: (r.took_over_from as string) ?? null,
      };
      return out;
    });
  }

  listClasses() {
    return this.guard(async () => {
      const res = await sql<ClassRow>`select name, namespace, spec, gone, status, updated_at from classes order by name`.execute(
        this.kysely,
      );
      return res.rows;
    });
  }

  applyClasses(live: ClassUpsert[], refused: { name: string; reason: string }[], markGone: boolean) {
    return this.guard(() =>
      this.kysely.transaction().execute(async (trx) => {
        for (const c of live) {
          await sql`
            insert into classes (name, namespace, spec, gone, status, updated_at)
            values (${c.name}, ${c.namespace}, ${j(c.spec)}::json, false, null, now())
            on conflict (name) do update
              set namespace = excluded.namespace, spec = excluded.spec, gone = false, status = null,
                  updated_at = now()
              where classes.spec::text is distinct from excluded.spec::text or classes.gone
                 or classes.namespace <> excluded.namespace or classes.status is not null`.execute(trx);
        }
        for (const r of refused) {
          await sql`update classes set status = ${j({ refused: r.reason })}::jsonb
                    where name = ${r.name} and status is distinct from ${j({ refused: r.reason })}::jsonb`.execute(trx);
        }
        if (markGone) {
          const keep = [...live.map((c) => c.name), ...refused.map((r) => r.name)];
          await sql`update classes set gone = true, updated_at = now()
                    where not gone and not (name = any(${keep}::text[]))`.execute(trx);
        }
      }),
    );
  }

  acquireLease(name: string, holder: string, ttlSeconds: number) {
    return this.guard(() => sweepSql.acquireLease(this.kysely, name, holder, ttlSeconds));
  }

  releaseLease(name: string, holder: string) {
    return this.guard(() => sweepSql.releaseLease(this.kysely, name, holder));
  }

  expireRecords(cls: string, ttlSeconds: number, limit: number) {
    return this.guard(() => sweepSql.expireRecords(this.kysely, cls, ttlSeconds, limit));
  }

  purgeExpired(limit: number) {
    return this.guard(() => sweepSql.purgeExpired(this.kysely, limit));
  }

  flagLapsedLeases(limit: number) {
    return this.guard(() => sweepSql.flagLapsedLeases(this.kysely, limit));
  }

  gauges(classes: string[], roles: RoleSubjects[]) {
    return this.guard(() => sweepSql.gauges(this.kysely, classes, roles));
  }

  loadCheckpoint(cls: string, rid: string, role: string) {
    return this.guard(async () => {
      const rec = await sql<Record<string, unknown>>`
        select r.id, r.record_version, c.checkpoint_id, c.document, c.record_version as cp_version
        from records r left join checkpoints c on c.record_id = r.id and c.role = ${role}
        where r.class = ${cls} and r.rid = ${rid}`.execute(this.kysely);
      const r = rec.rows[0];
      if (!r) return null;
      const fields = await sql<Record<string, unknown>>`
        select ${fieldColumns(sql`null::json`)} from fields f where f.record_id = ${Number(r.id)} order by f.name`.execute(this.kysely);
      return {
        record_version: Number(r.record_version),
        checkpoint:
          r.checkpoint_id === null
            ? null
            : {
                checkpoint_id: Number(r.checkpoint_id),
                document: r.document as Record<string, unknown>,
                record_version: Number(r.cp_version),
              },
        fields: fields.rows.map(mapField),
      };
    });
  }

  queryRecords(cls: string, filters: QueryFilter[], opts: { afterId: number; limit: number; fields: string[]; maxBytes: number }) {
    return this.guard(async () => {
      const shown = opts.fields;
      // limit + 1 matches, to see whether more remain.
      const res = await queryRecordsStatement(cls, filters, { afterId: opts.afterId, limit: opts.limit + 1 }).execute(this.kysely);
      let page = res.rows.slice(0, opts.limit);
      if (page.length === 0 || shown.length === 0) {
        return { rows: page.map((r) => ({ id: Number(r.id), rid: r.rid as string, record_version: Number(r.record_version), fields: [] })), more: res.rows.length > page.length };
      }
      // Nearly always the whole page fits the byte budget: its fields (and latest entries)
      // come with their values in one statement each, which say whether they all fit.
      let read = await this.pageFields(page.map((r) => Number(r.id)), shown, opts.maxBytes);
      if (!read) {
        // It does not: measure each record (its shown fields and, for append fields, the
        // latest entry, what query shows of them) and keep records while the running size
        // stays within the budget, the first always; then read just those.
        const ids = page.map((r) => Number(r.id));
        const sizes = await sql<{ id: number; sz: number }>`
          select k.id, coalesce((
            select sum(${FIELD_BYTES} + case when f.kind = 'append' then coalesce((
                     select ${ENTRY_BYTES} from entries e where e.record_id = f.record_id and e.field = f.name
                     order by e.seq desc limit 1), 0) else 0 end)
            from fields f where f.record_id = k.id and f.name = any(${shown}::text[])), 0) as sz
          from unnest(${ids}::bigint[]) as k(id)`.execute(this.kysely);
        const size = new Map(sizes.rows.map((r) => [Number(r.id), Number(r.sz)]));
        let running = 0;
        const kept: Record<string, unknown>[] = [];
        for (const r of page) {
          running += (size.get(Number(r.id)) ?? 0) + ROW_OVERHEAD_BYTES;
          if (kept.length > 0 && running > opts.maxBytes) break;
          kept.push(r);
        }
        page = kept;
        read = (await this.pageFields(page.map((r) => Number(r.id)), shown, Number.MAX_SAFE_INTEGER))!;
      }
      const rows = page.map((r) => ({
        id: Number(r.id),
        rid: r.rid as string,
        record_version: Number(r.record_version),
        fields: read!.get(Number(r.id)) ?? [],
      }));
      return { rows, more: res.rows.length > page.length };
    });
  }

  /**
   * The shown fields of a page of records (append fields with their latest entry), or null
   * when they do not all fit `maxBytes`; then no value was read.
   */
  private async pageFields(ids: number[], shown: string[], maxBytes: number): Promise<Map<number, FieldRow[]> | null> {
    const total = sql`sum(${FIELD_BYTES}) over ()`;
    const fieldRows = await sql<Record<string, unknown>>`
      select f.record_id, ${fieldColumns(sql`case when ${total} <= ${maxBytes} then f.value end`)}, ${total} as total
      from fields f
      where f.record_id = any(${ids}::bigint[]) and f.name = any(${shown}::text[])
      order by f.record_id, f.name`.execute(this.kysely);
    const spent = fieldRows.rows.length > 0 ? Number(fieldRows.rows[0].total) + ids.length * ROW_OVERHEAD_BYTES : 0;
    if (spent > maxBytes) return null;
    const byRecord = new Map<number, FieldRow[]>();
    const appendNames = new Set<string>();
    for (const row of fieldRows.rows) {
      const f = mapField(row);
      if (f.kind === 'append') appendNames.add(f.name);
      const list = byRecord.get(Number(row.record_id)) ?? [];
      list.push(f);
      byRecord.set(Number(row.record_id), list);
    }
    if (appendNames.size > 0) {
      const latest = await latestEntries(this.kysely, ids, [...appendNames], maxBytes - spent);
      if (!latest) return null;
      for (const [id, list] of byRecord) {
        for (const f of list) if (f.kind === 'append') f.entries = latest.get(`${id}:${f.name}`) ?? [];
      }
    }
    return byRecord;
  }

  claimScope(scope: string, author: string, windowSeconds: number) {
    return this.guard(async () => {
      // Take the scope when it is free, ours, or idle past the window; otherwise leave it be.
      const res = await sql<{ author: string }>`
        insert into scope_owners as s (scope, author, last_used_at) values (${scope}, ${author}, now())
        on conflict (scope) do update set author = excluded.author, last_used_at = now()
          where s.author = excluded.author or s.last_used_at < now() - make_interval(secs => ${windowSeconds})
        returning author`.execute(this.kysely);
      if (res.rows[0]) return res.rows[0].author;
      const cur = await sql<{ author: string }>`select author from scope_owners where scope = ${scope}`.execute(this.kysely);
      return cur.rows[0]?.author ?? author;
    });
  }

  recordReads(author: string, scope: string, cls: string, reads: { rid: string; field: string; version: number }[]) {
    return this.guard(async () => {
      await sql`
        insert into read_sets (author, scope, class, rid, field, version, read_at)
        select ${author}, ${scope}, ${cls}, t.rid, t.field, t.version, now()
        from unnest(${reads.map((r) => r.rid)}::text[], ${reads.map((r) => r.field)}::text[], ${reads.map((r) => r.version)}::bigint[])
          as t(rid, field, version)
        on conflict (author, scope, class, rid, field)
          do update set version = excluded.version, read_at = excluded.read_at`.execute(this.kysely);
    });
  }

  pruneReadSets(windowSeconds: number) {
    return this.guard(async () => {
      const a = await sql`delete from read_sets where read_at < now() - make_interval(secs => ${windowSeconds})`.execute(this.kysely);
      const b = await sql`delete from scope_owners where last_used_at < now() - make_interval(secs => ${windowSeconds})`.execute(
        this.kysely,
      );
      return Number(a.numAffectedRows ?? 0) + Number(b.numAffectedRows ?? 0);
    });
  }

  readSet(author: string, scope: string, cls: string, rid: string, windowSeconds: number) {
    return this.guard(async () => {
      const res = await sql<{ field: string; version: number }>`
        select field, version from read_sets
        where author = ${author} and scope = ${scope} and class = ${cls} and rid = ${rid}
          and read_at > now() - make_interval(secs => ${windowSeconds})`.execute(this.kysely);
      return res.rows.map((r) => ({ field: r.field, version: Number(r.version) }));
    });
  }

  // ---- the change log (migration 0007, issue 16) ----------------------------------------

  logHead() {
    return this.guard(async () => {
      // Every transaction below the oldest one running has finished: the frontier is just
      // under it, past any id (no row of that transaction can come after it).
      const res = await sql<{ tx: string }>`
        select (pg_snapshot_xmin(pg_current_snapshot())::text::numeric - 1)::text as tx`.execute(this.kysely);
      const pos: LogPosition = { tx: res.rows[0].tx, id: Number.MAX_SAFE_INTEGER };
      return pos;
    });
  }

  readLog(classes: string[], after: LogPosition, opts: { upTo: LogPosition | null; limit: number; maxBytes: number }) {
    return this.guard(async () => {
      const upTo = opts.upTo ? sql`and (h.tx, h.id) <= (${opts.upTo.tx}::xid8, ${opts.upTo.id}::bigint)` : sql``;
      // One index range of history_log per class, merged in (tx, id) order; only rows of
      // transactions below the oldest one still running (they can no longer change). One
      // statement, so one snapshot: the frontier and the rows agree.
      const res = await sql<Record<string, unknown>>`
        select s.frontier, x.* from (
          select (pg_snapshot_xmin(pg_current_snapshot())::text::numeric - 1)::text as frontier,
                 pg_snapshot_xmin(pg_current_snapshot()) as xmin) s
        left join lateral (
          select y.*, sum(y.sz) over w as running, row_number() over w as rn, count(*) over () as candidates
          from (
            select ${CHANGE_COLUMNS}, h.tx as tx_order
            from unnest(${classes}::text[]) as c(name)
            cross join lateral (
              select h.* from history h
              where h.class = c.name and h.outcome = 'applied'
                and (h.tx, h.id) > (${after.tx}::xid8, ${after.id}::bigint) ${upTo}
                and h.tx < s.xmin
              order by h.tx, h.id
              limit ${opts.limit}) h
            order by h.tx, h.id
            limit ${opts.limit}) y
          window w as (order by y.tx_order, y.id)) x on true
        where x.id is null or x.running <= ${opts.maxBytes} or x.rn = 1
        order by x.tx_order, x.id`.execute(this.kysely);
      const rows = res.rows.filter((r) => r.id !== null).map(mapChange);
      const candidates = rows.length > 0 ? Number(res.rows[0].candidates) : 0;
      const complete = candidates < opts.limit && rows.length === candidates;
      const frontier: LogPosition | null = complete ? { tx: res.rows[0].frontier as string, id: Number.MAX_SAFE_INTEGER } : null;
      return { rows, frontier };
    });
  }

  readRecordChanges(cls: string, rid: string, afterRecordVersion: number, opts: { limit: number; maxBytes: number }) {
    return this.guard(async () => {
      const res = await sql<Record<string, unknown>>`
        select x.* from (
          select y.*, sum(y.sz) over w as running, row_number() over w as rn
          from (
            select ${CHANGE_COLUMNS}
            from history h
            where h.class = ${cls} and h.rid = ${rid} and h.outcome = 'applied'
              and h.record_version > ${afterRecordVersion} and ${notPurged(cls, rid, sql`h.id`)}
            order by h.record_version
            limit ${opts.limit}) y
          window w as (order by y.record_version)) x
        where x.running <= ${opts.maxBytes} or x.rn = 1
        order by x.record_version`.execute(this.kysely);
      return res.rows.map(mapChange);
    });
  }

  firstChangeSince(cls: string, since: Date) {
    return this.guard(async () => {
      const res = await sql<{ tx: string; id: number; created_at: Date }>`
        select h.tx::text as tx, h.id, h.created_at from history h
        where h.class = ${cls} and h.outcome = 'applied' and h.tx is not null and h.created_at >= ${since}
        order by h.tx, h.id limit 1`.execute(this.kysely);
      const r = res.rows[0];
      return r ? { pos: { tx: r.tx, id: Number(r.id) }, created_at: r.created_at } : null;
    });
  }

  meta(key: string) {
    return this.guard(async () => {
      const res = await sql<{ value: string }>`select value from kslate_meta where key = ${key}`.execute(this.kysely);
      return res.rows[0]?.value ?? null;
    });
  }
}

/** The columns of a ChangeRow (mapChange), from history `h`. */
const CHANGE_COLUMNS = sql`h.tx::text as tx, h.id, h.class, h.rid, h.field, h.op, h.version, h.record_version, h.value, h.author,
  h.identity_strength, h.evidence, h.based_on, h.invocation, h.created_at, ${HISTORY_BYTES} as sz`;

function mapChange(r: Record<string, unknown>): ChangeRow {
  return {
    tx: (r.tx as string) ?? null,
    id: Number(r.id),
    class: r.class as string,
    rid: r.rid as string,
    field: r.field as string,
    op: r.op as string,
    version: r.version === null ? null : Number(r.version),
    record_version: Number(r.record_version),
    value: r.value,
    author: r.author as string,
    identity_strength: (r.identity_strength as string) ?? null,
    evidence: (r.evidence as string) ?? null,
    based_on: (r.based_on as ChangeRow['based_on']) ?? null,
    invocation: (r.invocation as ChangeRow['invocation']) ?? null,
    created_at: r.created_at as Date,
    bytes: Number(r.sz),
  };
}

/**
 * The page query of `queryRecords`: record ids, rids and versions matching every filter,
 * in creation order after `afterId`. Exported so a test can EXPLAIN the very statement.
 */
export function queryRecordsStatement(cls: string, filters: QueryFilter[], opts: { afterId: number; limit: number }) {
  // The first filter drives: its index (class, name, md5(value), record_id) or
  // (class, name, owner, record_id) yields matches in creation order, so the scan stops
  // after `limit` matches; the others are checked per match. A filter with several
  // candidate values (a JSON string and its parsed form) becomes one ordered branch per
  // candidate under UNION ALL, merged in order: `md5 = ANY(...)` would lose the index
  // order and sort every match. Without filters, records_class_id walks the class.
  const [first, ...rest] = filters;
  const valueCond = (a: ReturnType<typeof sql.raw>, field: string, v: unknown) => {
    const text = JSON.stringify(v);
    return sql`${a}.name = ${field} and md5((${a}.value::jsonb)::text) = md5((${text}::jsonb)::text)
               and ${a}.value::jsonb = ${text}::jsonb`;
  };
  const cond = (f: QueryFilter, alias: string) => {
    const a = sql.raw(alias);
    if (f.owner !== undefined) {
      return sql`${a}.name = ${f.field} and ${a}.owner = ${f.owner} and kslate_lease_held(${a}.owner, ${a}.lease_expires_at, now())`;
    }
    return sql`(${sql.join(
      (f.values ?? []).map((v) => sql`(${valueCond(a, f.field, v)})`),
      sql` or `,
    )})`;
  };
  const others = rest.map(
    (f, i) => sql`and exists (select 1 from fields ${sql.raw(`o${i}`)} where ${sql.raw(`o${i}`)}.record_id = f1.record_id and ${cond(f, `o${i}`)})`,
  );
  const branch = (driving: ReturnType<typeof sql>) => sql`(
    select f1.record_id from fields f1
    where f1.class = ${cls} and ${driving} and f1.record_id > ${opts.afterId}
      ${sql.join(others, sql` `)}
    order by f1.record_id limit ${opts.limit})`;
  const f1 = sql.raw('f1');
  const branches = !first
    ? []
    : first.owner !== undefined
      ? [branch(cond(first, 'f1'))]
      : (first.values ?? []).map((v) => branch(valueCond(f1, first.field, v)));
  return first
    ? sql<Record<string, unknown>>`
        select r.id, r.rid, r.record_version
        from (${sql.join(branches, sql` union all `)}) m join records r on r.id = m.record_id
        order by m.record_id limit ${opts.limit}`
    : sql<Record<string, unknown>>`
        select r.id, r.rid, r.record_version from records r
        where r.class = ${cls} and r.id > ${opts.afterId}
        order by r.id limit ${opts.limit}`;
}

/** A row of kslate_write (WRITE). */
interface WriteRow {
  outcome: 'applied' | 'stale' | 'stale_premise' | 'invalid_checkpoint';
  version: number;
  record_version: number | null;
  created: boolean;
  cur_author: string | null;
  cur_value: unknown;
  cur_evidence: string | null;
  cur_updated_ms: number | null;
  /** [field, your_version, current_version, current_author, current_evidence] per moved premise. */
  moved: [string, number, number, string | null, string | null][] | null;
  missing: string[] | null;
}

function writeResult(r: WriteRow): WriteResult {
  switch (r.outcome) {
    case 'applied':
      return { outcome: 'applied', version: r.version, record_version: r.record_version!, created: r.created };
    case 'stale':
      return {
        outcome: 'stale',
        current_version: r.version,
        current:
          r.cur_updated_ms === null
            ? null
            : { value: r.cur_value, author: r.cur_author, evidence: r.cur_evidence, updated_at: new Date(r.cur_updated_ms) },
      };
    case 'stale_premise':
      return {
        outcome: 'stale_premise',
        current_version: r.version,
        current_author: r.cur_author,
        moved: (r.moved ?? []).map(([field, your, current, author, evidence]) => ({
          field,
          your_version: your,
          current_version: current,
          current_author: author,
          current_evidence: evidence,
        })),
      };
    case 'invalid_checkpoint':
      return { outcome: 'invalid_checkpoint', missing: r.missing ?? [] };
  }
}

function mapEntry(r: Record<string, unknown>): EntryRow {
  return {
    seq: Number(r.seq),
    value: r.value,
    author: r.author as string,
    identity_strength: (r.identity_strength as string) ?? null,
    evidence: (r.evidence as string) ?? null,
    based_on: (r.based_on as EntryRow['based_on']) ?? null,
    invocation: (r.invocation as EntryRow['invocation']) ?? null,
    created_at: r.created_at as Date,
  };
}

/**
 * The entries of a get, per append field, oldest first: for each field its newest `limit`
 * (all when null) below `beforeSeq`, fields in the given order, kept while the running size
 * stays within `maxBytes` (the very first entry always, so a continuation always advances).
 * Only sizes are read for candidates; values only for the entries kept. No entry costs less
 * than ROW_OVERHEAD_BYTES, which bounds the candidates too.
 */
async function readEntries(
  db: Kysely<any>,
  recordId: number,
  names: string[],
  opts: { limit: number | null; beforeSeq: number | null; maxBytes: number },
): Promise<Map<string, EntryRow[]>> {
  const fit = Math.floor(opts.maxBytes / ROW_OVERHEAD_BYTES) + 1;
  const cap = opts.limit === null ? fit : Math.min(opts.limit, fit);
  const out = new Map<string, EntryRow[]>();
  if (cap === 0) return out;
  // One pass: candidates (newest first per field, values still TOASTed), their running size
  // in field order, and only the kept rows leave the query with their values.
  const rows = await sql<Record<string, unknown>>`
    select c.field, c.seq, c.value, c.author, c.identity_strength, c.evidence, c.based_on, c.invocation, c.created_at
    from (
      select n.field, n.ord, e.*, sum(e.sz) over w as running, row_number() over w as rn
      from unnest(${names}::text[]) with ordinality as n(field, ord)
      cross join lateral (
        select e.seq, e.value, e.author, e.identity_strength, e.evidence, e.based_on, e.invocation, e.created_at,
               ${ENTRY_BYTES} as sz
        from entries e
        where e.record_id = ${recordId} and e.field = n.field
          ${opts.beforeSeq === null ? sql`` : sql`and e.seq < ${opts.beforeSeq}`}
        order by e.seq desc limit ${cap}) e
      window w as (order by n.ord, e.seq desc)) c
    where c.running <= ${opts.maxBytes} or c.rn = 1
    order by c.ord, c.seq`.execute(db);
  for (const r of rows.rows) {
    const list = out.get(r.field as string) ?? [];
    list.push(mapEntry(r));
    out.set(r.field as string, list);
  }
  return out;
}

/**
 * The latest entry per (record, append field), keyed `id:field` (query shows only that one),
 * or null when they do not all fit `maxBytes` (then no value was read).
 */
async function latestEntries(db: Kysely<any>, recordIds: number[], names: string[], maxBytes: number) {
  const rows = await sql<Record<string, unknown>>`
    select k.record_id, n.field, e.seq, case when sum(e.sz) over () <= ${maxBytes} then e.value end as value, e.author,
           e.identity_strength, e.evidence, e.based_on, e.invocation, e.created_at, sum(e.sz) over () as total
    from unnest(${recordIds}::bigint[]) as k(record_id)
    cross join unnest(${names}::text[]) as n(field)
    cross join lateral (
      select e.*, ${ENTRY_BYTES} as sz from entries e where e.record_id = k.record_id and e.field = n.field
      order by e.seq desc limit 1
    ) e
    order by k.record_id, n.field`.execute(db);
  const byKey = new Map<string, EntryRow[]>();
  for (const r of rows.rows) {
    if (Number(r.total) > maxBytes) return null;
    byKey.set(`${r.record_id}:${r.field}`, [mapEntry(r)]);
  }
  return byKey;
}

/**
 * A rejection's history row decided in the gateway (kslate_add_history, migration 0010): the
 * record version is the record's when refused, absent when the record does not exist.
 */
async function insertRejection(db: Kysely<any>, row: HistoryInsert) {
  const v = row.value;
  await sql`
    select kslate_add_history(${row.class}, ${row.rid}, ${row.field}, ${row.op}, ${row.outcome}, ${row.version ?? null}::bigint,
      (select record_version from records where class = ${row.class} and rid = ${row.rid}),
      ${v.kind === 'whole' ? j(v.value) : null}, ${v.kind === 'digest' ? v.size : null}::integer, ${v.kind === 'digest' ? v.sha256 : null},
      ${row.author}, ${row.identity_strength}, ${row.evidence ?? null}, ${row.expected_version ?? null}::bigint,
      ${j(row.based_on ?? null)}, ${j(row.invocation ?? null)}, null)`.execute(db);
}
