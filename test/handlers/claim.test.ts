/**
 * claim: PUT /v1/records/{class}/{id}/fields/{field}/claim, against a real gateway and
 * PostgreSQL. Every row of interface.md's "Task field lease" table, the claim body rules
 * ("claim", "Limits"), HELD, the kind checks, WEAK_IDENTITY and the claim metrics.
 * Expiry is judged by the database clock, so leases are moved with SQL instead of sleeping.
 */
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, test, vi } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { JOB_LEASE_SECONDS, tasks } from '../fixtures/task-classes.js';
import { startTestGateway, useGatewayWithSql, type TestGateway, TS } from '../setup/gateway.js';


let t: TestGateway;
let sql: pg.Client;
useGatewayWithSql((g, c) => ((t = g), (sql = c)), [tasks, incident]);
afterEach(() => {
  vi.useRealTimers();
});

type Res = { status: number; body: any };

let n = 0;
const fresh = (prefix = 'c') => `${prefix}-${++n}`;

const claim = (who: string, id: string, field: string, body?: unknown, cls = 'tasks'): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/${cls}/${id}/fields/${field}/claim`, body);

const put = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/tasks/${id}/fields/${field}`, body);

const get = (who: string, id: string, query = ''): Promise<Res> => t.call(who, 'GET', `/v1/records/tasks/${id}${query}`);

async function history(id: string, field: string, cls = 'tasks'): Promise<any[]> {
  const h = await t.call('alice', 'GET', `/v1/records/${cls}/${id}/history?field=${field}`);
  expect(h.status, JSON.stringify(h.body)).toBe(200);
  return h.body.history; // newest first
}

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

async function mustClaim(who: string, id: string, field: string, body?: unknown): Promise<Res> {
  const r = await claim(who, id, field, body);
  expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
  return r;
}

async function dbNow(): Promise<number> {
  const r = await sql.query<{ now: Date }>('select now() as now');
  return r.rows[0].now.getTime();
}

/** Move the lease of a task field; `interval` is SQL, e.g. `- interval '1 second'`. */
async function setExpiry(id: string, field: string, interval: string): Promise<void> {
  const r = await sql.query(
    `update fields set lease_expires_at = now() ${interval}
     where name = $2 and record_id = (select id from records where class = 'tasks' and rid = $1)`,
    [id, field],
  );
  expect(r.rowCount).toBe(1);
}

const expire = (id: string, field = 'job') => setExpiry(id, field, `- interval '1 second'`);

/** lease_expires_at is about `seconds` after the database's now. */
async function expectExpiryAbout(lease: string, seconds: number): Promise<void> {
  expect(lease).toMatch(TS);
  const now = await dbNow();
  const delta = (Date.parse(lease) - now) / 1000;
  expect(delta).toBeGreaterThan(seconds - 10);
  expect(delta).toBeLessThanOrEqual(seconds + 1);
}

const CLAIM_KEYS = ['field', 'lease_expires_at', 'owner', 'record', 'record_version', 'version'];
const RELEASE_KEYS = ['field', 'record', 'record_version', 'version'];

