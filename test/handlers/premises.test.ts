/**
 * Premises (`based_on`), fences, premise inference from `X-Svc-Scope` reads, and
 * IDENTITY_MISMATCH (interface.md "premise", put's STALE_PREMISE body, Authentication §6–§7,
 * Rejection order; decisions §2–§3), against real gateways and PostgreSQL.
 */
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { plan } from '../fixtures/flow-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([plan]);
});
afterAll(() => t?.close());

type Res = { status: number; body: any };
type Gw = Pick<TestGateway, 'call'>;

let seq = 0;
const fresh = (prefix = 'p') => `${prefix}-${++seq}`;
const newScope = () => `scope-${randomUUID()}`;
const hdr = (scope?: string): Record<string, string> => (scope === undefined ? {} : { 'x-svc-scope': scope });

const put = (who: string, id: string, field: string, body: unknown, scope?: string, gw: Gw = t): Promise<Res> =>
  gw.call(who, 'PUT', `/v1/records/plan/${id}/fields/${field}`, body, hdr(scope));
const append = (who: string, id: string, field: string, body: unknown, scope?: string): Promise<Res> =>
  t.call(who, 'POST', `/v1/records/plan/${id}/fields/${field}/entries`, body, hdr(scope));
const claim = (who: string, id: string, body: unknown, scope?: string): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/plan/${id}/fields/job/claim`, body, hdr(scope));
const get = (who: string, id: string, scope?: string, qs = '', gw: Gw = t): Promise<Res> =>
  gw.call(who, 'GET', `/v1/records/plan/${id}${qs}`, undefined, hdr(scope));
const history = (who: string, id: string, field?: string): Promise<Res> =>
  t.call(who, 'GET', `/v1/records/plan/${id}/history${field ? `?field=${field}` : ''}`);

async function ok(res: Promise<Res>): Promise<any> {
  const r = await res;
  if (r.status !== 200 && r.status !== 201) throw new Error(`seed failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 600)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
}

function expectApplied(res: Res): void {
  expect([200, 201], JSON.stringify(res.body)?.slice(0, 600)).toContain(res.status);
}

async function sqlQuery(text: string, params: unknown[] = []): Promise<any[]> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows;
  } finally {
    await c.end();
  }
}

const byField = (list: any[] | undefined) => [...(list ?? [])].sort((a, b) => String(a.field).localeCompare(String(b.field)));

/** A record with a, b, c at version 1, written by alice without a scope. */
async function seedPlan(): Promise<string> {
  const id = fresh();
  for (const f of ['a', 'b', 'c']) await ok(put('alice', id, f, { value: `${f}1`, expected_version: 0 }));
  return id;
}

/** Latest history row of a field (history is newest first). */
async function lastRow(id: string, field: string): Promise<any> {
  const h = await history('alice', id, field);
  expect(h.status).toBe(200);
  return h.body.history[0];
}

// ---------------------------------------------------------------------------------------
describe('explicit based_on', () => {
  test('STALE_PREMISE body: record, field, current_version, current_author, moved[] with only the moved premises', async () => {
    const id = await seedPlan();
    await ok(put('carol', id, 'c', { value: 'c2', expected_version: 1, evidence: 'carol checked' }));
    const r = await put('alice', id, 'a', {
      value: 'a2',
      expected_version: 1,
      based_on: [
        { field: 'b', version: 1 },
        { field: 'c', version: 1 },
      ],
    });
    expectError(r, 409, 'STALE_PREMISE');
    expect(Object.keys(r.body).sort()).toEqual(['current_author', 'current_version', 'error', 'field', 'message', 'moved', 'record']);
    expect(r.body).toMatchObject({ record: `plan/${id}`, field: 'a', current_version: 1, current_author: 'apikey:alice' });
    expect(r.body.moved).toEqual([
      { field: 'c', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: 'carol checked' },
    ]);
    // nothing changed, and the attempt is in the history
    expect((await get('alice', id)).body.fields.a).toMatchObject({ value: 'a1', version: 1 });
    expect(await lastRow(id, 'a')).toMatchObject({ outcome: 'stale_premise', value: 'a2', author: 'apikey:alice' });
  });

  test('top-level keys describe the written field: 0 and null when it has no value; a premise with no value has version 0', async () => {
    const id = await seedPlan();
    await ok(put('bob', id, 'b', { value: 'b2', expected_version: 1 }));
    const r = await put('alice', id, 'memo', { value: 'm', based_on: [{ field: 'b', version: 1 }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body).toMatchObject({ record: `plan/${id}`, field: 'memo', current_version: 0, current_author: null });
    expect(r.body.moved).toEqual([{ field: 'b', your_version: 1, current_version: 2, current_author: 'apikey:bob', current_evidence: null }]);

    // a premise on a field that has no value, claimed read at version 1
    const r2 = await put('alice', id, 'n', { value: 1, expected_version: 0, based_on: [{ field: 'proof', version: 1 }, { field: 'a', version: 1 }] });
    expectError(r2, 409, 'STALE_PREMISE');
    expect(r2.body).toMatchObject({ field: 'n', current_version: 0, current_author: null });
    expect(r2.body.moved).toEqual([{ field: 'proof', your_version: 1, current_version: 0, current_author: null, current_evidence: null }]);
  });

  test('premises that hold: the write applies and stores based_on as sent', async () => {
    const id = await seedPlan();
    const premises = [
      { field: 'b', version: 1 },
      { field: 'c', version: 1 },
    ];
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: premises }));
    const g = await get('alice', id);
    expect(byField(g.body.fields.a.based_on)).toEqual(premises);
  });
});

