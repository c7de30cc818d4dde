/**
 * Coalesced writes at the port (db/kysely/batch.ts, migration 0020), against a real
 * PostgreSQL: writes sent while the one lane is busy go as one batch statement, sorted by
 * record with one record's writes in arrival order; every write answers exactly what it
 * answers unbatched (put, append, claim, transaction, STALE, HELD, a rejected transaction);
 * a write that raises makes the batch run again one write at a time, so only it fails; a
 * batch answers each write's WAL position.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import type { ClaimWrite, TransactRequest, WriteRequest } from '../../db/port.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

interface Side {
  db: TestDb;
  pool: pg.Pool;
  pg: PgDb;
  sizes: number[];
}
let on: Side;
let off: Side;

async function side(batching: boolean): Promise<Side> {
  const db = await freshDatabase();
  const pool = createPool({ connectionString: db.url, max: 4, timeoutMs: 5_000 });
  const p = new PgDb(pool);
  const sizes: number[] = [];
  if (batching) p.batchWrites({ lanes: 1, onBatch: (n) => sizes.push(n) });
  // A database fault on one value, for the fallback test (a real trigger, no mock).
  await pool.query(`
    create function boom() returns trigger language plpgsql as $$
    begin
      if new.value::text = '"boom"' then raise exception 'boom on purpose'; end if;
      return new;
    end $$;
    create trigger boom before insert or update on fields for each row execute function boom();`);
  return { db, pool, pg: p, sizes };
}

beforeAll(async () => {
  [on, off] = await Promise.all([side(true), side(false)]);
  // Batching is on only once the first write told it the database is not Citus.
  await on.pg.writeField(put('warm', 'x', 0, 'warm'));
  await new Promise<void>((r) => {
    const wait = () => (on.pg.batchingWrites ? r() : setTimeout(wait, 5));
    wait();
  });
  on.sizes.length = 0;
}, 60_000);

afterAll(async () => {
  for (const s of [on, off]) {
    await s?.pool.end();
    await s?.db.drop();
  }
});

const put = (rid: string, field: string, expect: number | null, value: unknown, kind: 'versioned' | 'soft' = 'versioned'): WriteRequest => ({
  class: 'c',
  rid,
  field,
  kind,
  op: 'put',
  value,
  author: 'alice',
  identity_strength: 'verified',
  evidence: 'e',
  based_on: null,
  invocation: null,
  expectVersion: expect,
  expected_version: expect,
  premises: [],
  requiredCheckpoints: null,
});

const append = (rid: string, value: unknown): WriteRequest => ({ ...put(rid, 'log', null, value), kind: 'append', op: 'append' });

const claim = (rid: string, author: string, lease: number): ClaimWrite => ({
  class: 'c',
  rid,
  field: 'task',
  author,
  identity_strength: 'verified',
  lease_seconds: lease,
  invocation: null,
});

const txn = (rid: string, expect: number, value: unknown): TransactRequest => ({
  class: 'c',
  rid,
  txn: randomUUID(),
  author: 'alice',
  identity_strength: 'verified',
  stop: null,
  writes: [
    { op: 'put', field: 'a', kind: 'versioned', value, hasValue: true, evidence: 'e', based_on: null, invocation: null, expectVersion: expect, expected_version: expect, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'whole', value } },
    { op: 'append', field: 'log', kind: 'append', value: { t: value }, hasValue: true, evidence: null, based_on: null, invocation: null, expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'none' } },
  ],
});

type Op = (db: PgDb) => Promise<unknown>;

/** A result without the times that differ between two runs. */
const timeless = (r: unknown) => JSON.parse(JSON.stringify(r, (k, v) => (k === 'lease_expires_at' || k === 'expires_at' || k === 'updated_at' ? typeof v : v)));

async function history(s: Side, rids: string[]) {
  const { rows } = await s.pool.query(
    `select rid, field, op, outcome, version, record_version, value::text as value, author, expected_version, txn is not null as in_txn, txn_index, txn_failed
       from history where class = 'c' and rid = any($1) order by id`,
    [rids],
  );
  return rows;
}

