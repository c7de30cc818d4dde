/**
 * Keyed writes in write batches at the port (db/kysely/batch.ts, migration 0022; issue 38
 * item 1), against a real PostgreSQL: keyed puts, claims and transactions sent while the one
 * lane is busy go in the batch statement with the unkeyed ones, and each answers what it
 * answers sent one after the other unbatched: fresh, a replay (a key kept before, or by an
 * earlier write of the same batch with the same digest: as if sent after it committed),
 * IDEMPOTENCY_KEY_REUSED (same key, another digest, also within one batch) and IN_USE (the key
 * held by another transaction). A batched key is held until the batch's one commit, which keeps
 * the write, its key and its result together, and the write is answered only after it; a batch
 * that rolls back keeps no key, and its keyed writes run again alone.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { KeyRefusal, type ClaimWrite, type KeyedRun, type TransactRequest, type WriteRequest } from '../../db/port.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { settled } from '../setup/wait.js';

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
  const pool = createPool({ connectionString: db.url, max: 4, timeoutMs: 10_000 });
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
  await settled(async () => on.pg.batchingWrites, (b) => b);
  on.sizes.length = 0;
}, 60_000);

afterAll(async () => {
  for (const s of [on, off]) {
    await s?.pool.end();
    await s?.db.drop();
  }
});

const put = (rid: string, field: string, expect: number | null, value: unknown): WriteRequest => ({
  class: 'c',
  rid,
  field,
  kind: 'versioned',
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

const claim = (rid: string): ClaimWrite => ({
  class: 'c',
  rid,
  field: 'task',
  author: 'alice',
  identity_strength: 'verified',
  lease_seconds: 60,
  invocation: null,
});

const txn = (rid: string, value: unknown, id: string): TransactRequest => ({
  class: 'c',
  rid,
  txn: id,
  author: 'alice',
  identity_strength: 'verified',
  stop: null,
  writes: [
    { op: 'put', field: 'a', kind: 'versioned', value, hasValue: true, evidence: 'e', based_on: null, invocation: null, expectVersion: 0, expected_version: 0, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'whole', value } },
    { op: 'append', field: 'log', kind: 'append', value: { t: value }, hasValue: true, evidence: null, based_on: null, invocation: null, expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'none' } },
  ],
});

const run = (rid: string, key: string, digest: string): KeyedRun => ({
  key: { author: 'alice', key, digest, ttlSeconds: 3600, rid },
  ran: false,
  replayed: false,
  rejection: null,
});

/** What a keyed write answered: its key's state and the result (times left out). */
async function outcome(r: KeyedRun, p: Promise<unknown>): Promise<unknown> {
  try {
    const v = await p;
    return { state: r.replayed ? 'replay' : 'fresh', ran: r.ran, value: timeless(v) };
  } catch (e) {
    if (e instanceof KeyRefusal) return { state: e.state, ran: r.ran };
    throw e;
  }
}

const timeless = (r: unknown) => JSON.parse(JSON.stringify(r, (k, v) => (k === 'lease_expires_at' || k === 'expires_at' || k === 'updated_at' ? typeof v : v)));

/** Another session holding `key`'s lock, as a keyed write holds it (migration 0016's lock). */
async function holdKey(s: Side, key: string): Promise<pg.Client> {
  const c = new pg.Client({ connectionString: s.db.url });
  await c.connect();
  await c.query(`select pg_advisory_lock(hashtextextended('alice' || chr(10) || $1, 11))`, [key]);
  return c;
}