// ---------------------------------------------------------------------------------------
describe('fence premises', () => {
  test('kind fence on a non-task field: MALFORMED', async () => {
    const id = await seedPlan();
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'b', version: 1, kind: 'fence' }] });
    expectError(r, 400, 'MALFORMED');
  });

  test('holds while the task version is unchanged and the writer holds the lease', async () => {
    const id = await seedPlan();
    const c = await ok(claim('alice', id, { lease_seconds: 60 }));
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c.version, kind: 'fence' }] });
    expectApplied(r);
    const g = await get('alice', id);
    expect(g.body.fields.a.based_on).toEqual([{ field: 'job', version: c.version, kind: 'fence' }]);
  });

  test("another identity's lease: STALE_PREMISE (an ordinary premise at that version would hold)", async () => {
    const id = await seedPlan();
    const c = await ok(claim('carol', id, { lease_seconds: 60 }));
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c.version, kind: 'fence' }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved).toHaveLength(1);
    expect(r.body.moved[0]).toMatchObject({ field: 'job', your_version: c.version, current_author: 'apikey:carol' });
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c.version }] }));
  });

  test('an expired lease: STALE_PREMISE', async () => {
    const id = await seedPlan();
    const c = await ok(claim('alice', id, { lease_seconds: 60 }));
    await sqlQuery(
      `update fields set lease_expires_at = now() - interval '1 second'
       where name = 'job' and record_id = (select id from records where class = 'plan' and rid = $1)`,
      [id],
    );
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c.version, kind: 'fence' }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved[0]).toMatchObject({ field: 'job', your_version: c.version });
  });

  test('a moved task version: STALE_PREMISE, even though the writer still holds the lease', async () => {
    const id = await seedPlan();
    const c1 = await ok(claim('alice', id, { lease_seconds: 60 }));
    const c2 = await ok(claim('alice', id, { lease_seconds: 60, renew: true }));
    expect(c2.version).toBeGreaterThan(c1.version);
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c1.version, kind: 'fence' }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved[0]).toMatchObject({ field: 'job', your_version: c1.version, current_version: c2.version });
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [{ field: 'job', version: c2.version, kind: 'fence' }] }));
  });
});