// ---------------------------------------------------------------------------------------
describe('Task field lease transitions', () => {
  test('(1) unheld + claim with lease_seconds > 0: held by caller; 201 creating the record, keys exactly', async () => {
    const id = fresh();
    const r = await claim('alice', id, 'job', { lease_seconds: 30 });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(CLAIM_KEYS);
    expect(r.body).toMatchObject({ record: `tasks/${id}`, field: 'job', owner: 'apikey:alice', version: 1, record_version: 1 });
    expect(r.body).not.toHaveProperty('took_over_from');
    await expectExpiryAbout(r.body.lease_expires_at, 30);
    const g = await get('bob', id);
    expect(g.body.fields.job).toMatchObject({ owner: 'apikey:alice', lease_expires_at: r.body.lease_expires_at, version: 1 });
    const h = await history(id, 'job');
    expect(h).toHaveLength(1);
    expect(h[0]).toMatchObject({ field: 'job', op: 'claim', outcome: 'applied', version: 1, record_version: 1, author: 'apikey:alice' });
  });

  test('(1) a claim on an existing record answers 200', async () => {
    const id = fresh();
    expect((await put('alice', id, 'title', { value: 't', expected_version: 0 })).status).toBe(201);
    const r = await claim('bob', id, 'job', { lease_seconds: 30 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ record: `tasks/${id}`, field: 'job', owner: 'apikey:bob', version: 1, record_version: 2 });
    expect(r.body).not.toHaveProperty('took_over_from');
  });

  test('(2) held unexpired + claim by another identity: 409 HELD, exact body, field unchanged, history outcome held', async () => {
    const id = fresh();
    const c = await mustClaim('alice', id, 'job', { lease_seconds: 300 });
    const before = await get('alice', id);
    const r = await claim('bob', id, 'job', { lease_seconds: 30 });
    expectError(r, 409, 'HELD');
    expect(Object.keys(r.body).sort()).toEqual(['error', 'field', 'lease_expires_at', 'message', 'owner', 'version']);
    expect(r.body).not.toHaveProperty('record');
    expect(r.body).toMatchObject({ field: 'job', owner: 'apikey:alice', lease_expires_at: c.body.lease_expires_at, version: 1 });
    // renew does not help a non-owner either
    expectError(await claim('carol', id, 'job', { lease_seconds: 30, renew: true }), 409, 'HELD');
    // nor does a release
    expectError(await claim('carol', id, 'job', { lease_seconds: 0 }), 409, 'HELD');
    const after = await get('alice', id);
    expect(after.body).toEqual(before.body);
    const h = await history(id, 'job');
    expect(h).toHaveLength(4);
    expect(h[2]).toMatchObject({ op: 'claim', outcome: 'held', author: 'apikey:bob', record_version: 1 });
    expect(h[2]).not.toHaveProperty('version');
    expect(h[1]).toMatchObject({ op: 'claim', outcome: 'held', author: 'apikey:carol' });
    expect(h[0]).toMatchObject({ op: 'claim', outcome: 'held', author: 'apikey:carol' });
  });

  test('(3) held by caller + renew true: expiry extended, still the owner', async () => {
    const id = fresh();
    const c1 = await mustClaim('alice', id, 'job', { lease_seconds: 30 });
    const r = await claim('alice', id, 'job', { lease_seconds: 600, renew: true });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(CLAIM_KEYS);
    expect(r.body).toMatchObject({ owner: 'apikey:alice', version: 2, record_version: 2 });
    expect(r.body).not.toHaveProperty('took_over_from');
    expect(Date.parse(r.body.lease_expires_at)).toBeGreaterThan(Date.parse(c1.body.lease_expires_at));
    await expectExpiryAbout(r.body.lease_expires_at, 600);
    // Shortly before expiry, a renew with the same lease pushes it out again.
    await setExpiry(id, 'job', `+ interval '2 seconds'`);
    const near = (await get('alice', id)).body.fields.job.lease_expires_at;
    const r2 = await claim('alice', id, 'job', { lease_seconds: 600, renew: true });
    expect(r2.body).toMatchObject({ owner: 'apikey:alice', version: 3 });
    expect(Date.parse(r2.body.lease_expires_at)).toBeGreaterThan(Date.parse(near));
    const g = await get('bob', id);
    expect(g.body.fields.job).toMatchObject({ owner: 'apikey:alice', lease_expires_at: r2.body.lease_expires_at, version: 3 });
    const h = await history(id, 'job');
    expect(h.map((row) => [row.op, row.outcome])).toEqual([
      ['claim', 'applied'],
      ['claim', 'applied'],
      ['claim', 'applied'],
    ]);
  });

  test('(4) unheld + renew true: behaves as an ordinary claim', async () => {
    const id = fresh();
    const r = await claim('alice', id, 'job', { lease_seconds: 45, renew: true });
    expect(r.status).toBe(201);
    expect(Object.keys(r.body).sort()).toEqual(CLAIM_KEYS);
    expect(r.body).toMatchObject({ record: `tasks/${id}`, field: 'job', owner: 'apikey:alice', version: 1, record_version: 1 });
    await expectExpiryAbout(r.body.lease_expires_at, 45);
    // also after a release
    await mustClaim('alice', id, 'job', { lease_seconds: 0 });
    const r2 = await claim('bob', id, 'job', { lease_seconds: 45, renew: true });
    expect(r2.status).toBe(200);
    expect(r2.body).toMatchObject({ owner: 'apikey:bob', version: 3 });
    expect(r2.body).not.toHaveProperty('took_over_from');
    const h = await history(id, 'job');
    expect(h[0]).toMatchObject({ op: 'claim', outcome: 'applied', author: 'apikey:bob' });
  });

  test('(5) held, expired + claim by another identity: new owner, took_over_from, history op takeover', async () => {
    const id = fresh();
    await mustClaim('alice', id, 'job', { lease_seconds: 30 });
    await expire(id);
    const r = await claim('bob', id, 'job', { lease_seconds: 30 });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual([...CLAIM_KEYS, 'took_over_from'].sort());
    expect(r.body).toMatchObject({
      record: `tasks/${id}`,
      field: 'job',
      owner: 'apikey:bob',
      took_over_from: 'apikey:alice',
      version: 2,
      record_version: 2,
    });
    await expectExpiryAbout(r.body.lease_expires_at, 30);
    const g = await get('alice', id);
    expect(g.body.fields.job).toMatchObject({ owner: 'apikey:bob', lease_expires_at: r.body.lease_expires_at });
    const h = await history(id, 'job');
    expect(h[0]).toMatchObject({ op: 'takeover', outcome: 'applied', version: 2, author: 'apikey:bob' });
    // The old owner is now HELD out.
    const back = await claim('alice', id, 'job', { lease_seconds: 30 });
    expectError(back, 409, 'HELD');
    expect(back.body.owner).toBe('apikey:bob');
  });

  test('(6) held by caller + lease_seconds 0: released; no owner or lease_expires_at; history op release', async () => {
    const id = fresh();
    await mustClaim('alice', id, 'job', { lease_seconds: 300 });
    const r = await claim('alice', id, 'job', { lease_seconds: 0 });
    expect(r.status).toBe(200);
    expect(Object.keys(r.body).sort()).toEqual(RELEASE_KEYS);
    expect(r.body).toEqual({ record: `tasks/${id}`, field: 'job', version: 2, record_version: 2 });
    const h = await history(id, 'job');
    expect(h[0]).toMatchObject({ op: 'release', outcome: 'applied', version: 2, record_version: 2, author: 'apikey:alice' });
    const g = await get('bob', id);
    expect(g.body.fields.job.version).toBe(2);
    expect(g.body.fields.job).not.toHaveProperty('owner');
    expect(g.body.fields.job).not.toHaveProperty('lease_expires_at');
    // Anyone may claim it now, as an ordinary claim.
    const next = await claim('bob', id, 'job', { lease_seconds: 30 });
    expect(next.status).toBe(200);
    expect(next.body).toMatchObject({ owner: 'apikey:bob', version: 3 });
    expect(next.body).not.toHaveProperty('took_over_from');
    expect((await history(id, 'job'))[0]).toMatchObject({ op: 'claim', outcome: 'applied' });
  });
});

