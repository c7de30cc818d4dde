/**
 * Relaxed durability on Citus (issue 38): not yet relaxed there. A write of a relaxed field
 * commits on the worker holding its record, which a SET LOCAL on the coordinator does not
 * reach, and a statement that is more than the write function's call may lose its one-hop
 * delegation; so on Citus the gateway sends relaxed writes as the strict statement
 * (db/kysely/writes.ts, relaxable) and they are applied as strict writes.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { migrate } from '../../db/migrate.js';
import { CitusCluster, testPool } from './cluster.js';

let cluster: CitusCluster;
let db: PgDb;

beforeAll(async () => {
  cluster = await CitusCluster.start();
  const url = await cluster.createDatabase('kslate_durability');
  const admin = testPool({ connectionString: url, max: 1 });
  await migrate(admin);
  await admin.end();
  // One connection: the statements it prepared are the ones the writes sent.
  db = new PgDb(createPool({ connectionString: url, max: 1, timeoutMs: 60_000 }));
});

afterAll(async () => {
  await db?.kysely.destroy();
  await cluster?.stop();
});

it('a relaxed put and a relaxed transaction are sent as the strict statements and applied', async () => {
  const base = {
    class: 'c', rid: 'r1', field: 'cursor', kind: 'soft' as const, op: 'put' as const, author: 'apikey:a', identity_strength: 'shared-secret',
    evidence: null, based_on: null, invocation: null, expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null,
  };
  const w = await db.writeField({ ...base, value: 1, relaxed: true });
  expect(w).toMatchObject({ outcome: 'applied', version: 1 });
  const t = await db.transact({
    class: 'c', rid: 'r2', txn: crypto.randomUUID(), author: 'apikey:a', identity_strength: 'shared-secret', stop: null, relaxed: true,
    writes: [{ op: 'put', field: 'cursor', kind: 'soft', value: 2, hasValue: true, evidence: null, based_on: null, invocation: null,
      expectVersion: null, expected_version: null, premises: [], requiredCheckpoints: null, lease_seconds: null, kept: { kind: 'whole', value: 2 } }],
  });
  expect(t).toMatchObject({ outcome: 'applied' });
  const { rows } = await db.pool.query<{ name: string }>(`select name from pg_prepared_statements where name like 'kslate_%' order by name`);
  const names = rows.map((r) => r.name);
  expect(names).toEqual(expect.arrayContaining(['kslate_write', 'kslate_transact']));
  expect(names.filter((n) => n.endsWith('_relaxed'))).toEqual([]);
});