// ---------------------------------------------------------------------------------------
describe('inference from X-Svc-Scope reads', () => {
  test('a put without based_on rests on every other field read in the scope, at the version read, inferred', async () => {
    const id = await seedPlan();
    await ok(put('carol', id, 'b', { value: 'b2', expected_version: 1 })); // b at 2
    const S = newScope();
    expect((await get('alice', id, S)).status).toBe(200);
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S));
    const want = [
      { field: 'b', version: 2, inferred: true },
      { field: 'c', version: 1, inferred: true },
    ];
    const g = await get('alice', id);
    expect(byField(g.body.fields.a.based_on)).toEqual(want);
    const row = await lastRow(id, 'a');
    expect(row).toMatchObject({ outcome: 'applied', version: 2 });
    expect(byField(row.based_on)).toEqual(want);
  });

  test('only the fields read count', async () => {
    const id = await seedPlan();
    const S = newScope();
    expect((await get('alice', id, S, '?fields=b')).status).toBe(200);
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S));
    expect((await get('alice', id)).body.fields.a.based_on).toEqual([{ field: 'b', version: 1, inferred: true }]);
  });

  test('a field read in the scope that moved since: STALE_PREMISE', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    await ok(put('carol', id, 'b', { value: 'b2', expected_version: 1, evidence: 'carol moved it' }));
    const r = await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S);
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved).toEqual([{ field: 'b', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: 'carol moved it' }]);
    // append infers too
    const r2 = await append('alice', id, 'log', { entry: 'x', evidence: 'e' }, S);
    expectError(r2, 409, 'STALE_PREMISE');
    expect(r2.body).toMatchObject({ record: `plan/${id}`, field: 'log', current_version: 0, current_author: null });
    expect(r2.body.moved.map((m: any) => m.field)).toEqual(['b']);
  });

  test('based_on: [] disables inference: the write applies despite the move', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    await ok(put('carol', id, 'b', { value: 'b2', expected_version: 1 }));
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1, based_on: [] }, S));
    const a = (await get('alice', id)).body.fields.a;
    expect(a.version).toBe(2);
    expect(a.based_on ?? []).toEqual([]);
  });

  test('no scope, no inference', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S)); // read in S ...
    await ok(put('carol', id, 'b', { value: 'b2', expected_version: 1 }));
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 })); // ... written without a scope
    expect((await get('alice', id)).body.fields.a).not.toHaveProperty('based_on');

    // read without a scope, written in a scope that read nothing
    const id2 = await seedPlan();
    await ok(get('alice', id2));
    await ok(put('carol', id2, 'b', { value: 'b2', expected_version: 1 }));
    expectApplied(await put('alice', id2, 'a', { value: 'a2', expected_version: 1 }, newScope()));
    expect((await get('alice', id2)).body.fields.a).not.toHaveProperty('based_on');
  });

  test('reads older than 15 minutes are not inferred', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    await ok(put('carol', id, 'b', { value: 'b2', expected_version: 1 }));
    await sqlQuery(`update read_sets set read_at = now() - interval '16 minutes' where scope = $1`, [S]);
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S));
    expect((await get('alice', id)).body.fields.a).not.toHaveProperty('based_on');
  });

  test('query results feed inference', async () => {
    const tag = `t-${randomUUID()}`;
    const id = await seedPlan();
    await ok(put('alice', id, 'tag', { value: tag }));
    const S = newScope();
    const q = await t.call('alice', 'GET', `/v1/records/plan?tag=${tag}`, undefined, hdr(S));
    expect(q.status).toBe(200);
    expect(q.body.records.map((r: any) => r.record)).toEqual([`plan/${id}`]);
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S));
    expect(byField((await get('alice', id)).body.fields.a.based_on)).toEqual([
      { field: 'b', version: 1, inferred: true },
      { field: 'c', version: 1, inferred: true },
      { field: 'tag', version: 1, inferred: true },
    ]);

    // and a field seen through a query that moved since: STALE_PREMISE
    const tag2 = `t-${randomUUID()}`;
    const id2 = await seedPlan();
    await ok(put('alice', id2, 'tag', { value: tag2 }));
    const S2 = newScope();
    expect((await t.call('alice', 'GET', `/v1/records/plan?tag=${tag2}`, undefined, hdr(S2))).status).toBe(200);
    await ok(put('carol', id2, 'c', { value: 'c2', expected_version: 1 }));
    const r = await put('alice', id2, 'a', { value: 'a2', expected_version: 1 }, S2);
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved.map((m: any) => m.field)).toEqual(['c']);
  });

  test('a write in the scope counts as having seen its own new version', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S)); // a -> 2
    const r = await put('alice', id, 'b', { value: 'b2', expected_version: 1 }, S);
    expectApplied(r);
    expect(byField((await get('alice', id)).body.fields.b.based_on)).toEqual([
      { field: 'a', version: 2, inferred: true },
      { field: 'c', version: 1, inferred: true },
    ]);
    // the appended entry too
    await ok(append('alice', id, 'log', { entry: 'one', evidence: 'e' }, S));
    expectApplied(await put('alice', id, 'c', { value: 'c2', expected_version: 1 }, S));
  });

  test('across two gateway instances on one database: read through A, write through B', async () => {
    const b = await startTestGateway([plan], { db: t.db });
    try {
      const id = await seedPlan();
      const S = newScope();
      await ok(get('alice', id, S)); // through A
      expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, S, b));
      expect(byField((await get('alice', id, undefined, '', b)).body.fields.a.based_on)).toEqual([
        { field: 'b', version: 1, inferred: true },
        { field: 'c', version: 1, inferred: true },
      ]);

      const id2 = await seedPlan();
      const S2 = newScope();
      await ok(get('alice', id2, S2)); // through A
      await ok(put('carol', id2, 'b', { value: 'b2', expected_version: 1 }, undefined, b));
      const r = await put('alice', id2, 'a', { value: 'a2', expected_version: 1 }, S2, b);
      expectError(r, 409, 'STALE_PREMISE');
      expect(r.body.moved.map((m: any) => m.field)).toEqual(['b']);
    } finally {
      await b.close();
    }
  });
});

