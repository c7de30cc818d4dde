/**
 * A database that stops taking writes, as the old primary does when a failover restarts it
 * as a standby (docs/ha.md): the pool refuses new connections that reach a read-only server
 * (db/kysely/primary.ts) and ends pooled ones on which a write was refused, so requests answer
 * 503 UNAVAILABLE (never 500), /readyz says why, and once the server takes writes again the
 * gateway serves them by itself. A real PostgreSQL made read-only with
 * `default_transaction_read_only`, what a standby's sessions also report.
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, inject, it } from 'vitest';
import { createPool } from '../../db/kysely/index.js';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let db: TestDb;
let t: TestGateway;

/** SQL on the server's admin database (the test database itself may be read-only by then). */
async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: inject('pgAdminUrl') });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

/** New sessions of the test database are read-only (or writable again), and its current sessions are ended. */
async function setReadOnly(on: boolean): Promise<void> {
  await admin(`alter database ${db.name} ${on ? 'set default_transaction_read_only = on' : 'reset default_transaction_read_only'}`);
  // With a timeout, pg_terminate_backend returns once each backend has exited.
  await admin(`select pg_terminate_backend(pid, 10000) from pg_stat_activity where datname = '${db.name}' and pid <> pg_backend_pid()`);
}

/**
 * Resolves once the pool holds no connection: an idle client whose backend was terminated is
 * removed when its socket reports the end, which can come after the next request took it
 * (the write then goes out on a dying connection and its outcome is unknown, not refused).
 */
function poolEmptied(pool: pg.Pool): Promise<void> {
  return new Promise((resolve) => {
    if (pool.totalCount === 0) return resolve();
    const check = () => {
      if (pool.totalCount > 0) return;
      pool.off('remove', check);
      resolve();
    };
    pool.on('remove', check);
  });
}

beforeAll(async () => {
  db = await freshDatabase();
  t = await startTestGateway([incident], { db });
}, 60_000);

afterAll(async () => {
  await setReadOnly(false).catch(() => undefined);
  await t?.close();
  await db?.drop();
}, 30_000);

it('a pooled connection on which a write was refused as read-only is ended, not handed out again', async () => {
  const pool = createPool({ connectionString: db.url, max: 1 });
  try {
    const c = await pool.connect();
    // The session turns read-only after it was checked at connect, as a server can
    // (an operator's ALTER SYSTEM, a managed service protecting a full disk).
    await c.query('set default_transaction_read_only = on');
    await expect(c.query('create temp table t (x int)')).rejects.toMatchObject({ code: '25006' });
    c.release();
    expect(pool.totalCount).toBe(0);
    // The next request gets a new connection.
    expect((await pool.query('select 1 as one')).rows).toEqual([{ one: 1 }]);
  } finally {
    await pool.end();
  }
});

it('a new connection to a read-only server is refused before use: the request gets no half-working connection', async () => {
  await setReadOnly(true);
  const pool = createPool({ connectionString: db.url, max: 2 });
  try {
    await expect(pool.query('select 1')).rejects.toMatchObject({ code: '25006', message: expect.stringMatching(/read-only server/) });
    expect(pool.totalCount).toBe(0);
  } finally {
    await pool.end();
    await setReadOnly(false);
  }
});

it('while the database takes no writes: writes and reads answer 503 UNAVAILABLE, /readyz says why; then it serves again by itself', async () => {
  expect((await t.call('alice', 'PUT', '/v1/records/incident/ro/fields/title', { value: 'a', expected_version: 0 })).status).toBe(201);
  await setReadOnly(true);
  // The gateway's pooled connections were ended by the server; the PUT below must find them
  // gone and open a new one, which the read-only server refuses before anything is sent.
  await poolEmptied(t.gw.services.pool);
  try {
    const put = await t.call('alice', 'PUT', '/v1/records/incident/ro/fields/title', { value: 'b', expected_version: 1 });
    expect(put.status).toBe(503);
    expect(put.body.error).toBe('UNAVAILABLE');
    // Refused before anything was sent: the write did not happen, so nothing says otherwise.
    expect(put.body).not.toHaveProperty('outcome');
    expect((await t.call('alice', 'POST', '/v1/records/incident/ro/fields/notes/entries', { entry: {}, evidence: 'e' })).status).toBe(503);
    expect((await t.call('alice', 'GET', '/v1/records/incident/ro')).status).toBe(503);
    const ready = await fetch(`${t.url}/readyz`);
    expect(ready.status).toBe(503);
    expect(((await ready.json()) as { message: string }).message).toMatch(/read-only server/);
  } finally {
    await setReadOnly(false);
  }
  const put = await t.call('alice', 'PUT', '/v1/records/incident/ro/fields/title', { value: 'b', expected_version: 1 });
  expect(put.status).toBe(200);
  expect((await fetch(`${t.url}/readyz`)).status).toBe(200);
});
