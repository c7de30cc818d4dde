import type pg from 'pg';
import { migrations, SCHEMA_VERSION } from './migrations/index.js';

/** Advisory lock key shared by every migrator, so replicas starting together cannot race. */
const MIGRATION_LOCK = 7_283_641_001;

/**
 * `--database-mode`: `citus` distributes the schema by record (migration 0014,
 * docs/scale-out.md), `plain` keeps it on one PostgreSQL, `auto` picks `citus` when the
 * `citus` extension is in the database.
 */
export type DatabaseMode = 'auto' | 'plain' | 'citus';
export const DATABASE_MODES: readonly DatabaseMode[] = ['auto', 'plain', 'citus'];

/** The database does not match the mode asked for: fatal at start (not a database outage to wait out). */
export class DatabaseModeError extends Error {
  override name = 'DatabaseModeError';
}

/**
 * The mode the migrations run in. The migrations themselves (0014 on) distribute when the
 * `citus` extension is present, so the mode asked for must agree with the database:
 * - `citus` needs the extension (created on every node, the workers added: docs/scale-out.md);
 * - `plain` refuses a database that has it (the migrations would distribute it);
 * - a schema migrated on plain PostgreSQL (0014 applied, `records` not distributed) is not
 *   redistributed when the extension is added later: refused in `citus` and `auto` alike.
 * The resolved mode is also the transaction's `kslate.database_mode` for migrations from 0018.
 */
export async function resolveDatabaseMode(client: pg.PoolClient | pg.Pool, mode: DatabaseMode): Promise<'plain' | 'citus'> {
  const { rows } = await client.query<{ present: boolean; available: boolean; db: string }>(
    `select exists (select 1 from pg_extension where extname = 'citus') as present,
            exists (select 1 from pg_available_extensions where name = 'citus') as available,
            current_database() as db`,
  );
  const { present, available, db } = rows[0]!;
  if (mode === 'citus' && !present) {
    throw new DatabaseModeError(
      `--database-mode citus: the citus extension is not in database "${db}" ` +
        (available
          ? '(it is installed on the server: run `create extension citus` in this database on the coordinator and on every worker, and add the workers with citus_add_node; docs/scale-out.md).'
          : '(it is not installed on this server: point --database-url at a Citus coordinator, or use --database-mode plain; docs/scale-out.md).'),
    );
  }
  if (mode === 'plain' && present) {
    throw new DatabaseModeError(
      `--database-mode plain: database "${db}" has the citus extension, and the migrations distribute the tables of a database that has it: use --database-mode citus (or auto), or drop the extension.`,
    );
  }
  const resolved = present ? 'citus' : 'plain';
  if (resolved === 'citus') {
    // Two statements: a query naming a missing table fails at parse time.
    const reg = await client.query<{ t: string | null }>(`select to_regclass('kslate_migrations')::text as t`);
    const dist = reg.rows[0]?.t
      ? await client.query<{ plain14: boolean }>(
          `select exists (select 1 from kslate_migrations where version = 14)
                  and not exists (select 1 from pg_dist_partition where logicalrelid = to_regclass('records')) as plain14`,
        )
      : null;
    if (dist?.rows[0]?.plain14) {
      throw new DatabaseModeError(
        `database "${db}" has the citus extension but its kslate schema was migrated on plain PostgreSQL (records is not distributed): kslate does not redistribute an existing schema in place. Drop the extension to run it plain (--database-mode plain), or move the data to a database created with citus (docs/scale-out.md).`,
      );
    }
  }
  return resolved;
}

/**
 * The query strings a migration is sent as: its whole text, but for 0019, whose
 * `create index` on a (on Citus, distributed) table shares its query string with other
 * statements, which Citus refuses ("cannot insert multiple commands into a prepared
 * statement": it sends the index command to the workers with the query's text). Applied
 * migrations are frozen, so its statements go one at a time here, in the same transaction:
 * the same effect on plain PostgreSQL.
 */
function statementsOf(m: { version: number; up: string }): string[] {
  return m.version === 19 ? m.up.split(/\n(?=create index |do \$citus\$)/) : [m.up];
}

/**
 * Apply every missing migration in one transaction under a PostgreSQL advisory lock.
 * A second migrator waits on the lock, then finds nothing left to do. `mode`: --database-mode.
 */
export async function migrate(pool: pg.Pool, opts: { mode?: DatabaseMode } = {}): Promise<{ applied: number[] }> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
    const mode = await resolveDatabaseMode(client, opts.mode ?? 'auto');
    await client.query(`select set_config('kslate.database_mode', $1, true)`, [mode]);
    await client.query(
      `create table if not exists kslate_migrations (
         version integer primary key,
         name text not null,
         applied_at timestamptz not null default now())`,
    );
    const { rows } = await client.query<{ version: number }>('select version from kslate_migrations');
    const have = new Set(rows.map((r) => Number(r.version)));
    for (const m of migrations) {
      if (have.has(m.version)) continue;
      for (const part of statementsOf(m)) await client.query(part);
      await client.query('insert into kslate_migrations (version, name) values ($1, $2)', [m.version, m.name]);
      applied.push(m.version);
    }
    await client.query('commit');
    return { applied };
  } catch (e) {
    await client.query('rollback').catch(() => undefined);
    throw e;
  } finally {
    client.release();
  }
}

/**
 * The schema version this database is complete up to, or null when the schema is absent: the
 * highest applied version when every migration this build knows is applied, else the version
 * before the first one missing. Migrations are applied as a set (`migrate`), and a newer
 * migration can land with a number below one already applied (0022 after 0024 and 0025), so
 * the highest applied number alone would call a database without it ready.
 */
export async function schemaVersion(pool: pg.Pool): Promise<number | null> {
  // Two statements: a query naming a missing table fails at parse time.
  const reg = await pool.query<{ t: string | null }>(`select to_regclass('kslate_migrations')::text as t`);
  if (!reg.rows[0]?.t) return null;
  const { rows } = await pool.query<{ v: number }>('select version as v from kslate_migrations');
  if (rows.length === 0) return null;
  const have = new Set(rows.map((r) => Number(r.v)));
  for (const m of migrations) if (!have.has(m.version)) return m.version - 1;
  return Math.max(...have);
}

export { SCHEMA_VERSION };
