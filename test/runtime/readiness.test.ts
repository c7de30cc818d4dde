/**
 * Readiness (interface "readiness"): GET /readyz on the API port and the metrics port is 200
 * when the schema is present; when it is missing the gateway applies it and answers 503
 * meanwhile. Requests while the schema is missing are 503 UNAVAILABLE ("schema being
 * re-applied"), never 500. Replicas starting together on one empty database both come up.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

/**
 * The advisory lock every migrator takes (db/migrate.ts). Holding it from the test keeps the
 * schema missing for as long as the test needs to observe the 503s; it is setup only.
 */
const MIGRATION_LOCK = 7_283_641_001;

async function getJson(url: string): Promise<{ status: number; body: any }> {
  const res = await fetch(url);
  const text = await res.text();
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* keep text */
  }
  return { status: res.status, body };
}

async function until<T>(what: string, fn: () => Promise<T>, ok: (v: T) => boolean, ms = 10_000): Promise<T> {
  const end = Date.now() + ms;
  let last: T | undefined;
  while (Date.now() < end) {
    last = await fn();
    if (ok(last)) return last;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`${what} did not happen within ${ms} ms; last: ${JSON.stringify(last)}`);
}

function expectUnavailable(r: { status: number; body: any }) {
  expect(r.status).toBe(503);
  expect(r.body).toMatchObject({ error: 'UNAVAILABLE' });
  expect(typeof r.body.message).toBe('string');
  expect(r.body.message.length).toBeGreaterThan(0);
}

describe('schema dropped under a running gateway', () => {
  let t: TestGateway;
  beforeAll(async () => {
    t = await startTestGateway([incident]);
  });
  afterAll(() => t?.close());

  it('is ready on both ports with the schema present', async () => {
    const api = await getJson(t.url + '/readyz');
    expect(api.status).toBe(200);
    const metrics = await getJson(t.gw.metricsUrl + '/readyz');
    expect(metrics.status).toBe(200);
    // Liveness on both ports too.
    for (const url of [t.url + '/healthz', t.gw.metricsUrl + '/healthz']) {
      expect(await getJson(url)).toEqual({ status: 200, body: { status: 'ok' } });
    }
    const put = await t.call('alice', 'PUT', '/v1/records/incident/before/fields/title', { value: 'x', expected_version: 0 });
    expect(put.status).toBe(201);
  });

  it('answers 503 UNAVAILABLE while the schema is missing, then re-applies it and reconciles the classes', async () => {
    const c = new pg.Client({ connectionString: t.db.url });
    await c.connect();
    let locked = false;
    try {
      await c.query('select pg_advisory_lock($1)', [MIGRATION_LOCK]);
      locked = true;
      await c.query('drop schema public cascade; create schema public;');

      // A write while the schema is missing: 503 UNAVAILABLE, never 500.
      const put = await t.call('alice', 'PUT', '/v1/records/incident/during/fields/title', { value: 'x', expected_version: 0 });
      expectUnavailable(put);
      // The Node gateway applies it itself, and says so (Workers say to run kslate migrate).
      expect(put.body.message).toBe('The database schema is missing and is being re-applied; retry shortly.');
      // A read too (after the one-second class cache has expired as well).
      await new Promise((r) => setTimeout(r, 1_100));
      expectUnavailable(await t.call('alice', 'GET', '/v1/records/incident/before'));
      expectUnavailable(await t.call('alice', 'PUT', '/v1/records/incident/during/fields/title', { value: 'x', expected_version: 0 }));
      expectUnavailable(await t.call('alice', 'GET', '/v1/classes'));

      // /readyz on both ports: 503 with the error body while the schema is missing.
      expectUnavailable(await getJson(t.url + '/readyz'));
      expectUnavailable(await getJson(t.gw.metricsUrl + '/readyz'));
    } finally {
      if (locked) await c.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
      await c.end();
    }

    // The gateway applies the schema by itself: /readyz becomes 200 again on both ports.
    await until('API /readyz 200', () => getJson(t.url + '/readyz'), (r) => r.status === 200);
    await until('metrics /readyz 200', () => getJson(t.gw.metricsUrl + '/readyz'), (r) => r.status === 200);

    // ... and the classes are back (reconciled from --classes), so a write works again.
    const put = await until(
      'a put after the schema came back',
      () => t.call('alice', 'PUT', '/v1/records/incident/after/fields/title', { value: 'back', expected_version: 0 }),
      (r) => r.status !== 503,
    );
    expect(put).toEqual({ status: 201, body: { record: 'incident/after', field: 'title', version: 1, record_version: 1 } });
    const got = await t.call('alice', 'GET', '/v1/records/incident/after');
    expect(got.status).toBe(200);
    expect(got.body.fields.title.value).toBe('back');
    const classes = await t.call('alice', 'GET', '/v1/classes');
    expect(classes.status).toBe(200);
    expect(classes.body.classes.map((x: { name: string }) => x.name)).toContain('incident');
  });

  it('reports 503 at least once when the schema is dropped without holding anything back', async () => {
    // No lock this time: whichever probe comes first sees the missing schema.
    const c = new pg.Client({ connectionString: t.db.url });
    await c.connect();
    try {
      await c.query('drop schema public cascade; create schema public;');
    } finally {
      await c.end();
    }
    const first = await getJson(t.url + '/readyz');
    expectUnavailable(first);
    await until('/readyz 200', () => getJson(t.url + '/readyz'), (r) => r.status === 200);
    const put = await until(
      'a put after re-apply',
      () => t.call('alice', 'PUT', '/v1/records/incident/again/fields/title', { value: 'y', expected_version: 0 }),
      (r) => r.status !== 503,
    );
    expect(put.status).toBe(201);
  });
});