// ---------------------------------------------------------------------------------------
describe('IDENTITY_MISMATCH', () => {
  test("another identity using a scope in use: 403 on get, query and put; the body never names the owner", async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));

    const g = await get('bob', id, S);
    expectError(g, 403, 'IDENTITY_MISMATCH');
    expect(g.body.record).toBe(`plan/${id}`);
    expect(JSON.stringify(g.body)).not.toContain('alice');

    const q = await t.call('bob', 'GET', '/v1/records/plan?a=a1', undefined, hdr(S));
    expectError(q, 403, 'IDENTITY_MISMATCH');
    expect(JSON.stringify(q.body)).not.toContain('alice');

    const p = await put('bob', id, 'a', { value: 'bob was here', expected_version: 1 }, S);
    expectError(p, 403, 'IDENTITY_MISMATCH');
    expect(p.body).toMatchObject({ record: `plan/${id}`, field: 'a' });
    expect(JSON.stringify(p.body)).not.toContain('alice');
    expect((await get('alice', id)).body.fields.a).toMatchObject({ value: 'a1', version: 1 });
    expect(await lastRow(id, 'a')).toMatchObject({ outcome: 'identity_mismatch', author: 'apikey:bob', op: 'put', value: 'bob was here' });

    // checkpoint load and save are reads and writes too
    expectError(await t.call('bob', 'GET', `/v1/records/plan/${id}/checkpoint`, undefined, hdr(S)), 403, 'IDENTITY_MISMATCH');
    expectError(await t.call('bob', 'PUT', `/v1/records/plan/${id}/checkpoint`, { document: {} }, hdr(S)), 403, 'IDENTITY_MISMATCH');

    // the owner keeps using it; bob without the scope is fine
    expect((await get('alice', id, S)).status).toBe(200);
    expect((await get('bob', id)).status).toBe(200);
  });

  test('after the scope is idle for 15 minutes another identity may take it', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    await sqlQuery(`update scope_owners set last_used_at = now() - interval '14 minutes' where scope = $1`, [S]);
    expectError(await get('bob', id, S), 403, 'IDENTITY_MISMATCH');
    await sqlQuery(`update scope_owners set last_used_at = now() - interval '16 minutes' where scope = $1`, [S]);
    expect((await get('bob', id, S)).status).toBe(200);
    expectApplied(await put('bob', id, 'a', { value: 'a2', expected_version: 1 }, S));
    // now it is bob's
    expectError(await get('alice', id, S), 403, 'IDENTITY_MISMATCH');
  });

  test('the window runs from the last use: an owner who comes back after 15 minutes keeps the scope', async () => {
    const id = await seedPlan();
    const S = newScope();
    await ok(get('alice', id, S));
    await sqlQuery(`update scope_owners set last_used_at = now() - interval '16 minutes' where scope = $1`, [S]);
    expect((await get('alice', id, S)).status).toBe(200); // used again: in use from now
    expectError(await get('bob', id, S), 403, 'IDENTITY_MISMATCH');
  });

  test('rejection order: after UNKNOWN_FIELD, SCOPE_DENIED and NOT_WRITABLE; before body, type, enum, HELD, EVIDENCE_REQUIRED and STALE', async () => {
    const id = await seedPlan();
    await ok(claim('carol', id, { lease_seconds: 60 }));
    const S = newScope();
    await ok(get('alice', id, S));

    // earlier checks win
    expectError(await put('bob', id, 'nosuch', { value: 1, expected_version: 0 }, S), 422, 'UNKNOWN_FIELD');
    expectError(await put('dave', id, 'a', { value: 1, expected_version: 1 }, S), 403, 'SCOPE_DENIED');
    expectError(await put('bob', id, 'log', { value: 1, expected_version: 0 }, S), 422, 'NOT_WRITABLE');

    // IDENTITY_MISMATCH wins over everything after it
    const cases: [string, string, unknown][] = [
      ['type', 'n', { value: 'not a number', expected_version: 0 }],
      ['enum', 'n', { value: 7, expected_version: 0 }],
      ['evidence', 'proof', { value: 'p', expected_version: 0 }],
      ['stale', 'a', { value: 'x', expected_version: 5 }],
      ['premise', 'a', { value: 'x', expected_version: 1, based_on: [{ field: 'b', version: 9 }] }],
      ['bad JSON', 'a', '{"value": '],
    ];
    for (const [what, field, body] of cases) {
      const r = await put('bob', id, field, body, S);
      expect(r.body.error, what).toBe('IDENTITY_MISMATCH');
      expect(r.status, what).toBe(403);
    }
    // claim: before HELD
    const c = await claim('bob', id, { lease_seconds: 60 }, S);
    expectError(c, 403, 'IDENTITY_MISMATCH');
    // append: before EVIDENCE_REQUIRED
    expectError(await append('bob', id, 'log', { entry: 1 }, S), 403, 'IDENTITY_MISMATCH');

    // without the scope, the same requests get their own errors
    expectError(await put('bob', id, 'n', { value: 'not a number', expected_version: 0 }), 400, 'MALFORMED');
    expectError(await put('bob', id, 'n', { value: 7, expected_version: 0 }), 400, 'MALFORMED');
    expectError(await put('bob', id, 'proof', { value: 'p', expected_version: 0 }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('bob', id, 'a', { value: 'x', expected_version: 5 }), 409, 'STALE');
    expectError(await claim('bob', id, { lease_seconds: 60 }), 409, 'HELD');
  });

  test('X-Svc-Scope over 256 bytes: MALFORMED; 256 bytes is fine', async () => {
    const id = await seedPlan();
    const long = 's'.repeat(257);
    expectError(await get('alice', id, long), 400, 'MALFORMED');
    expectError(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, long), 400, 'MALFORMED');
    expect((await get('alice', id)).body.fields.a.version).toBe(1);
    const exact = `${randomUUID()}-`.padEnd(256, 'x');
    expect((await get('alice', id, exact)).status).toBe(200);
    expectApplied(await put('alice', id, 'a', { value: 'a2', expected_version: 1 }, exact));
  });
});