test('writes sent while the lane is busy go as one batch and answer what they answer one by one', async () => {
  const tag = randomUUID().slice(0, 8);
  const r = (n: string) => `${tag}-${n}`;
  // Arrival order; the first takes the lane, the rest queue and go as one statement.
  const ops: Op[] = [
    (db) => db.writeField(put(r('a'), 'f', 0, 1)),
    (db) => db.writeField(put(r('b'), 'f', 0, 'b1')),
    (db) => db.writeField(put(r('a'), 'f', 1, 2)), // after the first, same record: applies
    (db) => db.writeField(put(r('a'), 'f', 1, 3)), // STALE: the write before it moved f to 2
    (db) => db.writeField(append(r('c'), { n: 1 })),
    (db) => db.claim(claim(r('d'), 'alice', 30)),
    (db) => db.claim(claim(r('d'), 'bob', 30)), // HELD by alice
    (db) => db.transact(txn(r('e'), 0, 'e1')),
    (db) => db.transact(txn(r('e'), 0, 'e2')), // rejected: STALE at index 0
    (db) => db.writeField(put(r('b'), 's', null, { soft: true }, 'soft')),
    (db) => db.writeField(append(r('c'), { n: 2 })),
  ];
  const batched = await Promise.all(ops.map((op) => op(on.pg)));
  const single: unknown[] = [];
  for (const op of ops) single.push(await op(off.pg));
  expect(on.sizes).toEqual([1, ops.length - 1]);
  expect(batched.map(timeless)).toEqual(single.map(timeless));
  expect(batched[3]).toMatchObject({ outcome: 'stale', current_version: 2 });
  expect(batched[6]).toMatchObject({ outcome: 'held', owner: 'alice' });
  expect(batched[8]).toMatchObject({ outcome: 'rejected', index: 0 });

  // Each record's history is the same, in the same order; across records the batch went by record.
  const rids = ['a', 'b', 'c', 'd', 'e'].map(r);
  const hOn = await history(on, rids);
  const hOff = await history(off, rids);
  for (const rid of rids) expect(hOn.filter((h) => h.rid === rid)).toEqual(hOff.filter((h) => h.rid === rid));
  // The first write went alone (record a); the batch then took b before c, a's later writes before b's.
  const order = hOn.slice(1).map((h) => h.rid);
  expect(order).toEqual([...order].sort());
});

test('a write that raises fails alone: the batch runs again write by write', async () => {
  on.sizes.length = 0;
  const tag = randomUUID().slice(0, 8);
  const ops = [
    on.pg.writeField(put(`${tag}-0`, 'f', 0, 'first')),
    on.pg.writeField(put(`${tag}-1`, 'f', 0, 'ok 1')),
    on.pg.writeField(put(`${tag}-2`, 'f', 0, 'boom')),
    on.pg.writeField(put(`${tag}-3`, 'f', 0, 'ok 3')),
    on.pg.writeField(put(`${tag}-1`, 'f', 1, 'ok 1 again')),
  ];
  const out = await Promise.allSettled(ops);
  expect(out.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
  expect((out[2] as PromiseRejectedResult).reason.message).toMatch(/boom on purpose/);
  expect((out[4] as PromiseFulfilledResult<unknown>).value).toMatchObject({ outcome: 'applied', version: 2 });
  // One alone, the batch of four (rolled back), then its four again one by one.
  expect(on.sizes).toEqual([1, 4, 1, 1, 1, 1]);
  const { rows } = await on.pool.query(`select rid, version from history where class = 'c' and rid like $1 order by id`, [`${tag}-%`]);
  expect(rows.map((x) => `${x.rid.slice(tag.length + 1)}@${x.version}`).sort()).toEqual(['0@1', '1@1', '1@2', '3@1']);
});

test("each write of a batch answers a WAL position at or after its batch's commit", async () => {
  on.pg.writeLsn = 'on';
  try {
    on.sizes.length = 0;
    const tag = randomUUID().slice(0, 8);
    const sessions = Array.from({ length: 4 }, () => on.pg.session(null));
    await Promise.all(sessions.map((s, i) => s.writeField(put(`${tag}-${i}`, 'f', 0, i))));
    expect(on.sizes).toEqual([1, 3]);
    const { rows } = await on.pool.query('select pg_current_wal_insert_lsn()::text as now');
    for (const s of sessions) {
      expect(s.lsn).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
      const { rows: cmp } = await on.pool.query('select $1::pg_lsn <= $2::pg_lsn as ok', [s.lsn, rows[0].now]);
      expect(cmp[0].ok).toBe(true);
    }
    // The three batched writes share the position read after their one commit.
    expect(new Set(sessions.slice(1).map((s) => s.lsn)).size).toBe(1);
  } finally {
    on.pg.writeLsn = 'auto';
  }
});

test('a relaxed write queued with strict ones goes in their batch, whose one transaction is strict', async () => {
  on.sizes.length = 0;
  const tag = randomUUID().slice(0, 8);
  // A batch commits relaxed only when every write in it is relaxed (batch.ts BATCH_RELAXED;
  // test/db/write-batch-durability.test.ts reads the setting at commit): one strict write
  // makes the whole batch wait for its WAL flush, so the relaxed write shares it safely.
  const ops = [
    on.pg.writeField(put(`${tag}-0`, 'f', 0, 'first')),
    on.pg.writeField(put(`${tag}-1`, 'f', 0, 'strict 1')),
    on.pg.writeField({ ...put(`${tag}-2`, 's', null, 'relaxed', 'soft'), relaxed: true }),
    on.pg.writeField(put(`${tag}-3`, 'f', 0, 'strict 3')),
  ];
  const out = await Promise.all(ops);
  expect(out.map((o) => o.outcome)).toEqual(['applied', 'applied', 'applied', 'applied']);
  // The first alone, the other three together.
  expect(on.sizes).toEqual([1, 3]);
  const { rows } = await on.pool.query(`select rid, tx::text from history where class = 'c' and rid like $1 order by id`, [`${tag}-%`]);
  const tx = Object.fromEntries(rows.map((x) => [x.rid.slice(tag.length + 1), x.tx]));
  expect(tx['2']).toBe(tx['1']);
  expect(tx['3']).toBe(tx['1']);
  expect(tx['0']).not.toBe(tx['1']);
});