describe('a database without the schema', () => {
  it('the gateway applies it at start and is ready', async () => {
    const db = await freshDatabase({ migrated: false });
    const t = await startTestGateway([incident], { db });
    try {
      expect((await getJson(t.url + '/readyz')).status).toBe(200);
      expect((await getJson(t.gw.metricsUrl + '/readyz')).status).toBe(200);
      const put = await t.call('alice', 'PUT', '/v1/records/incident/r1/fields/title', { value: 'v', expected_version: 0 });
      expect(put.status).toBe(201);
    } finally {
      await t.close();
      await db.drop();
    }
  });

  it('two gateways starting at the same moment both come up ready (one migrates, the other waits)', async () => {
    const db = await freshDatabase({ migrated: false });
    const started = await Promise.allSettled([startTestGateway([incident], { db }), startTestGateway([incident], { db })]);
    const gws = started.filter((s): s is PromiseFulfilledResult<TestGateway> => s.status === 'fulfilled').map((s) => s.value);
    try {
      expect(started.map((s) => (s.status === 'rejected' ? String(s.reason) : 'ok'))).toEqual(['ok', 'ok']);
      for (const g of gws) {
        expect((await getJson(g.url + '/readyz')).status).toBe(200);
        expect((await getJson(g.gw.metricsUrl + '/readyz')).status).toBe(200);
      }
      // Both serve the same store: a write through one is read through the other.
      const [a, b] = gws;
      expect((await a.call('alice', 'PUT', '/v1/records/incident/shared/fields/title', { value: 's', expected_version: 0 })).status).toBe(201);
      const got = await until('the class visible on the second gateway', () => b.call('alice', 'GET', '/v1/records/incident/shared'), (r) => r.status === 200, 3_000);
      expect(got.body.fields.title.value).toBe('s');
      // The schema was applied exactly once.
      const c = new pg.Client({ connectionString: db.url });
      await c.connect();
      try {
        const { rows } = await c.query('select version, count(*)::int as n from kslate_migrations group by version');
        expect(rows.length).toBeGreaterThan(0);
        for (const r of rows) expect(r.n).toBe(1);
      } finally {
        await c.end();
      }
    } finally {
      await Promise.all(gws.map((g) => g.close()));
      await db.drop();
    }
  });
});

describe('a primary without a synchronous standby (docs/ha.md)', () => {
  /** A logger keeping its warnings. */
  function collecting() {
    const warnings: string[] = [];
    const infos: string[] = [];
    return { warnings, infos, log: { debug() {}, info: (m: string) => void infos.push(m), warn: (m: string) => void warnings.push(m), error() {} } };
  }

  // The test server is one PostgreSQL: synchronous_standby_names is empty.
  it('is warned about at start and in /readyz, which stays 200 (the gateway serves; the operator is told)', async () => {
    const c = collecting();
    const t = await startTestGateway([incident], { log: c.log });
    try {
      expect(c.warnings.filter((w) => /no synchronous standby/.test(w))).toHaveLength(1);
      for (const url of [t.url + '/readyz', t.gw.metricsUrl + '/readyz']) {
        const r = await getJson(url);
        expect(r.status).toBe(200);
        expect(r.body.status).toBe('ready');
        expect(r.body.warnings).toEqual([expect.stringMatching(/synchronous_standby_names is empty.*--allow-async-replication/)]);
      }
      // Logged once, not on every probe.
      expect(c.warnings.filter((w) => /no synchronous standby/.test(w))).toHaveLength(1);
    } finally {
      await t.close();
    }
  });

  it('synchronous_commit off or local is named too: commits would not wait for a standby', async () => {
    const db = await freshDatabase();
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    await admin.query(`alter database ${db.name} set synchronous_commit = local`);
    await admin.end();
    const t = await startTestGateway([incident], { db, log: collecting().log });
    try {
      const r = await getJson(t.url + '/readyz');
      expect(r.status).toBe(200);
      expect(r.body.warnings).toEqual([expect.stringMatching(/synchronous_commit is local.*do not wait for a synchronous standby/)]);
    } finally {
      await t.close();
      await db.drop();
    }
  });

  it('--allow-async-replication: the operator accepts it, so no warning at start or in /readyz', async () => {
    const c = collecting();
    const t = await startTestGateway([incident], { log: c.log, extraArgs: ['--allow-async-replication', 'true'] });
    try {
      expect(c.warnings.filter((w) => /synchronous/.test(w))).toEqual([]);
      expect(await getJson(t.url + '/readyz')).toEqual({ status: 200, body: { status: 'ready' } });
    } finally {
      await t.close();
    }
  });
});
