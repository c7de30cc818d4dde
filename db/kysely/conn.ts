/**
 * What the data-access functions of this folder run on (style: data access as plain functions
 * taking the pool or transaction first): Kysely over the pool, typed by the tables
 * (schema.ts), and the pool's named prepared statements for the hot ones. And the SQL pieces
 * several of those files share.
 */
import { Kysely, PostgresDialect, sql, type RawBuilder } from 'kysely';
import pg from 'pg';
import { runNamed } from './pool.js';
import type { Database } from './schema.js';

export class Conn {
  /** Kysely over the pool: its query builder (typed by the tables) and `sql` templates. */
  readonly kysely: Kysely<Database>;
  /** Whether the pool is node-postgres's own (NamedQuery needs its connection). */
  private readonly describeOnce: boolean;
  /** SQL text of the statements `named` compiled, by name. */
  private readonly texts = new Map<string, string>();
  /** Whether the database is distributed by Citus (migration 0014), once asked. */
  private citusOnce: Promise<boolean> | undefined;

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

  /**
   * Whether the database has the citus extension (its tables then distributed by migration
   * 0014): asked once. For the few statements whose best plain-PostgreSQL shape Citus cannot
   * route to one shard (readHistory).
   */
  citus(): Promise<boolean> {
    this.citusOnce ??= this.pool
      .query<{ c: boolean }>(`select exists (select 1 from pg_extension where extname = 'citus') as c`)
      .then((r) => r.rows[0]?.c === true)
      .catch((e) => {
        this.citusOnce = undefined;
        throw e;
      });
    return this.citusOnce;
  }

  /**
   * A named statement written as a `sql` template, compiled on its first run: `values` must be
   * the template's parameters in order (checked then), and `name` must name one shape.
   */
  async named<R>(name: string, values: readonly unknown[], build: () => RawBuilder<unknown>): Promise<{ rows: R[] }> {
    let text = this.texts.get(name);
    if (text === undefined) {
      const c = build().compile(this.kysely);
      if (c.parameters.length !== values.length || c.parameters.some((p, i) => p !== values[i])) {
        throw new Error(`statement ${name}: the values given are not the template's parameters`);
      }
      text = c.sql;
      this.texts.set(name, text);
    }
    return this.exec<R>(name, text, values);
  }
}

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
