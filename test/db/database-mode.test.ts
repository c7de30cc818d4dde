/**
 * `--database-mode auto|plain|citus` (issue 35, docs/scale-out.md) on plain PostgreSQL: auto and
 * plain migrate it as one database; citus stops with what to do, before any migration runs
 * (the Citus side: test/citus/retention.test.ts).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DatabaseModeError, migrate, resolveDatabaseMode } from '../../db/migrate.js';
import { parseConfig } from '../../runtime/config.js';
import { BIN, cleanEnv, run } from '../setup/cli.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;

beforeAll(async () => {
  db = await freshDatabase({ migrated: false });
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const tables = async () =>
  (await pool.query<{ n: number }>(`select count(*)::int as n from pg_tables where schemaname = 'public'`)).rows[0].n;

describe('--database-mode', () => {
  it('is auto by default; takes plain or citus; refuses anything else naming the flag and its variable', () => {
    expect(parseConfig([], {}).databaseMode).toBe('auto');
    expect(parseConfig(['--database-mode', 'citus'], {}).databaseMode).toBe('citus');
    expect(parseConfig([], { KSLATE_DATABASE_MODE: 'plain' }).databaseMode).toBe('plain');
    expect(() => parseConfig(['--database-mode', 'sharded'], {})).toThrow(/--database-mode \(KSLATE_DATABASE_MODE\) must be auto, plain or citus/);
  });

  it('citus on a database without the extension stops before migrating anything, saying why', async () => {
    const err = await migrate(pool, { mode: 'citus' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(DatabaseModeError);
    expect((err as Error).message).toMatch(/--database-mode citus: the citus extension is not in database ".+" \(it is not installed on this server/);
    expect(await tables()).toBe(0);
  });

  it('`kslate migrate --database-mode citus` exits 2 with that one line', async () => {
    const r = await run(BIN, ['migrate', '--database-url', db.url], cleanEnv({ KSLATE_DATABASE_MODE: 'citus' }));
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/^kslate: --database-mode citus: the citus extension is not in database/);
    expect(await tables()).toBe(0);
  });

  it('plain and auto migrate plain PostgreSQL (auto resolves to plain there)', async () => {
    expect((await migrate(pool, { mode: 'plain' })).applied.length).toBeGreaterThan(10);
    expect(await migrate(pool, { mode: 'auto' })).toEqual({ applied: [] });
    const c = await pool.connect();
    try {
      await c.query('begin');
      expect(await resolveDatabaseMode(c, 'auto')).toBe('plain');
      await c.query('rollback');
    } finally {
      c.release();
    }
    const r = await run(BIN, ['migrate', '--database-url', db.url, '--database-mode', 'plain'], cleanEnv());
    expect(r.stdout).toContain('schema up to date');
    expect(r.code).toBe(0);
  });
});
