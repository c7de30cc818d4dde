/**
 * A connection to PostgreSQL that ends while a write is in flight (here: its backend is
 * terminated while the write waits for a row lock). The gateway cannot know whether the
 * statement committed before the connection went, so the 503 says a write may have been
 * applied (read before retrying), like the --db-timeout answer, never just "retry shortly";
 * and, like every 503, it carries Retry-After.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { settled } from '../setup/wait.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident]);
});
afterAll(() => t?.close());

it('a write whose connection is lost mid-statement: 503 saying it may have been applied, with Retry-After', async () => {
  expect((await t.call('alice', 'PUT', '/v1/records/incident/lost/fields/title', { value: 'a', expected_version: 0 })).status).toBe(201);
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    await c.query('begin');
    await c.query(`select 1 from records where class = 'incident' and rid = 'lost' for update`);
    const pending = fetch(`${t.url}/v1/records/incident/lost/fields/title`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
      body: JSON.stringify({ value: 'b', expected_version: 1 }),
    });
    // The gateway's statement is in PostgreSQL, waiting for the lock held above: end its connection.
    await settled(
      async () =>
        (await c.query(
          `select pg_terminate_backend(pid) as done from pg_stat_activity
            where datname = current_database() and pid <> pg_backend_pid() and wait_event_type = 'Lock'`,
        )).rows.some((row) => row.done === true),
      (terminated) => terminated,
    );
    const res = await pending;
    const body = await res.json();
    expect(res.status).toBe(503);
    expect(body.error).toBe('UNAVAILABLE');
    expect(body.message).toMatch(/may have been applied/);
    expect(body.message).toMatch(/read before retrying/);
    expect(body.message).not.toMatch(/^The database is unreachable/);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  } finally {
    await c.query('rollback').catch(() => undefined);
    await c.end();
  }
  // The gateway reconnects by itself: the next write works.
  expect((await t.call('alice', 'PUT', '/v1/records/incident/lost/fields/title', { value: 'c', expected_version: 1 })).status).toBe(200);
});
