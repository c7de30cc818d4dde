/**
 * What the Workers adapter refuses, in workerd: a configuration Workers cannot serve answers
 * every request 503 saying what to change, and /readyz on a database without the schema says
 * to run `kslate migrate` (Workers never migrate).
 */
import pg from 'pg';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { APIKEYS_YAML, startWorker, type TestWorker } from './miniflare.js';

let bare: TestDb;
const workers: TestWorker[] = [];

beforeAll(async () => {
  bare = await freshDatabase({ migrated: false });
});

afterAll(async () => {
  for (const w of workers) await w.close();
  await bare?.drop();
});

async function worker(bindings: Record<string, string>): Promise<TestWorker> {
  const w = await startWorker(bindings);
  workers.push(w);
  return w;
}

test('k8s-sa is refused with a clear 503 on every request; so is a missing KSLATE_APIKEYS', async () => {
  const sa = await worker({ DATABASE_URL: bare.url, KSLATE_IDENTITY: 'apikey,k8s-sa', KSLATE_APIKEYS: APIKEYS_YAML });
  const r = await sa.call('alice', 'GET', '/v1/classes');
  expect(r.status).toBe(503);
  expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
  expect(r.body.message).toMatch(/k8s-sa, which Workers cannot offer/);

  const nokeys = await worker({ DATABASE_URL: bare.url });
  const n = await nokeys.call(null, 'GET', '/readyz');
  expect(n.status).toBe(503);
  expect(n.body.message).toMatch(/KSLATE_APIKEYS is not set/);
});

test('/readyz without the schema says to run kslate migrate, and the schema stays missing', async () => {
  const w = await worker({ DATABASE_URL: bare.url, KSLATE_APIKEYS: APIKEYS_YAML });
  for (let i = 0; i < 2; i++) {
    const r = await w.call(null, 'GET', '/readyz');
    expect(r.status).toBe(503);
    expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
    expect(r.body.message).toMatch(/run `kslate migrate --database-url <direct URL>` first \(Workers never migrate\)/);
  }
  const c = new pg.Client({ connectionString: bare.url });
  await c.connect();
  try {
    const { rows } = await c.query(`select to_regclass('kslate_migrations')::text as t`);
    expect(rows[0].t).toBeNull();
  } finally {
    await c.end();
  }
});

test('a request before the schema exists says to run kslate migrate, not that it is being re-applied (Workers never migrate)', async () => {
  const w = await worker({ DATABASE_URL: bare.url, KSLATE_APIKEYS: APIKEYS_YAML });
  for (const [method, path, body] of [
    ['GET', '/v1/classes', undefined],
    ['PUT', '/v1/records/incident/i1/fields/title', { value: 'x', expected_version: 0 }],
  ] as const) {
    const r = await w.call('alice', method, path, body);
    expect(r.status, JSON.stringify(r.body)).toBe(503);
    expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
    expect(r.body.message).toMatch(/run `kslate migrate --database-url <direct URL>` against this database/);
    expect(r.body.message).not.toMatch(/re-applied/);
  }
});

test('/readyz warns about a primary without a synchronous standby, unless KSLATE_ALLOW_ASYNC_REPLICATION=true (docs/ha.md)', async () => {
  // The test server is one PostgreSQL: synchronous_standby_names is empty.
  const migrated = await freshDatabase();
  try {
    const warned = await worker({ DATABASE_URL: migrated.url, KSLATE_APIKEYS: APIKEYS_YAML });
    const r = await warned.call(null, 'GET', '/readyz');
    expect(r.status).toBe(200);
    expect(r.body.warnings).toEqual([expect.stringMatching(/no synchronous standby.*KSLATE_ALLOW_ASYNC_REPLICATION/)]);
    const allowed = await worker({ DATABASE_URL: migrated.url, KSLATE_APIKEYS: APIKEYS_YAML, KSLATE_ALLOW_ASYNC_REPLICATION: 'true' });
    expect(await allowed.call(null, 'GET', '/readyz')).toMatchObject({ status: 200, body: { status: 'ready' } });
    expect((await allowed.call(null, 'GET', '/readyz')).body).not.toHaveProperty('warnings');
    const wrong = await worker({ DATABASE_URL: migrated.url, KSLATE_APIKEYS: APIKEYS_YAML, KSLATE_ALLOW_ASYNC_REPLICATION: 'yes' });
    expect((await wrong.call(null, 'GET', '/readyz')).body.message).toMatch(/KSLATE_ALLOW_ASYNC_REPLICATION is "yes"; give true or false/);
  } finally {
    await migrated.drop();
  }
});