test('keyed writes go in the batch and answer what they answer one by one: fresh, replay, REUSED, IN_USE', async () => {
  const tag = randomUUID().slice(0, 8);
  const r = (n: string) => `${tag}-${n}`;
  const k = (n: string) => `${tag}-key-${n}`;
  // Arrival order; the first takes the lane, the rest queue and go as one statement.
  type Op = { key: [string, string, string] | null; call: (db: PgDb) => Promise<unknown> };
  const ops: Op[] = [];
  const keyed = (rid: string, key: string, digest: string, call: (db: PgDb) => Promise<unknown>) => ops.push({ key: [rid, key, digest], call });
  /** Send one op on `db`: unkeyed, its result; keyed (a fresh KeyedRun), its outcome. */
  const send = (db: PgDb, op: Op): Promise<unknown> => {
    if (op.key === null) return op.call(db).then(timeless);
    const kr = run(...op.key);
    return outcome(kr, op.call(db.keyed(kr)));
  };
  ops.push({ key: null, call: (db) => db.writeField(put(r('lane'), 'f', 0, 'lane')) });
  keyed(r('a'), k('1'), 'd1', (db) => db.writeField(put(r('a'), 'f', 0, 'a1'))); // fresh
  keyed(r('a'), k('1'), 'd1', (db) => db.writeField(put(r('a'), 'f', 0, 'a1'))); // same key, same digest: the replay of the one before
  keyed(r('a'), k('1'), 'd2', (db) => db.writeField(put(r('a'), 'f', 1, 'a2'))); // same key, another digest: REUSED
  ops.push({ key: null, call: (db) => db.writeField(put(r('a'), 'f', 1, 'a3')) }); // unkeyed, after the first: applies
  keyed(r('b'), k('held'), 'd', (db) => db.writeField(put(r('b'), 'f', 0, 'b1'))); // key held elsewhere: IN_USE
  keyed(r('c'), k('kept'), 'd', (db) => db.writeField(put(r('c'), 'f', 0, 'c1'))); // kept before: replay
  keyed(r('d'), k('claim'), 'd', (db) => db.claim(claim(r('d'))));
  keyed(r('d'), k('claim'), 'd', (db) => db.claim(claim(r('d')))); // replay of the claim
  const tid = randomUUID(); // the transaction id, drawn once: the same request on both sides
  keyed(r('e'), k('txn'), 'd', (db) => db.transact(txn(r('e'), 'e1', tid)));

  const results: Record<'on' | 'off', unknown[]> = { on: [], off: [] };
  for (const s of [on, off]) {
    const mode = s === on ? 'on' : 'off';
    // The kept key: its write sent earlier, alone.
    await s.pg.keyed(run(r('c'), k('kept'), 'd')).writeField(put(r('c'), 'f', 0, 'c1'));
    const holder = await holdKey(s, k('held'));
    try {
      s.sizes.length = 0;
      // Batched: every write sent at once (the port queues them as they are called).
      if (mode === 'on') results.on = await Promise.all(ops.map((op) => send(s.pg, op)));
      else for (const op of ops) results.off.push(await send(s.pg, op));
    } finally {
      await holder.end();
    }
  }
  // One write alone (the lane), the other nine in one statement.
  expect(on.sizes).toEqual([1, ops.length - 1]);
  expect(results.on).toEqual(results.off);
  expect(results.on[1]).toMatchObject({ state: 'fresh', value: { outcome: 'applied', version: 1 } });
  expect(results.on[2]).toEqual({ ...(results.on[1] as object), state: 'replay' });
  expect(results.on[3]).toEqual({ state: 'reused', ran: true });
  expect(results.on[4]).toMatchObject({ outcome: 'applied', version: 2 });
  expect(results.on[5]).toEqual({ state: 'in_use', ran: true });
  expect(results.on[6]).toMatchObject({ state: 'replay', value: { outcome: 'applied', version: 1 } });
  expect(results.on[7]).toMatchObject({ state: 'fresh', value: { outcome: 'claim', owner: 'alice' } });
  expect(results.on[8]).toEqual({ ...(results.on[7] as object), state: 'replay' });
  expect(results.on[9]).toMatchObject({ state: 'fresh', value: { outcome: 'applied' } });

  // The same rows on both sides: one history row per write that ran, the keys kept.
  for (const s of [on, off]) {
    const h = await s.pool.query(`select rid, op, outcome, version from history where class = 'c' and rid like $1 order by rid, id`, [`${tag}-%`]);
    expect(h.rows.map((x) => `${x.rid.slice(tag.length + 1)} ${x.op} ${x.outcome} ${x.version}`)).toEqual([
      'a put applied 1',
      'a put applied 2',
      'c put applied 1',
      'd claim applied 1',
      'e put applied 1',
      'e append applied 1',
      'lane put applied 1',
    ]);
    const keys = await s.pool.query(`select key, digest, rid from idempotency_keys where key like $1 order by key`, [`${tag}-%`]);
    expect(keys.rows).toEqual([
      { key: k('1'), digest: 'd1', rid: r('a') },
      { key: k('claim'), digest: 'd', rid: r('d') },
      { key: k('kept'), digest: 'd', rid: r('c') },
      { key: k('txn'), digest: 'd', rid: r('e') },
    ]);
  }
});