// ---------------------------------------------------------------------------------------
describe('claim body', () => {
  test('omitted lease_seconds uses the field leaseSeconds', async () => {
    const id = fresh();
    const r = await claim('alice', id, 'job', {});
    expect(r.status).toBe(201);
    await expectExpiryAbout(r.body.lease_expires_at, JOB_LEASE_SECONDS);
    const r2 = await claim('alice', id, 'job', { renew: true });
    expect(r2.status).toBe(200);
    await expectExpiryAbout(r2.body.lease_expires_at, JOB_LEASE_SECONDS);
  });

  test('no class default and no lease_seconds is MALFORMED; nothing is written', async () => {
    const id = fresh();
    expectError(await claim('alice', id, 'chore', {}), 400, 'MALFORMED');
    expectError(await claim('alice', id, 'chore'), 400, 'MALFORMED');
    expectError(await claim('alice', id, 'chore', { renew: true }), 400, 'MALFORMED');
    expect((await get('alice', id)).status).toBe(404);
    const ok = await claim('alice', id, 'chore', { lease_seconds: 20 });
    expect(ok.status).toBe(201);
    await expectExpiryAbout(ok.body.lease_expires_at, 20);
  });

  test('the body may be omitted entirely (no body, or an empty body): the default lease is used', async () => {
    const id = fresh();
    const noBody = await claim('alice', id, 'job');
    expect(noBody.status, JSON.stringify(noBody.body)).toBe(201);
    expect(noBody.body).toMatchObject({ owner: 'apikey:alice', version: 1 });
    await expectExpiryAbout(noBody.body.lease_expires_at, JOB_LEASE_SECONDS);
    const id2 = fresh();
    const empty = await claim('bob', id2, 'job', '');
    expect(empty.status, JSON.stringify(empty.body)).toBe(201);
    expect(empty.body).toMatchObject({ owner: 'apikey:bob', version: 1 });
    await expectExpiryAbout(empty.body.lease_expires_at, JOB_LEASE_SECONDS);
  });

  test('lease_seconds out of range or not an integer is MALFORMED', async () => {
    const id = fresh();
    for (const lease of [-1, 86401, 1.5, '10', null, true, {}]) {
      expectError(await claim('alice', id, 'job', { lease_seconds: lease }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).status).toBe(404);
  });

  test('lease_seconds 0 and 86400 are accepted', async () => {
    const id = fresh();
    const max = await claim('alice', id, 'job', { lease_seconds: 86400 });
    expect(max.status).toBe(201);
    await expectExpiryAbout(max.body.lease_expires_at, 86400);
    const zero = await claim('alice', id, 'job', { lease_seconds: 0 });
    expect(zero.status).toBe(200);
    expect(zero.body).toEqual({ record: `tasks/${id}`, field: 'job', version: 2, record_version: 2 });
    // 0 on an unheld field is accepted too and leaves it unheld.
    const id2 = fresh();
    const z2 = await claim('alice', id2, 'job', { lease_seconds: 0 });
    expect([200, 201]).toContain(z2.status);
    expect(z2.body).not.toHaveProperty('owner');
    expect(z2.body).not.toHaveProperty('lease_expires_at');
  });

  test('renew that is not a boolean is MALFORMED', async () => {
    const id = fresh();
    for (const renew of ['true', 1, 0, null, {}]) {
      expectError(await claim('alice', id, 'job', { lease_seconds: 30, renew }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).status).toBe(404);
  });

  test('a body that is not a JSON object is MALFORMED', async () => {
    const id = fresh();
    for (const body of ['[]', '"x"', '{bad json', '30']) {
      expectError(await claim('alice', id, 'job', body), 400, 'MALFORMED');
    }
  });

  test('invocation is stored and shown on the task field; over 1 KiB or not an object is MALFORMED', async () => {
    const id = fresh();
    const invocation = { tool: 'scheduler', run: { n: 3 }, z: 1, a: 2 };
    await mustClaim('alice', id, 'job', { lease_seconds: 30, invocation });
    const g = await get('alice', id);
    expect(g.body.fields.job.invocation).toEqual(invocation);
    expect(Object.keys(g.body.fields.job.invocation)).toEqual(Object.keys(invocation));
    expect((await history(id, 'job'))[0].invocation).toEqual(invocation);
    const over = { p: 'x'.repeat(1025 - JSON.stringify({ p: '' }).length) };
    for (const inv of [over, [1], 'x', 3]) {
      expectError(await claim('alice', id, 'job', { lease_seconds: 30, invocation: inv }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).body.fields.job.version).toBe(1);
  });
});

// ---------------------------------------------------------------------------------------
describe('a claim is a write', () => {
  test('it raises the field version and the record version and leaves a history row', async () => {
    const id = fresh();
    await put('alice', id, 'title', { value: 't', expected_version: 0 }); // record_version 1
    const c1 = await mustClaim('alice', id, 'job', { lease_seconds: 30 });
    expect(c1.body).toMatchObject({ version: 1, record_version: 2 });
    const c2 = await mustClaim('alice', id, 'job', { lease_seconds: 30, renew: true });
    expect(c2.body).toMatchObject({ version: 2, record_version: 3 });
    await put('alice', id, 'title', { value: 't2', expected_version: 1 }); // record_version 4
    const c3 = await mustClaim('alice', id, 'job', { lease_seconds: 0 });
    expect(c3.body).toMatchObject({ version: 3, record_version: 5 });
    const g = await get('alice', id);
    expect(g.body.record_version).toBe(5);
    expect(g.body.fields.job).toMatchObject({ version: 3, author: 'apikey:alice' });
    expect(g.body.fields.job.updated_at).toMatch(TS);
    const h = (await history(id, 'job')).reverse();
    expect(h.map((r) => [r.op, r.version, r.record_version])).toEqual([
      ['claim', 1, 2],
      ['claim', 2, 3],
      ['release', 3, 5],
    ]);
  });

  test('NOT_TASK_FIELD for claim on a versioned, soft or append field', async () => {
    const id = fresh();
    await put('alice', id, 'title', { value: 't', expected_version: 0 });
    for (const field of ['title', 'memo', 'log', 'notes']) {
      expectError(await claim('alice', id, field, { lease_seconds: 30 }), 422, 'NOT_TASK_FIELD');
    }
    const g = await get('alice', id);
    expect(g.body.record_version).toBe(1);
    expect(Object.keys(g.body.fields)).toEqual(['title']);
  });

  test('NOT_WRITABLE for put on a task field', async () => {
    const id = fresh();
    await mustClaim('alice', id, 'job', { lease_seconds: 30 });
    expectError(await put('alice', id, 'job', { value: 'apikey:bob', expected_version: 1 }), 422, 'NOT_WRITABLE');
    expectError(await put('alice', id, 'chore', { value: 'x', expected_version: 0 }), 422, 'NOT_WRITABLE');
    const g = await get('alice', id);
    expect(g.body.fields.job).toMatchObject({ owner: 'apikey:alice', version: 1 });
    expect(g.body.fields).not.toHaveProperty('chore');
  });

  test('WEAK_IDENTITY for a field floor: required, presented and field in the body', async () => {
    // incident.triage needs sa-bound; API keys are shared-secret.
    const r = await claim('alice', 'weak-1', 'triage', { lease_seconds: 30 }, 'incident');
    expectError(r, 403, 'WEAK_IDENTITY');
    expect(r.body).toMatchObject({ field: 'triage', required: 'sa-bound', presented: 'shared-secret' });
    const h = await history('weak-1', 'triage', 'incident');
    expect(h[0]).toMatchObject({ op: 'claim', outcome: 'weak_identity', author: 'apikey:alice' });
    expect(h[0]).not.toHaveProperty('version');
    expect((await t.call('alice', 'GET', '/v1/records/incident/weak-1')).status).toBe(404);
  });
});

// ---------------------------------------------------------------------------------------
describe('expiry', () => {
  test('get shows owner and lease_expires_at only while the lease is held', async () => {
    const id = fresh();
    const c = await mustClaim('alice', id, 'job', { lease_seconds: 300 });
    const held = await get('bob', id);
    expect(held.body.fields.job).toMatchObject({ owner: 'apikey:alice', lease_expires_at: c.body.lease_expires_at });
    await expire(id);
    const lapsed = await get('bob', id);
    expect(lapsed.body.fields.job.version).toBe(1);
    expect(lapsed.body.fields.job).not.toHaveProperty('owner');
    expect(lapsed.body.fields.job).not.toHaveProperty('lease_expires_at');
  });

  test('judged by the database clock, not the gateway clock', async () => {
    const id = fresh();
    await mustClaim('alice', id, 'job', { lease_seconds: 30 });

    // Database: 2 s left. Gateway clock (this process) an hour ahead: still HELD.
    await setExpiry(id, 'job', `+ interval '2 seconds'`);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() + 3_600_000);
    const held = await claim('bob', id, 'job', { lease_seconds: 30 });
    vi.useRealTimers();
    expectError(held, 409, 'HELD');
    expect(held.body.owner).toBe('apikey:alice');

    // Database: expired a second ago. Gateway clock an hour behind: taken over.
    await expire(id);
    vi.useFakeTimers({ toFake: ['Date'] });
    vi.setSystemTime(Date.now() - 3_600_000);
    const took = await claim('bob', id, 'job', { lease_seconds: 30 });
    vi.useRealTimers();
    expect(took.status, JSON.stringify(took.body)).toBe(200);
    expect(took.body).toMatchObject({ owner: 'apikey:bob', took_over_from: 'apikey:alice' });
    // The new expiry is counted from the database's now, not the skewed gateway clock.
    await expectExpiryAbout(took.body.lease_expires_at, 30);
  });

  test('an expired lease re-claimed by its own owner is an ordinary claim, not a takeover', async () => {
    const id = fresh();
    await mustClaim('alice', id, 'job', { lease_seconds: 30 });
    await expire(id);
    const r = await claim('alice', id, 'job', { lease_seconds: 30 });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ owner: 'apikey:alice', version: 2 });
    expect(r.body).not.toHaveProperty('took_over_from');
  });
});

