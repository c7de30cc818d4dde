/**
 * Migration 0021 (issue 37, docs/worker.md "Reclaiming space"): the tables the sweep deletes from
 * and every write updates carry autovacuum settings of their own, so that space retention frees
 * is vacuumed and reused long before PostgreSQL's default 20% of the table is dead (the soak saw
 * history grow by its whole write rate with retention on, never autovacuumed). The Citus side,
 * the same settings on every shard: test/citus/retention.test.ts.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;

beforeAll(async () => {
  db = await freshDatabase();
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const AUTOVACUUM: Record<string, Record<string, string>> = {
  history: {
    autovacuum_vacuum_scale_factor: '0.01',
    autovacuum_vacuum_threshold: '1000',
    autovacuum_vacuum_insert_scale_factor: '0.02',
    autovacuum_vacuum_insert_threshold: '1000',
    autovacuum_analyze_scale_factor: '0.01',
    autovacuum_analyze_threshold: '1000',
  },
  ...Object.fromEntries(
    ['history_purged', 'expired_records', 'idempotency_keys', 'entries', 'records', 'fields'].map((t) => [
      t,
      { autovacuum_vacuum_scale_factor: '0.05', autovacuum_vacuum_threshold: '1000', autovacuum_analyze_scale_factor: '0.05', autovacuum_analyze_threshold: '1000' },
    ]),
  ),
};

/** A relation's storage parameters as name -> value. */
const reloptions = (opts: string[] | null): Record<string, string> =>
  Object.fromEntries((opts ?? []).map((o) => [o.slice(0, o.indexOf('=')), o.slice(o.indexOf('=') + 1)]));

describe('migration 0021: autovacuum settings', () => {
  it('sets them on history and the other tables the sweep purges and writes update', async () => {
    const { rows } = await pool.query<{ t: string; opts: string[] | null }>(
      `select relname as t, reloptions as opts from pg_class c join pg_namespace n on n.oid = c.relnamespace
       where n.nspname = current_schema() and relkind = 'r' and relname = any($1)`,
      [Object.keys(AUTOVACUUM)],
    );
    expect(rows.map((r) => r.t).sort()).toEqual(Object.keys(AUTOVACUUM).sort());
    for (const r of rows) expect(reloptions(r.opts), r.t).toEqual(AUTOVACUUM[r.t]);
  });

  it('makes a purge of 2% of a 1,000,000-row history table due for autovacuum (the default needs 20%)', async () => {
    // PostgreSQL's rule (autovacuum.c): vacuum when dead tuples > threshold + scale_factor * reltuples.
    const { rows } = await pool.query<{ due: boolean }>(
      `select 2000 + 0.02 * 1e6 > t.th + t.sf * 1e6 as due
       from (select (select split_part(o, '=', 2)::float8 from unnest(reloptions) o where o like 'autovacuum_vacuum_threshold=%') as th,
                    (select split_part(o, '=', 2)::float8 from unnest(reloptions) o where o like 'autovacuum_vacuum_scale_factor=%') as sf
             from pg_class where oid = 'history'::regclass) t`,
    );
    expect(rows[0]).toEqual({ due: true });
  });
});