test('a batched key is held until the batch commits, and its write is answered after the commit', async () => {
  const tag = randomUUID().slice(0, 8);
  const key = `${tag}-key`;
  // The batch's last record, locked by another session: the batch waits there, after its keyed write.
  await on.pg.writeField(put(`${tag}-z`, 'f', 0, 'z1'));
  const locker = new pg.Client({ connectionString: on.db.url });
  const sql = new pg.Client({ connectionString: on.db.url });
  await Promise.all([locker.connect(), sql.connect()]);
  try {
    await locker.query('begin');
    await locker.query(`select 1 from records where class = 'c' and rid = $1 for update`, [`${tag}-z`]);
    on.sizes.length = 0;
    const lane = on.pg.writeField(put(`${tag}-0`, 'f', 0, 'lane'));
    const kr = run(`${tag}-a`, key, 'd');
    let answered = false;
    const keyed = on.pg
      .keyed(kr)
      .writeField(put(`${tag}-a`, 'f', 0, 'a1'))
      .finally(() => (answered = true));
    const last = on.pg.writeField(put(`${tag}-z`, 'f', 1, 'z2'));
    await lane;
    await settled(
      async () => (await sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and query like '%kslate_write_batch%'`)).rows[0].n,
      (n) => n === 1,
    );
    // The batch has applied the keyed write and holds its key, uncommitted: another
    // statement with that key is IN_USE, and neither the key nor the write is visible yet.
    const again = await sql.query(
      `select state from kslate_write_keyed('c', $1, 'f', 'versioned', 'put', 0, null, null, 'alice', 'verified', '"a1"', 'e', null, null, 0, null, $2, 'd', 3600)`,
      [`${tag}-a`, key],
    );
    expect(again.rows).toEqual([{ state: 'in_use' }]);
    expect((await sql.query(`select count(*)::int as n from idempotency_keys where key = $1`, [key])).rows[0].n).toBe(0);
    expect((await sql.query(`select count(*)::int as n from history where rid = $1`, [`${tag}-a`])).rows[0].n).toBe(0);
    expect(answered).toBe(false);
    await locker.query('commit');
    expect(await keyed).toMatchObject({ outcome: 'applied', version: 1 });
    expect(await last).toMatchObject({ outcome: 'applied', version: 2 });
    expect(on.sizes).toEqual([1, 2]);
    // Committed with the write: the key, its result, and a replay from here on.
    expect((await sql.query(`select digest from idempotency_keys where key = $1`, [key])).rows).toEqual([{ digest: 'd' }]);
    const replay = await sql.query(
      `select state, result from kslate_write_keyed('c', $1, 'f', 'versioned', 'put', 0, null, null, 'alice', 'verified', '"a1"', 'e', null, null, 0, null, $2, 'd', 3600)`,
      [`${tag}-a`, key],
    );
    expect(replay.rows[0].state).toBe('replay');
    expect(replay.rows[0].result[0]).toMatchObject({ outcome: 'applied', version: 1 });
  } finally {
    await locker.end();
    await sql.end();
  }
});

test('a batch that rolls back keeps no key: its keyed writes run again alone, once', async () => {
  const tag = randomUUID().slice(0, 8);
  on.sizes.length = 0;
  const kr = run(`${tag}-a`, `${tag}-key`, 'd');
  const out = await Promise.allSettled([
    on.pg.writeField(put(`${tag}-0`, 'f', 0, 'lane')),
    on.pg.keyed(kr).writeField(put(`${tag}-a`, 'f', 0, 'a1')),
    on.pg.writeField(put(`${tag}-b`, 'f', 0, 'boom')),
  ]);
  expect(out.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
  expect((out[1] as PromiseFulfilledResult<unknown>).value).toMatchObject({ outcome: 'applied', version: 1 });
  expect(kr.replayed).toBe(false);
  // One alone, the batch of two (rolled back), then its two again one by one.
  expect(on.sizes).toEqual([1, 2, 1, 1]);
  const h = await on.pool.query(`select outcome, version from history where rid = $1`, [`${tag}-a`]);
  expect(h.rows).toEqual([{ outcome: 'applied', version: 1 }]);
  const keys = await on.pool.query(`select digest from idempotency_keys where key = $1`, [`${tag}-key`]);
  expect(keys.rows).toEqual([{ digest: 'd' }]);
});

test("a rolled-back batch's keyed write, sent again alone, waits for its key instead of answering IN_USE", async () => {
  // The error of a batch reaches the gateway before the batch's backend has released the key's
  // lock (PostgreSQL reports, then aborts). Another session holding the key stands in for that
  // backend here: the keyed write sent again alone must wait for the key (migration 0026), not
  // answer IDEMPOTENCY_KEY_IN_USE for a key held only by its own rolled-back batch.
  const tag = randomUUID().slice(0, 8);
  const key = `${tag}-key`;
  const holder = new pg.Client({ connectionString: on.db.url });
  const sql = new pg.Client({ connectionString: on.db.url });
  await Promise.all([holder.connect(), sql.connect()]);
  try {
    await holder.query('begin');
    const held = await holder.query(`select state from kslate_idempotency_begin($1, 'alice', $2, 'd')`, [`${tag}-a`, key]);
    expect(held.rows).toEqual([{ state: 'fresh' }]);
    on.sizes.length = 0;
    const kr = run(`${tag}-a`, key, 'd');
    const out = Promise.allSettled([
      on.pg.writeField(put(`${tag}-0`, 'f', 0, 'lane')),
      on.pg.keyed(kr).writeField(put(`${tag}-a`, 'f', 0, 'a1')),
      on.pg.writeField(put(`${tag}-b`, 'f', 0, 'boom')),
    ]);
    // The fallback's wait for the key: one backend waiting on an advisory lock. Without the
    // wait the writes settle first, the keyed one refused IN_USE.
    await Promise.race([
      settled(
        async () => (await sql.query(`select count(*)::int as n from pg_stat_activity where wait_event_type = 'Lock' and wait_event = 'advisory'`)).rows[0].n,
        (n) => n === 1,
      ),
      out.then((o) => expect.fail(`settled while the key was held: ${JSON.stringify(o.map((x) => (x.status === 'rejected' ? String(x.reason) : x.status)))}`)),
    ]);
    await holder.query('rollback');
    const settledOut = await out;
    expect(settledOut.map((o) => o.status)).toEqual(['fulfilled', 'fulfilled', 'rejected']);
    expect((settledOut[1] as PromiseFulfilledResult<unknown>).value).toMatchObject({ outcome: 'applied', version: 1 });
    expect(on.sizes).toEqual([1, 2, 1, 1]);
    expect((await sql.query(`select digest from idempotency_keys where key = $1`, [key])).rows).toEqual([{ digest: 'd' }]);
  } finally {
    await holder.end();
    await sql.end();
  }
});

test('a keyed refusal decided before its write keeps its answer as sent, with its history row, through the same frame', async () => {
  // kslate_idempotency_answer (alone, never batched) now runs 0016's frame through kslate_keyed.
  const tag = randomUUID().slice(0, 8);
  const rid = `${tag}-r`;
  const body = JSON.stringify({ error: 'EVIDENCE_REQUIRED', message: 'no evidence' });
  const refuse = async (digest: string) => {
    const kr = run(rid, `${tag}-key`, digest);
    const db = on.pg.keyed(kr);
    await db.insertRejection({ class: 'c', rid, field: 'f', op: 'put', outcome: 'evidence_required', version: null, value: { kind: 'whole', value: 'v' }, author: 'alice', identity_strength: 'verified', expected_version: 0 });
    try {
      await db.keepAnswer(kr, 400, body);
      return { state: 'kept', ran: kr.ran };
    } catch (e) {
      if (!(e instanceof KeyRefusal)) throw e;
      return { state: e.state, status: e.status, body: e.body };
    }
  };
  expect(await refuse('d')).toEqual({ state: 'kept', ran: true });
  expect(await refuse('d')).toEqual({ state: 'replay', status: 400, body });
  expect(await refuse('other')).toEqual({ state: 'reused', status: null, body: null });
  const h = await on.pool.query(`select op, outcome, value::text as value, expected_version from history where rid = $1`, [rid]);
  expect(h.rows).toEqual([{ op: 'put', outcome: 'evidence_required', value: '"v"', expected_version: 0 }]);
  const k = await on.pool.query(`select status, body, result from idempotency_keys where key = $1`, [`${tag}-key`]);
  expect(k.rows).toEqual([{ status: 400, body, result: null }]);
});
