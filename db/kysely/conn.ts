/**
 * What the data-access functions of this folder run on (style: data access as plain functions
 * taking the pool or transaction first): Kysely over the pool, typed by the tables
 * (schema.ts), and the pool's named prepared statements for the hot ones. And the SQL pieces
 * several of those files share.
 */
import { Kysely, PostgresDialect, sql, type RawBuilder } from 'kysely';
import pg from 'pg';
import { classifyDbError } from '../errors.js';
import { namedQuery, runNamed } from './pool.js';
import type { Database } from './schema.js';

export class Conn {
  /** Kysely over the pool: its query builder (typed by the tables) and `sql` templates. */
  readonly kysely: Kysely<Database>;
  /** Whether the pool is node-postgres's own (NamedQuery needs its connection). */
  private readonly describeOnce: boolean;
  /** SQL text of the statements `named` compiled, by name. */
  private readonly texts = new Map<string, string>();
  /** The server refused pg_current_wal_insert_lsn() (thenLsn): writes carry no token. */
  private noLsn = false;
  /** Told once when that happens (the runtime logs it). */
  onNoLsn?: (e: Error) => void;
  /** Whether the database is distributed by Citus (migration 0014), once asked. */
  private citusOnce: Promise<boolean> | undefined;
  /** Its answer, once there. */
  private citusKnown: boolean | undefined;

  constructor(readonly pool: pg.Pool) {
    this.kysely = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
    this.describeOnce = pool instanceof pg.Pool;
  }

  /**
   * A named statement: parsed and planned once per connection, then only bound and executed
   * (Kysely sends every statement unnamed). Through NamedQuery (described on its first run
   * only) on a node-postgres pool; as a plain named query on any other pg-compatible pool (the
   * Workers adapter's). The name must always go with the same text.
   */
  exec<R>(name: string, text: string, values: readonly unknown[]): Promise<{ rows: R[] }> {
    if (!this.describeOnce) return this.pool.query<R & pg.QueryResultRow>({ name, text, values: [...values] });
    return runNamed<R>(this.pool, name, text, [...values]);
  }

  /** A simple-protocol query of several statements (no parameters): the rows of its SELECT. */
  async simple<R>(text: string): Promise<R[]> {
    return selectRows<R>(await this.pool.query(text));
  }

  /** A keyed write statement alone (Statements.keyed): its one message. */
  keyed<R>(k: KeyedStatement): Promise<R[]> {
    return this.simple<R>(k.message);
  }

  /**
   * Whether the database has the citus extension (its tables then distributed by migration
   * 0014): asked once. For the few statements whose best plain-PostgreSQL shape Citus cannot
   * route to one shard (readHistory).
   */
  citus(): Promise<boolean> {
    this.citusOnce ??= this.pool
      .query<{ c: boolean }>(`select exists (select 1 from pg_extension where extname = 'citus') as c`)
      .then((r) => (this.citusKnown = r.rows[0]?.c === true))
      .catch((e) => {
        this.citusOnce = undefined;
        throw e;
      });
    return this.citusOnce;
  }

  /**
   * Whether relaxed writes (issue 38) may set synchronous_commit off here: not on Citus, where
   * the coordinator's SET LOCAL does not reach the worker that commits the record's shard.
   * Synchronous once the database has been asked.
   */
  relaxable(): boolean | Promise<boolean> {
    if (this.citusKnown !== undefined) return !this.citusKnown;
    return this.citus().then((c) => !c);
  }

  /**
   * A named statement written as a `sql` template, compiled on its first run: `values` must be
   * the template's parameters in order (checked then), and `name` must name one shape.
   */
  named<R>(name: string, values: readonly unknown[], build: () => RawBuilder<unknown>): Promise<{ rows: R[] }> {
    return this.exec<R>(name, this.compiled(name, values, build), values);
  }

  private compiled(name: string, values: readonly unknown[], build: () => RawBuilder<unknown>): string {
    let text = this.texts.get(name);
    if (text === undefined) {
      const c = build().compile(this.kysely);
      if (c.parameters.length !== values.length || c.parameters.some((p, i) => p !== values[i])) {
        throw new Error(`statement ${name}: the values given are not the template's parameters`);
      }
      text = c.sql;
      this.texts.set(name, text);
    }
    return text;
  }

