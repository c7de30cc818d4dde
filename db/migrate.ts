import type pg from 'pg';
import { migrations, SCHEMA_VERSION } from './migrations/index.js';

/** Advisory lock key shared by every migrator, so replicas starting together cannot race. */
const MIGRATION_LOCK = 7_283_641_001;

/**
 * Apply every missing migration in one transaction under a PostgreSQL advisory lock.
 * A second migrator waits on the lock, then finds nothing left to do.
 */
export async function migrate(pool: pg.Pool): Promise<{ applied: number[] }> {
  const client = await pool.connect();
  const applied: number[] = [];
  try {
    await client.query('begin');
    await client.query('select pg_advisory_xact_lock($1)', [MIGRATION_LOCK]);
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
      await client.query(m.up);
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

/** The highest applied schema version, or null when the schema is absent. */
export async function schemaVersion(pool: pg.Pool): Promise<number | null> {
  // Two statements: a query naming a missing table fails at parse time.
  const reg = await pool.query<{ t: string | null }>(`select to_regclass('kslate_migrations')::text as t`);
  if (!reg.rows[0]?.t) return null;
  const { rows } = await pool.query<{ v: number | null }>('select max(version) as v from kslate_migrations');
  const v = rows[0]?.v;
  return v === null || v === undefined ? null : Number(v);
}

export { SCHEMA_VERSION };