describe('premises on fields the reader may not read', () => {
  test('get, query and history leave out premises naming fields the role cannot read (their versions are its metadata)', async () => {
    const id = fresh('hide');
    await ok(put('alice', id, 'b', { value: 'secret plan', expected_version: 0 }));
    await ok(put('alice', id, 'a', { value: 'v1', expected_version: 0, based_on: [] }));
    await ok(put('alice', id, 'a', { value: 'v2', expected_version: 1, based_on: [{ field: 'a', version: 1 }, { field: 'b', version: 1 }] }));
    await ok(put('alice', id, 'c', { value: 'x', expected_version: 0, based_on: [{ field: 'b', version: 1 }] }));

    // alice (worker) reads everything and sees every premise.
    const full = await ok(get('alice', id));
    expect(full.fields.a.based_on).toEqual([{ field: 'a', version: 1 }, { field: 'b', version: 1 }]);

    // dave (onlooker) reads only `a`: the premise on `b` is left out, the one on `a` stays.
    const seen = await ok(get('dave', id));
    expect(seen.fields.a.based_on).toEqual([{ field: 'a', version: 1 }]);
    expect(JSON.stringify(seen)).not.toContain('"b"');

    const hist = await ok(history('dave', id));
    const rows = hist.history as { field: string; version?: number; based_on?: { field: string }[] }[];
    expect(rows.every((r) => r.field === 'a')).toBe(true);
    expect(rows.find((r) => r.version === 2)!.based_on).toEqual([{ field: 'a', version: 1 }]);
    // The declared "rests on nothing" stays visible.
    expect(rows.find((r) => r.version === 1)!.based_on).toEqual([]);

    const q = await ok(t.call('dave', 'GET', `/v1/records/plan?a=v2`));
    const rec = q.records.find((r: { record: string }) => r.record === `plan/${id}`);
    expect(rec.fields.a.based_on).toEqual([{ field: 'a', version: 1 }]);
  });

  test('a write whose premises are all unreadable shows no based_on at all to that reader', async () => {
    const id = fresh('hide');
    await ok(put('alice', id, 'b', { value: 1, expected_version: 0 }));
    await ok(put('alice', id, 'a', { value: 'x', expected_version: 0, based_on: [{ field: 'b', version: 1 }] }));
    expect((await ok(get('alice', id))).fields.a.based_on).toEqual([{ field: 'b', version: 1 }]);
    const seen = await ok(get('dave', id));
    expect(seen.fields.a).not.toHaveProperty('based_on');
    const hist = await ok(history('dave', id, 'a'));
    expect(hist.history[0]).not.toHaveProperty('based_on');
  });
});