  /**
   * Run `fn`'s statements on one connection, then read the WAL insert position on that same
   * connection: each statement of `fn` autocommits, so the position read after it is at or
   * after its commit record (read inside the statement it would be before the commit). The
   * read-your-writes token of the write (docs/ha.md); null when reading it failed, which does
   * not undo the write.
   */
  async thenLsn<T>(fn: (s: Statements) => Promise<T>): Promise<{ value: T; lsn: string | null }> {
    if (this.noLsn) return { value: await fn(this), lsn: null };
    const client = await this.pool.connect();
    let failed: unknown;
    const on: Statements = {
      exec: <R>(name: string, text: string, values: readonly unknown[]) =>
        this.describeOnce
          ? // A submittable answers through its callback (pg's Client.query), not a promise.
            new Promise<{ rows: R[] }>((resolve, reject) =>
              client.query(namedQuery<R>(this.pool, name, text, [...values]) as never, ((err: Error | null, res: { rows: R[] }) =>
                err ? reject(err) : resolve(res)) as never),
            )
          : (client.query({ name, text, values: [...values] }) as unknown as Promise<{ rows: R[] }>),
      named: <R>(name: string, values: readonly unknown[], build: () => RawBuilder<unknown>) =>
        on.exec<R>(name, this.compiled(name, values, build), values),
      citus: () => this.citus(),
      simple: async <R>(text: string) => selectRows<R>(await client.query(text)),
      keyed: <R>(k: KeyedStatement) => on.simple<R>(k.message),
      relaxable: () => this.relaxable(),
    };
    try {
      const value = await fn(on);
      let lsn: string | null = null;
      try {
        lsn = (await on.exec<{ lsn: string }>(WAL_INSERT.name, WAL_INSERT.text, [])).rows[0]?.lsn ?? null;
      } catch (e) {
        // A server that refuses the function itself (a SQLSTATE that is no connection, timeout
        // or schema fault; some managed services do not offer WAL functions): writes answer
        // without a token from now on, on a connection that is still good.
        if (typeof (e as { code?: unknown }).code === 'string' && classifyDbError(e) === null) {
          this.noLsn = true;
          this.onNoLsn?.(e as Error);
        } else failed = e;
      }
      return { value, lsn };
    } catch (e) {
      failed = e;
      throw e;
    } finally {
      // As pg's pool.query does: a connection that failed a statement is not reused.
      client.release(failed === undefined ? undefined : failed instanceof Error ? failed : true);
    }
  }
}

/** What the write functions run their statements through: the pool (Conn) or one pinned connection (Conn.thenLsn). */
export interface Statements {
  exec<R>(name: string, text: string, values: readonly unknown[]): Promise<{ rows: R[] }>;
  named<R>(name: string, values: readonly unknown[], build: () => RawBuilder<unknown>): Promise<{ rows: R[] }>;
  /**
   * Whether a write of relaxed fields may commit relaxed here (Conn.relaxable: not on Citus);
   * a boolean once known, so a write function still sends its statement before its first await.
   */
  relaxable(): boolean | Promise<boolean>;
  /** Whether the database is distributed by Citus (Conn.citus). */
  citus(): Promise<boolean>;
  /**
   * Several statements in one simple-protocol message, one round trip (the keyed writes:
   * `begin; select ...; commit`, idempotency.ts): the rows of its SELECT. A statement that
   * fails leaves the connection in an aborted transaction: the pool then drops it, as it drops
   * any connection a statement failed on.
   */
  simple<R>(text: string): Promise<R[]>;
  /**
   * A keyed write statement (idempotency.ts): alone, its `message` (`begin; select ...;
   * commit`, one round trip, answered after the commit); the write batcher may instead carry
   * it in a batch (batch.ts), whose one commit then holds the write, its key and its result.
   * The rows of its SELECT either way.
   */
  keyed<R>(k: KeyedStatement): Promise<R[]>;
}

/** A keyed write statement (idempotency.ts KEYED), as sent alone or carried in a batch. */
export interface KeyedStatement {
  /** Its text with parameters (which statement it is: batch.ts knows the batchable ones by it). */
  text: string;
  /** The write function's arguments (the parameters before key, digest and ttl). */
  values: readonly unknown[];
  key: { rid: string; author: string; key: string; digest: string; ttlSeconds: number };
  /** A write of relaxed fields only: its transaction commits with synchronous_commit off. */
  relaxed: boolean;
  /** The one simple-protocol message that sends it alone, its values inlined. */
  message: string;
}

/** The rows of the SELECT among a multi-statement query's results. */
function selectRows<R>(res: unknown): R[] {
  const all = (Array.isArray(res) ? res : [res]) as { command: string; rows: R[] }[];
  return all.find((r) => r.command === 'SELECT')?.rows ?? [];
}

/** The WAL insert position: after every record inserted so far, this session's commit records included. */
const WAL_INSERT = { name: 'kslate_wal_insert_lsn', text: 'select pg_current_wal_insert_lsn()::text as lsn' };

/** A value as the JSON text a statement sends (null stays null; `undefined` is no value). */
export const j = (v: unknown): string | null => (v === undefined ? null : JSON.stringify(v));

/** A timestamp as whole epoch milliseconds (truncated, as the driver's Date parsing does). */
export const epochMs = (col: RawBuilder<unknown>) => sql<number>`floor(extract(epoch from ${col}) * 1000)::bigint`;

/** What a rendered row costs beyond its texts (keys, author, timestamps): a byte budget also bounds row counts. */
export const ROW_OVERHEAD_BYTES = 256;

// A row's size for byte budgets: `bytes` (migration 0003); for rows written before it, the
// stored size of its value and evidence (pg_column_size: no de-TOASTing or conversion, so
// cheap, but a compressed value counts at its compressed size).
const rowBytes = (a: string) =>
  sql.raw<number>(
    `coalesce(${a}bytes, coalesce(pg_column_size(${a}value), 0) + coalesce(pg_column_size(${a}evidence), 0)) + ${ROW_OVERHEAD_BYTES}`,
  );
export const HISTORY_BYTES = rowBytes('h.');
export const FIELD_BYTES = rowBytes('f.');
export const ENTRY_BYTES = rowBytes('e.');
