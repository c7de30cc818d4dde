/**
 * Migration 0014 (issue 35) on plain PostgreSQL: an existing database at schema 10, with
 * records, task leases, checkpoints, append entries, history and a record whose expiry is
 * still being purged, upgrades in place — every row keeps its data and gains its record's
 * `rid` — and writes go on from where they were.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate } from '../../db/migrate.js';
import { migrations } from '../../db/migrations/index.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;

const put = (rid: string, field: string, kind: string, value: unknown, expect: number | null = null) =>
  pool.query<{ outcome: string; version: string; record_version: string }>(
    `select outcome, version, record_version from kslate_write($1, $2, $3, $4, 'put', $5, null, null, 'apikey:a', 'strong', $6, null, null, null, $5)`,
    ['c', rid, field, kind, expect, JSON.stringify(value)],
  );

/** The newest history row written at schema 10, before the upgrade. */
let lastBeforeUpgrade = 0;

beforeAll(async () => {
  db = await freshDatabase({ migrated: false });
  pool = new pg.Pool({ connectionString: db.url, max: 2 });
  // Schema 10, as the previous release left it.
  const c = await pool.connect();
  try {
    await c.query('begin');
    await c.query('create table kslate_migrations (version integer primary key, name text not null, applied_at timestamptz not null default now())');
    for (const m of migrations.filter((x) => x.version <= 10)) {
      await c.query(m.up);
      await c.query('insert into kslate_migrations (version, name) values ($1, $2)', [m.version, m.name]);
    }
    await c.query('commit');
  } finally {
    c.release();
  }
  for (let i = 0; i < 5; i++) expect((await put(`r${i}`, 'f', 'versioned', { i })).rows[0].outcome).toBe('applied');
  expect((await put('r0', 'log', 'append', 'a1')).rows[0].outcome).toBe('applied');
  expect((await put('r0', 'log', 'append', 'a2')).rows[0].outcome).toBe('applied');
  await pool.query(`select * from kslate_claim('c', 'r1', 'task', 'apikey:a', 'strong', 60, null)`);
  await pool.query(`select * from kslate_save_checkpoint('c', 'r2', 'reviewer', '{"ok":true}', 'apikey:a')`);
  // r3 expired with its entries still queued for the purge (as the sweep leaves it).
  expect((await put('r3', 'log', 'append', 'gone')).rows[0].outcome).toBe('applied');
  await pool.query(`insert into expired_records (record_id, class, rid, max_history_id)
                    select id, class, rid, (select max(id) from history where rid = 'r3') from records where rid = 'r3'`);
  await pool.query(`delete from records where rid = 'r3'`);
  // An entry no record and no queue row names: unreachable (record ids are never reused).
  await pool.query(`insert into entries (record_id, field, seq, value, author) values (999999, 'log', 1, '"orphan"', 'x')`);
  lastBeforeUpgrade = Number((await pool.query(`select max(id) as id from history`)).rows[0].id);
  expect(await migrate(pool)).toEqual({ applied: migrations.filter((x) => x.version > 10).map((x) => x.version) });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

describe('migration 0014 on an existing plain database', () => {
  it('gives every field, entry and checkpoint its record rid, keeping the rows', async () => {
    const f = await pool.query(`select f.rid, r.rid as rec from fields f join records r on r.id = f.record_id order by f.rid, f.name`);
    expect(f.rows.length).toBe(6);
    expect(f.rows.every((r) => r.rid === r.rec)).toBe(true);
    const e = await pool.query(`select rid, value from entries order by rid, seq`);
    expect(e.rows).toEqual([
      { rid: 'r0', value: 'a1' },
      { rid: 'r0', value: 'a2' },
      { rid: 'r3', value: 'gone' },
    ]);
    const cp = await pool.query(`select rid, document from checkpoints`);
    expect(cp.rows).toEqual([{ rid: 'r2', document: { ok: true } }]);
    const nullable = await pool.query(
      // idempotency_keys gains its rid in 0016, null on keys stored before it (they name no record).
      `select table_name from information_schema.columns where column_name = 'rid' and is_nullable = 'YES' and table_schema = 'public'
         and table_name <> 'idempotency_keys'`,
    );
    expect(nullable.rows).toEqual([]);
  });

  it('goes on writing: versions continue, leases hold, checkpoints count on', async () => {
    expect((await put('r0', 'f', 'versioned', 'next', 1)).rows[0]).toMatchObject({ outcome: 'applied', version: '2', record_version: '4' });
    expect((await put('r0', 'f', 'versioned', 'late', 1)).rows[0]).toMatchObject({ outcome: 'stale', version: '2' });
    expect((await put('r0', 'log', 'append', 'a3')).rows[0]).toMatchObject({ outcome: 'applied', version: '3' });
    const held = await pool.query(`select outcome from kslate_claim('c', 'r1', 'task', 'apikey:b', 'strong', 60, null)`);
    expect(held.rows[0].outcome).toBe('held');
    const cp = await pool.query(`select checkpoint_id from kslate_save_checkpoint('c', 'r2', 'reviewer', '{"ok":false}', 'apikey:a')`);
    expect(cp.rows[0].checkpoint_id).toBe('2');
    expect((await pool.query(`select count(*)::int as n from fields where rid = 'r0'`)).rows[0].n).toBe(2);
  });

  it('renders history rows as migration 0008 did', async () => {
    // Every row, those rendered by 0008's trigger and those by 0014's, equals the one rendering,
    // but for its time: 0008 rounded it to the millisecond, 0025 truncates (rows stored before
    // keep the text they were stored with).
    const ms = (t: string) => `to_char((${t}) at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS')`;
    const { rows } = await pool.query<{ id: string; rendered: string; again: string; truncated: string; rounded: string }>(
      `select id, rendered, kslate_history_text(h) as again, ${ms('created_at')} as truncated,
              ${ms(`created_at + interval '500 microseconds'`)} as rounded
       from history h order by id`,
    );
    expect(rows.length).toBeGreaterThan(10);
    for (const r of rows) {
      const stored = Number(r.id) <= lastBeforeUpgrade ? r.again.replace(`"created_at":"${r.truncated}`, `"created_at":"${r.rounded}`) : r.again;
      expect(r.rendered).toBe(stored);
    }
  });
});

describe('a writer that does not name rid', () => {
  it("gets its record's rid on plain PostgreSQL (fields, entries, checkpoints; an expired record's entries from its queue row)", async () => {
    const id = (await pool.query(`select id from records where rid = 'r4'`)).rows[0].id;
    await pool.query(`insert into fields (record_id, class, name, kind, value, version, record_version, author, updated_at) values ($1, 'c', 'g', 'versioned', '1', 1, 1, 'x', now())`, [id]);
    await pool.query(`insert into entries (record_id, field, seq, value, author) values ($1, 'log', 1, '"e"', 'x')`, [id]);
    await pool.query(`insert into checkpoints (record_id, role, checkpoint_id, document, record_version, author) values ($1, 'r', 1, '{}', 1, 'x')`, [id]);
    const gone = (await pool.query(`select record_id from expired_records where rid = 'r3'`)).rows[0].record_id;
    await pool.query(`insert into entries (record_id, field, seq, value, author) values ($1, 'log', 99, '"late"', 'x')`, [gone]);
    const rids = await pool.query(`
      select (select rid from fields where record_id = $1 and name = 'g') as f,
             (select rid from entries where record_id = $1 and field = 'log') as e,
             (select rid from checkpoints where record_id = $1 and role = 'r') as c,
             (select rid from entries where record_id = $2 and seq = 99) as x`, [id, gone]);
    expect(rids.rows[0]).toEqual({ f: 'r4', e: 'r4', c: 'r4', x: 'r3' });
  });
});
