/**
 * Relaxed durability with coalesced writes (issues 38 items 1 and 2; db/kysely/batch.ts): the
 * relaxed form of a write's statement is batched as its strict form is; a batch of relaxed
 * writes only commits with synchronous_commit off, a batch with one strict write commits
 * strict as a whole. Observed at commit by a deferred constraint trigger on history, as in
 * test/handlers/durability.test.ts.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import type { TransactRequest, WriteRequest } from '../../db/port.js';
import { freshDatabase, type TestDb } from '../setup/db.js';

let db: TestDb;
let pool: pg.Pool;
let p: PgDb;
const sizes: number[] = [];

beforeAll(async () => {
  db = await freshDatabase();
  pool = createPool({ connectionString: db.url, max: 4, timeoutMs: 5_000 });
  p = new PgDb(pool);
  p.batchWrites({ lanes: 1, onBatch: (n) => sizes.push(n) });
  await pool.query(`
    create table durability_probe (id bigserial primary key, rid text, field text, sc text);
    create function durability_probe() returns trigger language plpgsql as $$
    begin
      insert into durability_probe (rid, field, sc) values (new.rid, new.field, current_setting('synchronous_commit'));
      return null;
    end $$;
    create constraint trigger durability_probe after insert on history
      deferrable initially deferred for each row execute function durability_probe();`);
  // Batching is on only once the first write told it the database is not Citus.
  await p.writeField(put('warm', 'x', false));
  await new Promise<void>((r) => {
    const wait = () => (p.batchingWrites ? r() : setTimeout(wait, 5));
    wait();
  });
}, 60_000);

afterAll(async () => {
  await pool?.end();
  await db?.drop();
});

const put = (rid: string, field: string, relaxed: boolean): WriteRequest => ({
  class: 'c', rid, field, kind: 'soft', op: 'put', value: { rid }, author: 'alice', identity_strength: 'verified', evidence: null,
  based_on: null, invocation: null, expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null, relaxed,
});

const txn = (rid: string, relaxed: boolean): TransactRequest => ({
  class: 'c', rid, txn: randomUUID(), author: 'alice', identity_strength: 'verified', stop: null, relaxed,
  writes: [{ op: 'put', field: 't', kind: 'soft', value: 1, hasValue: true, evidence: null, based_on: null, invocation: null,
    expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'whole', value: 1 } }],
});

async function commits(tag: string): Promise<Record<string, string>> {
  const { rows } = await pool.query(`select rid, sc from durability_probe where rid like $1`, [`${tag}-%`]);
  return Object.fromEntries(rows.map((r) => [r.rid.slice(tag.length + 1), r.sc]));
}

test('a batch of relaxed writes only commits with synchronous_commit off', async () => {
  sizes.length = 0;
  const tag = randomUUID().slice(0, 8);
  await Promise.all([
    p.writeField(put(`${tag}-0`, 'f', true)), // alone: takes the lane
    p.writeField(put(`${tag}-1`, 'f', true)),
    p.writeField(put(`${tag}-2`, 'f', true)),
    p.transact(txn(`${tag}-3`, true)),
  ]);
  expect(sizes).toEqual([1, 3]);
  expect(await commits(tag)).toEqual({ 0: 'off', 1: 'off', 2: 'off', 3: 'off' });
});

test('one strict write makes its batch strict; the relaxed write alone before it stays relaxed', async () => {
  sizes.length = 0;
  const tag = randomUUID().slice(0, 8);
  await Promise.all([
    p.writeField(put(`${tag}-0`, 'f', true)), // alone
    p.writeField(put(`${tag}-1`, 'f', true)),
    p.writeField(put(`${tag}-2`, 'f', false)),
    p.transact(txn(`${tag}-3`, true)),
  ]);
  expect(sizes).toEqual([1, 3]);
  expect(await commits(tag)).toEqual({ 0: 'off', 1: 'on', 2: 'on', 3: 'on' });
});
