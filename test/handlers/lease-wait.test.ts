/**
 * "A lease is held" is judged by the database clock AFTER the record's lock is taken (issue
 * 32; migration 0010 kslate_lock / kslate_lease_held): a lease that expires while a writer
 * waits for the lock is not held when the writer decides. A second connection holds the
 * record's row lock while the writer waits, moves the lease's expiry to just ahead of the
 * database clock (so the writer's own statement began while the lease was still held), lets
 * it pass, and releases the lock.
 */
import pg from 'pg';
import { expect, test } from 'vitest';
import { caseflow } from '../fixtures/flow-classes.js';
import { useGatewayWithSql, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
let sql: pg.Client;

useGatewayWithSql((g, c) => ((t = g), (sql = c)), [caseflow]);

/** Poll `check` until it holds, failing after `ms`. */
async function until(what: string, check: () => Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/**
 * Run `write` while another transaction holds record `id`'s row lock; once the write waits
 * for that lock, the lease on `task` is set to expire 300 ms later, and the lock is released
 * only after the database clock has passed that expiry.
 */
async function whileLeaseRunsOut(id: string, statement: string, write: () => Promise<{ status: number; body: any }>) {
  const blocker = new pg.Client({ connectionString: t.db.url });
  await blocker.connect();
  try {
    await blocker.query('begin');
    await blocker.query(`select 1 from records where class = 'caseflow' and rid = $1 for update`, [id]);
    const pending = write();
    // On Citus the write is delegated to the record's worker and waits there: the
    // cluster-wide view of every node's sessions (citus_stat_activity) shows it.
    const citus = (await sql.query(`select 1 from pg_extension where extname = 'citus'`)).rows.length > 0;
    const activity = citus ? 'citus_stat_activity' : 'pg_stat_activity';
    await until(`the ${statement} to wait for the record lock`, async () => {
      const { rows } = await sql.query(
        `select 1 from ${activity} where datname = current_database() and wait_event_type = 'Lock' and query like $1`,
        [`%${statement}%`],
      );
      return rows.length > 0;
    });
    // The expiry read from the database clock first, then set (Citus refuses a VOLATILE
    // function such as clock_timestamp() in an UPDATE of a distributed table).
    const soon = (await blocker.query<{ at: string }>(`select (clock_timestamp() + interval '300 milliseconds')::text as at`)).rows[0].at;
    const { rows } = await blocker.query<{ until: Date }>(
      `update fields f set lease_expires_at = $2::timestamptz
       from records r where r.rid = f.rid and r.id = f.record_id and r.class = 'caseflow' and r.rid = $1 and f.name = 'task'
       returning f.lease_expires_at as until`,
      [id, soon],
    );
    expect(rows).toHaveLength(1);
    await until('the lease to run out', async () => (await sql.query(`select clock_timestamp() > $1 as past`, [rows[0].until])).rows[0].past);
    await blocker.query('commit');
    return await pending;
  } finally {
    await blocker.end();
  }
}

test('a claim that waited for the lock while the lease ran out takes the task over', async () => {
  const taken = await t.call('alice', 'PUT', '/v1/records/caseflow/lw-claim/fields/task/claim', { lease_seconds: 600 });
  expect(taken.status).toBe(201);
  const res = await whileLeaseRunsOut('lw-claim', 'kslate_claim', () =>
    t.call('carol', 'PUT', '/v1/records/caseflow/lw-claim/fields/task/claim', { lease_seconds: 60 }),
  );
  expect(res.body).toMatchObject({ owner: 'apikey:carol', took_over_from: 'apikey:alice', version: 2 });
  expect(res.status).toBe(200);
});

test('a fenced write that waited for the lock while its lease ran out is STALE_PREMISE', async () => {
  const taken = await t.call('alice', 'PUT', '/v1/records/caseflow/lw-fence/fields/task/claim', { lease_seconds: 600 });
  expect(taken.status).toBe(201);
  const res = await whileLeaseRunsOut('lw-fence', 'kslate_write', () =>
    t.call('alice', 'PUT', '/v1/records/caseflow/lw-fence/fields/title', {
      value: 'done while I held it?',
      expected_version: 0,
      based_on: [{ field: 'task', version: taken.body.version, kind: 'fence' }],
    }),
  );
  expect(res.body).toMatchObject({ error: 'STALE_PREMISE', moved: [{ field: 'task', your_version: 1, current_version: 1 }] });
  expect(res.status).toBe(409);
  const title = await t.call('alice', 'GET', '/v1/records/caseflow/lw-fence?fields=title');
  expect(title.body.fields).toEqual({});
});
