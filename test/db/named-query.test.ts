/**
 * Named statements described once (db/kysely/named-query.ts): the same rows as pg's own Query,
 * no RowDescription after the first run, a changed result shape failing clearly once and then
 * recovering, server, bind and timeout errors leaving the connection usable. Against a real PostgreSQL.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it, vi } from 'vitest';
import { createPool, namedQuery, runNamed } from '../../db/kysely/index.js';
import { NamedQuery } from '../../db/kysely/named-query.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;

beforeAll(async () => {
  db = await freshDatabase();
  pool = createPool({ connectionString: db.url, max: 2, timeoutMs: 2_000 });
});

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

/** A named statement of `pool`'s on one of its clients, as runNamed would send it. */
const onClient = <R>(pool: pg.Pool, client: pg.PoolClient, name: string, text: string, values: unknown[] = []) =>
  new Promise<{ rows: R[] }>((resolve, reject) => {
    client.query(namedQuery<R>(pool, name, text, values) as never, ((err: Error | null, res: { rows: R[] }) =>
      err ? reject(err) : resolve(res)) as never);
  });

const SHAPES = `select $1::int8 as big, $2::jsonb as doc, $3::timestamptz as at, $4::text[] as names,
  null::text as nothing, array_length($4::text[], 1) as n, $5::text as t`;

it('returns what pg returns for the same statement, typed by the pool parsers', async () => {
  const values = [9_007_199_254_740_991, JSON.stringify({ a: [1, 'x'], b: null }), '2026-11-24T12:34:56.789Z', ['f1', 'f"2', 'f,3'], 'é✓'];
  const ours = await runNamed<Record<string, unknown>>(pool, 'nq_shapes', SHAPES, values);
  const theirs = await pool.query({ text: SHAPES, values });
  expect(ours.rows).toEqual(theirs.rows);
  expect(ours.rows[0]).toMatchObject({ big: 9_007_199_254_740_991, doc: { a: [1, 'x'], b: null }, nothing: null, n: 3, t: 'é✓' });
  expect(ours.rows[0]!.at).toBeInstanceOf(Date);
  expect(ours.rowCount).toBe(1);
  expect(ours.command).toBe('SELECT');
  const many = await runNamed<{ i: number }>(pool, 'nq_series', 'select i from generate_series(1, $1::int) i', [5]);
  expect(many.rows.map((r) => r.i)).toEqual([1, 2, 3, 4, 5]);
  expect(many.rowCount).toBe(5);
  const none = await runNamed(pool, 'nq_series', 'select i from generate_series(1, $1::int) i', [0]);
  expect(none.rows).toEqual([]);
});

it('is described on its first run only, on every connection of the pool', async () => {
  const described = vi.spyOn(NamedQuery.prototype, 'handleRowDescription');
  try {
    // Two connections at once, several runs each: one description in all.
    await Promise.all(
      Array.from({ length: 8 }, (_, i) => runNamed<{ v: number }>(pool, 'nq_once', 'select $1::int + 1 as v, pg_sleep(0.01)', [i])),
    );
    const rows = await Promise.all(Array.from({ length: 6 }, (_, i) => runNamed<{ v: number }>(pool, 'nq_once', 'select $1::int + 1 as v, pg_sleep(0.01)', [i])));
    expect(rows.map((r) => r.rows[0]!.v)).toEqual([1, 2, 3, 4, 5, 6]);
    expect(described.mock.calls.length).toBeLessThanOrEqual(2); // the first run on each connection may race
    const before = described.mock.calls.length;
    for (let i = 0; i < 4; i++) await runNamed(pool, 'nq_once', 'select $1::int + 1 as v, pg_sleep(0.01)', [i]);
    expect(described.mock.calls.length).toBe(before);
  } finally {
    described.mockRestore();
  }
});