// ---------------------------------------------------------------------------------------
describe('metrics', () => {
  let m: TestGateway;
  let msql: pg.Client;
  beforeAll(async () => {
    m = await startTestGateway([tasks]);
    msql = new pg.Client({ connectionString: m.db.url });
    await msql.connect();
  });
  afterAll(async () => {
    await msql?.end();
    await m?.close();
  });

  test('a takeover counts in svc_takeovers_total and svc_claims_total{outcome="takeover"}', async () => {
    const c = await m.call('alice', 'PUT', '/v1/records/tasks/m-1/fields/job/claim', { lease_seconds: 30 });
    expect(c.status).toBe(201);
    await msql.query(
      `update fields set lease_expires_at = now() - interval '1 second'
       where name = 'job' and record_id = (select id from records where class = 'tasks' and rid = 'm-1')`,
    );
    const r = await m.call('bob', 'PUT', '/v1/records/tasks/m-1/fields/job/claim', { lease_seconds: 30 });
    expect(r.status).toBe(200);
    expect(r.body.took_over_from).toBe('apikey:alice');
    const res = await fetch(`${m.gw.metricsUrl}/metrics`);
    expect(res.status).toBe(200);
    const text = await res.text();
    expect(text).toMatch(/^svc_takeovers_total 1$/m);
    expect(text).toMatch(/^svc_claims_total\{[^}]*outcome="takeover"[^}]*\} 1$/m);
    const line = text.split('\n').find((l) => /^svc_claims_total\{[^}]*outcome="takeover"/.test(l))!;
    expect(line).toContain('class="tasks"');
    expect(line).toContain('field="job"');
  });
});
