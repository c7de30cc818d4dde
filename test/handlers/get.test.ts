/**
 * get: GET /v1/records/{class}/{id}?fields=a,b&entries_limit=N, against a real gateway and
 * PostgreSQL. Expectations come from interface.md and the decisions.
 */
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { type TestGateway, TS, useGatewayWithSql } from '../setup/gateway.js';


let t: TestGateway;
let sql: pg.Client;
useGatewayWithSql((g, c) => ((t = g), (sql = c)), [incident]);

type Res = { status: number; body: any };

let seq = 0;
const fresh = (prefix = 'g') => `${prefix}-${++seq}`;

const put = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/incident/${id}/fields/${field}`, body);

const get = (who: string | null, id: string, query = ''): Promise<Res> =>
  t.call(who, 'GET', `/v1/records/incident/${id}${query}`);

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

async function mustPut(who: string, id: string, field: string, body: unknown): Promise<Res> {
  const r = await put(who, id, field, body);
  expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
  return r;
}

/** Seed `n` entries of the append field `notes` (append is not implemented yet). */
async function seedNotes(id: string, n: number): Promise<void> {
  const rec = await sql.query<{ id: string; record_version: string }>(
    `select id, record_version from records where class = 'incident' and rid = $1`,
    [id],
  );
  expect(rec.rows.length).toBe(1);
  const recordId = rec.rows[0].id;
  const rv = Number(rec.rows[0].record_version) + n;
  for (let i = 1; i <= n; i++) {
    await sql.query(
      `insert into entries (rid, record_id, field, seq, value, author, identity_strength, evidence)
       values ($5, $1, 'notes', $2, $3::jsonb, 'apikey:alice', 'shared-secret', $4)`,
      [recordId, i, JSON.stringify({ n: i }), `evidence ${i}`, id],
    );
  }
  await sql.query(
    `insert into fields (rid, record_id, class, name, kind, value, version, record_version, author, identity_strength, updated_at)
     values ($4, $1, 'incident', 'notes', 'append', null, $2, $3, 'apikey:alice', 'shared-secret', now())`,
    [recordId, n, rv, id],
  );
  await sql.query(`update records set record_version = $2 where rid = $3 and id = $1`, [recordId, rv, id]);
}

// ---------------------------------------------------------------------------------------
describe('response shape', () => {
  test('{record, record_version, fields}', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 'hello', expected_version: 0 });
    await mustPut('alice', id, 'severity', { value: 2, expected_version: 0 });
    await mustPut('alice', id, 'severity', { value: 3, expected_version: 1 });
    const g = await get('alice', id);
    expect(g.status).toBe(200);
    expect(Object.keys(g.body).sort()).toEqual(['fields', 'record', 'record_version']);
    expect(g.body.record).toBe(`incident/${id}`);
    expect(g.body.record_version).toBe(3);
    expect(Object.keys(g.body.fields).sort()).toEqual(['severity', 'title']);
    expect(g.body.fields.title).toMatchObject({ value: 'hello', version: 1 });
    expect(g.body.fields.severity).toMatchObject({ value: 3, version: 2 });
  });

  test('a field value has every key of the table when supplied', async () => {
    const id = fresh();
    await mustPut('alice', id, 'status', { value: 'open', expected_version: 0 });
    const invocation = { tool: 'triage-bot', args: { z: 1, a: [true, null] } };
    const before = Date.now();
    await mustPut('alice', id, 'title', {
      value: 'Database down',
      expected_version: 0,
      evidence: 'pager alert 1234',
      based_on: [{ field: 'status', version: 1 }],
      invocation,
    });
    const after = Date.now();
    const g = await get('alice', id);
    const f = g.body.fields.title;
    expect(Object.keys(f).sort()).toEqual(
      ['author', 'based_on', 'evidence', 'identity_strength', 'invocation', 'updated_at', 'value', 'version'].sort(),
    );
    expect(f).toMatchObject({
      value: 'Database down',
      version: 1,
      author: 'apikey:alice',
      identity_strength: 'shared-secret',
      evidence: 'pager alert 1234',
      based_on: [{ field: 'status', version: 1 }],
    });
    expect(f.based_on).toEqual([{ field: 'status', version: 1 }]);
    expect(f.invocation).toEqual(invocation);
    expect(JSON.stringify(f.invocation)).toBe(JSON.stringify(invocation));
    expect(f.updated_at).toMatch(TS);
    const ts = Date.parse(f.updated_at);
    expect(ts).toBeGreaterThanOrEqual(before - 5_000);
    expect(ts).toBeLessThanOrEqual(after + 5_000);
  });

  test('evidence, based_on and invocation are absent when not supplied', async () => {
    const id = fresh();
    await mustPut('carol', id, 'status', { value: 'investigating', expected_version: 0 });
    await mustPut('carol', id, 'scratch', { value: { k: 'v' } });
    const g = await get('alice', id);
    for (const name of ['status', 'scratch']) {
      const f = g.body.fields[name];
      expect(Object.keys(f).sort(), name).toEqual(['author', 'identity_strength', 'updated_at', 'value', 'version']);
      expect(f.author).toBe('apikey:carol');
      expect(f.identity_strength).toBe('shared-secret');
      expect(f.updated_at).toMatch(TS);
    }
    expect(g.body.fields.status).toMatchObject({ value: 'investigating', version: 1 });
    expect(g.body.fields.scratch).toMatchObject({ value: { k: 'v' }, version: 1 });
  });

  test('a later write without evidence, based_on or invocation drops the earlier ones', async () => {
    const id = fresh();
    await mustPut('alice', id, 'status', { value: 'open', expected_version: 0 });
    await mustPut('alice', id, 'title', {
      value: 'a',
      expected_version: 0,
      evidence: 'e',
      based_on: [{ field: 'status', version: 1 }],
      invocation: { x: 1 },
    });
    await mustPut('carol', id, 'title', { value: 'b', expected_version: 1 });
    const f = (await get('alice', id)).body.fields.title;
    expect(f).toMatchObject({ value: 'b', version: 2, author: 'apikey:carol' });
    expect(f).not.toHaveProperty('evidence');
    expect(f).not.toHaveProperty('based_on');
    expect(f).not.toHaveProperty('invocation');
  });

  test('fields never written are left out', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 'only title', expected_version: 0 });
    const g = await get('alice', id);
    expect(Object.keys(g.body.fields)).toEqual(['title']);
  });
});

// ---------------------------------------------------------------------------------------
describe('fields parameter', () => {
  test('fields=a,b limits the response to those fields', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await mustPut('alice', id, 'status', { value: 'open', expected_version: 0 });
    await mustPut('alice', id, 'severity', { value: 1, expected_version: 0 });
    await mustPut('alice', id, 'scratch', { value: 's' });

    const g = await get('alice', id, '?fields=title,status');
    expect(g.status).toBe(200);
    expect(Object.keys(g.body.fields).sort()).toEqual(['status', 'title']);
    expect(g.body.record_version).toBe(4);

    const one = await get('alice', id, '?fields=severity');
    expect(Object.keys(one.body.fields)).toEqual(['severity']);

    // A named field without a value is left out too.
    const withEmpty = await get('alice', id, '?fields=title,blob');
    expect(Object.keys(withEmpty.body.fields)).toEqual(['title']);
  });

  test('an unknown field in `fields` is UNKNOWN_FIELD', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    expectError(await get('alice', id, '?fields=title,ghost'), 422, 'UNKNOWN_FIELD');
    expectError(await get('alice', id, '?fields=ghost'), 422, 'UNKNOWN_FIELD');
  });

  test('an unreadable field in `fields` is SCOPE_DENIED', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await mustPut('alice', id, 'severity', { value: 1, expected_version: 0 });
    await mustPut('alice', id, 'secret', { value: 's', expected_version: 0 });
    // bob (reviewer) reads title, status, notes only.
    expectError(await get('bob', id, '?fields=title,severity'), 403, 'SCOPE_DENIED');
    expectError(await get('bob', id, '?fields=scratch'), 403, 'SCOPE_DENIED');
    // alice (responder) may write `secret` but not read it.
    expectError(await get('alice', id, '?fields=secret'), 403, 'SCOPE_DENIED');
    // Even when the field has no value yet.
    expectError(await get('bob', id, '?fields=blob'), 403, 'SCOPE_DENIED');
  });

  test('without `fields`, only the fields the role may read are returned', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await mustPut('alice', id, 'status', { value: 'open', expected_version: 0 });
    await mustPut('alice', id, 'severity', { value: 1, expected_version: 0 });
    await mustPut('alice', id, 'scratch', { value: 's' });
    await mustPut('alice', id, 'secret', { value: 'hidden', expected_version: 0 });

    const bob = await get('bob', id);
    expect(bob.status).toBe(200);
    expect(Object.keys(bob.body.fields).sort()).toEqual(['status', 'title']);
    expect(bob.body.record_version).toBe(5);

    const alice = await get('alice', id);
    expect(Object.keys(alice.body.fields).sort()).toEqual(['scratch', 'severity', 'status', 'title']);
    expect(JSON.stringify(alice.body)).not.toContain('hidden');
  });
});

// ---------------------------------------------------------------------------------------
describe('errors', () => {
  test('an unknown record is NOT_FOUND 404', async () => {
    expectError(await get('alice', 'never-written'), 404, 'NOT_FOUND');
    expectError(await get('alice', 'never-written', '?fields=title'), 404, 'NOT_FOUND');
  });

  test('an unknown class is NOT_FOUND 404', async () => {
    expectError(await t.call('alice', 'GET', '/v1/records/nosuchclass/x'), 404, 'NOT_FOUND');
  });

  test('an identity without a role is NO_ROLE', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    const r = await get('dave', id);
    expectError(r, 403, 'NO_ROLE');
    expect(JSON.stringify(r.body)).not.toContain('"t"');
  });

  test('a record id not matching idPattern is MALFORMED', async () => {
    expectError(await get('alice', 'NOT-lower'), 400, 'MALFORMED');
  });

  test('no Authorization header is UNAUTHENTICATED 401', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    expectError(await get(null, id), 401, 'UNAUTHENTICATED');
  });

  test('a bad key is UNAUTHENTICATED 401', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    expectError(await get('not-a-valid-key', id), 401, 'UNAUTHENTICATED');
    const raw = await fetch(`${t.url}/v1/records/incident/${id}`, { headers: { authorization: 'Basic YWxpY2U6eA==' } });
    expectError({ status: raw.status, body: await raw.json() }, 401, 'UNAUTHENTICATED');
  });
});

// ---------------------------------------------------------------------------------------
describe('append fields and entries_limit', () => {
  test('without entries_limit every entry is returned and version is the entry count', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await seedNotes(id, 5);
    const g = await get('alice', id);
    expect(g.status).toBe(200);
    const notes = g.body.fields.notes;
    expect(notes.version).toBe(5);
    expect(notes.entries).toHaveLength(5);
    expect(notes.entries.map((e: any) => e.seq).sort()).toEqual([1, 2, 3, 4, 5]);
    for (const e of notes.entries) {
      expect(e.value).toEqual({ n: e.seq });
      expect(e.author).toBe('apikey:alice');
      expect(e.evidence).toBe(`evidence ${e.seq}`);
      expect(e.updated_at).toMatch(TS);
    }
    // bob's role reads notes too.
    const bob = await get('bob', id, '?fields=notes');
    expect(bob.body.fields.notes.version).toBe(5);
  });

  test('entries_limit caps entries per append field while version stays the full count', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await seedNotes(id, 5);
    for (const n of [2, 1, 0]) {
      const g = await get('alice', id, `?entries_limit=${n}`);
      expect(g.status).toBe(200);
      expect(g.body.fields.notes.version).toBe(5);
      expect(g.body.fields.notes.entries).toHaveLength(n);
      const seqs = g.body.fields.notes.entries.map((e: any) => e.seq);
      expect(new Set(seqs).size).toBe(n);
      for (const s of seqs) expect(s).toBeGreaterThanOrEqual(1);
      for (const s of seqs) expect(s).toBeLessThanOrEqual(5);
      // Non-append fields are unaffected.
      expect(g.body.fields.title).toMatchObject({ value: 't', version: 1 });
    }
    const big = await get('alice', id, '?entries_limit=50&fields=notes');
    expect(big.body.fields.notes.entries).toHaveLength(5);
    expect(big.body.fields.notes.version).toBe(5);
  });

  test('a bad entries_limit is MALFORMED', async () => {
    const id = fresh();
    await mustPut('alice', id, 'title', { value: 't', expected_version: 0 });
    await seedNotes(id, 2);
    for (const bad of ['-1', 'x', '1.5', '', '1e400']) {
      const r = await get('alice', id, `?entries_limit=${encodeURIComponent(bad)}`);
      expect(r.body?.error, `entries_limit=${bad}`).toBe('MALFORMED');
      expectError(r, 400, 'MALFORMED');
    }
  });
});