it('a result shape that changed under it fails once with a clear error, then is described again', async () => {
  await pool.query('create table nq_t (a int, b text)');
  await pool.query(`insert into nq_t values (1, 'one')`);
  const two = new pg.Pool({ connectionString: db.url, max: 2 });
  const star = 'select * from nq_t where a = $1';
  const a = await two.connect();
  const b = await two.connect();
  try {
    expect((await onClient(two, a, 'nq_star', star, [1])).rows).toEqual([{ a: 1, b: 'one' }]);
    await pool.query('alter table nq_t add column c int default 7');
    // The pool's other connection parses the statement afresh: three columns against the two described.
    await expect(onClient(two, b, 'nq_star', star, [1])).rejects.toThrow(/nq_star: the server sent 3 columns, not the 2 described before; retry/);
    expect((await onClient(two, b, 'nq_star', star, [1])).rows).toEqual([{ a: 1, b: 'one', c: 7 }]);
    // The connection that prepared it before is refused by the server, and stays usable.
    await expect(onClient(two, a, 'nq_star', star, [1])).rejects.toThrow(/cached plan must not change result type/);
    expect((await a.query('select 2 as x')).rows).toEqual([{ x: 2 }]);
  } finally {
    a.release();
    b.release();
    await two.end();
  }
});

it('keeps descriptions per pool: another database may answer the same text with other columns', async () => {
  const other = await freshDatabase({ migrated: false });
  const here = new pg.Pool({ connectionString: db.url, max: 1 });
  const there = new pg.Pool({ connectionString: other.url, max: 1 });
  try {
    await here.query('create table nq_p (a int)');
    await here.query('insert into nq_p values (1)');
    await there.query('create table nq_p (a int, b text)');
    await there.query(`insert into nq_p values (1, 'x')`);
    const text = 'select * from nq_p where a = $1';
    expect((await runNamed(here, 'nq_p', text, [1])).rows).toEqual([{ a: 1 }]);
    expect((await runNamed(there, 'nq_p', text, [1])).rows).toEqual([{ a: 1, b: 'x' }]);
    expect((await runNamed(here, 'nq_p', text, [1])).rows).toEqual([{ a: 1 }]);
  } finally {
    await here.end();
    await there.end();
    await other.drop();
  }
});

it('server errors and values that cannot be sent reject, and the connection goes on', async () => {
  const one = createPool({ connectionString: db.url, max: 1, timeoutMs: 2_000 });
  try {
    await expect(runNamed(one, 'nq_div', 'select 1 / $1::int as q', [0])).rejects.toMatchObject({ code: '22012' });
    expect((await runNamed<{ q: number }>(one, 'nq_div', 'select 1 / $1::int as q', [1])).rows).toEqual([{ q: 1 }]);
    const circular: Record<string, unknown> = {};
    circular.self = circular;
    await expect(runNamed(one, 'nq_json', 'select $1::jsonb as j', [circular])).rejects.toThrow(/circular/i);
    expect((await runNamed(one, 'nq_json', 'select $1::jsonb as j', [{ ok: true }])).rows).toEqual([{ j: { ok: true } }]);
    // One name, two texts: refused before anything is sent on a connection that has the
    // first; on a connection that has not (the pool replaced the one a bind error broke),
    // the new text is described anew, never read with the other text's columns.
    const conn = await one.connect();
    try {
      await onClient(one, conn, 'nq_two', 'select 1 as a');
      await expect(onClient(one, conn, 'nq_two', 'select 2 as b, 3 as c')).rejects.toThrow(/Prepared statements must be unique/);
    } finally {
      conn.release(true);
    }
    expect((await runNamed(one, 'nq_two', 'select 2 as b, 3 as c', [])).rows).toEqual([{ b: 2, c: 3 }]);
    expect((await one.query('select 3 as x')).rows).toEqual([{ x: 3 }]);
  } finally {
    await one.end();
  }
});

it('a statement cut off by the server timeout rejects, and the connection goes on', async () => {
  // statement_timeout (createPool's timeoutMs) answers first, as an error. pg's client-side
  // read timeout, for a server that answers nothing, is test/runtime/db-timeout.test.ts's
  // frozen PostgreSQL: its puts run through this class.
  const one = createPool({ connectionString: db.url, max: 1, timeoutMs: 300 });
  try {
    const t0 = Date.now();
    await expect(runNamed(one, 'nq_sleep', 'select pg_sleep($1::float8)', [5])).rejects.toMatchObject({ code: '57014' });
    expect(Date.now() - t0).toBeLessThan(2_000);
    expect((await runNamed<{ x: number }>(one, 'nq_after', 'select 4 as x', [])).rows).toEqual([{ x: 4 }]);
  } finally {
    await one.end();
  }
});
