/** The sweep bounds read-set storage: entries past the inference window are deleted. */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { createPool, PgDb } from '../../db/kysely/index.js';
import { sweep } from '../../worker/sweep.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { quietLog } from '../setup/gateway.js';

let db: TestDb;
let pgdb: PgDb;
beforeAll(async () => {
  db = await freshDatabase();
  pgdb = new PgDb(createPool({ connectionString: db.url, max: 4 }));
});
afterAll(async () => {
  await pgdb.kysely.destroy();
  await db.drop();
});

test('sweep deletes read sets and scope owners idle past 15 minutes and keeps fresh ones', async () => {
  await pgdb.recordReads('apikey:alice', 's-old', 'c', [
    { rid: 'r1', field: 'a', version: 1 },
    { rid: 'r1', field: 'b', version: 2 },
  ]);
  await pgdb.recordReads('apikey:alice', 's-new', 'c', [{ rid: 'r1', field: 'a', version: 1 }]);
  await pgdb.claimScope('s-old', 'apikey:alice', 900);
  await pgdb.claimScope('s-new', 'apikey:alice', 900);
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query(`update read_sets set read_at = now() - interval '16 minutes' where scope = 's-old'`);
  await c.query(`update scope_owners set last_used_at = now() - interval '16 minutes' where scope = 's-old'`);

  const report = await sweep({ db: pgdb, log: quietLog, holder: 'test/prune' });
  expect(report).toMatchObject({ ran: true, prunedReads: 3 });
  const left = await c.query(`select scope, field from read_sets order by scope, field`);
  expect(left.rows).toEqual([{ scope: 's-new', field: 'a' }]);
  const owners = await c.query(`select scope from scope_owners`);
  expect(owners.rows).toEqual([{ scope: 's-new' }]);
  await c.end();
});

test('a read set of 10,000 fields in one scope does not grow what a write on one record reads', async () => {
  // Inference looks up (author, scope, class, rid) by primary-key prefix: only that record's rows.
  const reads = Array.from({ length: 10_000 }, (_, i) => ({ rid: `r${i % 1000}`, field: `f${i}`, version: 1 }));
  await pgdb.recordReads('apikey:bob', 'big', 'c', reads);
  const set = await pgdb.readSet('apikey:bob', 'big', 'c', 'r7', 900);
  expect(set).toHaveLength(10);
  const c = new pg.Client({ connectionString: db.url });
  await c.connect();
  await c.query('analyze read_sets');
  const plan = await c.query(
    `explain select field, version from read_sets where author = 'apikey:bob' and scope = 'big' and class = 'c' and rid = 'r7' and read_at > now() - interval '900 seconds'`,
  );
  const text = plan.rows.map((r) => r['QUERY PLAN']).join('\n');
  expect(text).not.toMatch(/Seq Scan/);
  await c.end();
});
