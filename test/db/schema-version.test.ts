/**
 * schemaVersion (db/migrate.ts), which readiness and the worker read to decide whether the
 * schema is there: complete only when every migration this build knows is applied. Migrations
 * are applied as a set and numbers can land below one already applied (0022 came after 0024
 * and 0025), so a database upgraded from a build without 0022 has max(version) = 25 and would
 * pass a highest-number check without it.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { migrate, schemaVersion, SCHEMA_VERSION } from '../../db/migrate.js';
import { migrations } from '../../db/migrations/index.js';
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

it('is null before the schema, the newest version once migrated, and short of it while a lower-numbered migration is missing', async () => {
  expect(await schemaVersion(pool)).toBeNull();
  await migrate(pool);
  expect(await schemaVersion(pool)).toBe(SCHEMA_VERSION);
  // A migration below the newest one missing: the database looks as one upgraded from a build
  // that did not know it (the row is what the check reads; its functions stay in place here).
  const below = migrations.filter((m) => m.version < SCHEMA_VERSION).at(-1)!;
  const row = await pool.query('delete from kslate_migrations where version = $1 returning name', [below.version]);
  expect(row.rowCount).toBe(1);
  const v = await schemaVersion(pool);
  expect(v).toBe(below.version - 1);
  expect(v!).toBeLessThan(SCHEMA_VERSION);
  await pool.query('insert into kslate_migrations (version, name) values ($1, $2)', [below.version, row.rows[0].name]);
  expect(await schemaVersion(pool)).toBe(SCHEMA_VERSION);
});
