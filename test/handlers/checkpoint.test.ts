/**
 * Checkpoints (interface.md "Checkpoint", "checkpoint save", "checkpoint load", "Status
 * gate"; decisions §4), against a real gateway and PostgreSQL. Expectations come from the
 * specification, not from the code.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { caseflow, strongroom } from '../fixtures/flow-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([caseflow, strongroom]);
});
afterAll(() => t?.close());

type Res = { status: number; body: any };

let seq = 0;
const fresh = (prefix = 'c') => `${prefix}-${++seq}`;

const rec = (id: string) => `/v1/records/caseflow/${id}`;
const put = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'PUT', `${rec(id)}/fields/${field}`, body);
const append = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'POST', `${rec(id)}/fields/${field}/entries`, body);
const claim = (who: string, id: string, field: string, body?: unknown): Promise<Res> =>
  t.call(who, 'PUT', `${rec(id)}/fields/${field}/claim`, body);
const save = (who: string, id: string, body: unknown, cls = 'caseflow'): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/${cls}/${id}/checkpoint`, body);
const load = (who: string, id: string, role?: string): Promise<Res> =>
  t.call(who, 'GET', `${rec(id)}/checkpoint${role === undefined ? '' : `?role=${encodeURIComponent(role)}`}`);
const get = (who: string, id: string): Promise<Res> => t.call(who, 'GET', rec(id));

const DOC = { summary: 'looked at the logs', next_steps: ['restart the pod'] };

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
}

async function ok(res: Promise<Res>): Promise<any> {
  const r = await res;
  if (r.status !== 200 && r.status !== 201) throw new Error(`seed failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** A record with title v1 (written by alice); returns its id. */
async function seedRecord(): Promise<string> {
  const id = fresh();
  await ok(put('alice', id, 'title', { value: 'disk full', expected_version: 0, evidence: 'pager' }));
  return id;
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

const byField = (list: any[]) => [...list].sort((a, b) => String(a.field).localeCompare(String(b.field)));

// ---------------------------------------------------------------------------------------
describe('checkpoint save', () => {
  test('200 {record, role, checkpoint_id, record_version}', async () => {
    const id = await seedRecord();
    await ok(put('alice', id, 'status', { value: 'open', expected_version: 0 }));
    const r = await save('alice', id, { document: DOC });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ record: `caseflow/${id}`, role: 'responder', checkpoint_id: r.body.checkpoint_id, record_version: 2 });
    expect(Number.isInteger(r.body.checkpoint_id)).toBe(true);
  });

  test('checkpoint_id rises with each save', async () => {
    const id = await seedRecord();
    const ids: number[] = [];
    for (let i = 0; i < 3; i++) {
      const r = await save('alice', id, { document: { ...DOC, summary: `pass ${i}` } });
      expect(r.status).toBe(200);
      ids.push(r.body.checkpoint_id);
    }
    expect(ids[1]).toBeGreaterThan(ids[0]);
    expect(ids[2]).toBeGreaterThan(ids[1]);
    // the last one is what a load returns
    expect((await load('alice', id)).body.document).toEqual({ ...DOC, summary: 'pass 2' });
  });

  test('saving does not raise record_version', async () => {
    const id = await seedRecord();
    const before = (await get('alice', id)).body.record_version;
    const r1 = await save('alice', id, { document: DOC });
    const r2 = await save('alice', id, { document: DOC });
    expect(r1.body.record_version).toBe(before);
    expect(r2.body.record_version).toBe(before);
    expect((await get('alice', id)).body.record_version).toBe(before);
    // the next applied write is exactly one above
    const w = await ok(put('alice', id, 'title', { value: 'x', expected_version: 1 }));
    expect(w.record_version).toBe(before + 1);
  });

  test('per role, not per identity: carol (same role) loads what alice saved', async () => {
    const id = await seedRecord();
    const s = await save('alice', id, { document: { ...DOC, by: 'alice' } });
    expect(s.status).toBe(200);
    const l = await load('carol', id);
    expect(l.status).toBe(200);
    expect(l.body.role).toBe('responder');
    expect(l.body.document).toEqual({ ...DOC, by: 'alice' });
    // carol's save replaces the role's checkpoint (one per role), with a higher id
    const s2 = await save('carol', id, { document: { ...DOC, by: 'carol' } });
    expect(s2.body.role).toBe('responder');
    expect(s2.body.checkpoint_id).toBeGreaterThan(s.body.checkpoint_id);
    expect((await load('alice', id)).body.document).toEqual({ ...DOC, by: 'carol' });
    // another role's checkpoint is separate
    expect((await load('bob', id)).body.document).toBeNull();
  });

  test('an identity with two roles in the class: save is MALFORMED', async () => {
    const id = await seedRecord();
    const r = await save('dave', id, { document: DOC });
    expectError(r, 400, 'MALFORMED');
    expect((await load('alice', id)).body.document).toBeNull();
    expect((await load('bob', id)).body.document).toBeNull();
  });

  test.each([
    ['an array', [1, 2]],
    ['a string', 'summary and next steps'],
    ['a number', 42],
    ['null', null],
  ])('document that is %s: 422 INVALID_CHECKPOINT', async (_what, document) => {
    const id = await seedRecord();
    const r = await save('alice', id, { document });
    expectError(r, 422, 'INVALID_CHECKPOINT');
    expect((await load('alice', id)).body.document).toBeNull();
  });

  test('document over 64 KiB: INVALID_CHECKPOINT; just under is accepted', async () => {
    const id = await seedRecord();
    const big = await save('alice', id, { document: { ...DOC, pad: 'x'.repeat(64 * 1024) } });
    expectError(big, 422, 'INVALID_CHECKPOINT');
    expect((await load('alice', id)).body.document).toBeNull();
    const under = await save('alice', id, { document: { ...DOC, pad: 'x'.repeat(60 * 1024) } });
    expect(under.status).toBe(200);
  });

  test('document missing a checkpoint.sections key: INVALID_CHECKPOINT naming it', async () => {
    const id = await seedRecord();
    const r = await save('alice', id, { document: { summary: 'only this' } });
    expectError(r, 422, 'INVALID_CHECKPOINT');
    expect(r.body.message).toContain('next_steps');
    const r2 = await save('alice', id, { document: { next_steps: [] } });
    expectError(r2, 422, 'INVALID_CHECKPOINT');
    expect(r2.body.message).toContain('summary');
    // extra keys beyond the sections are fine
    expect((await save('alice', id, { document: { ...DOC, extra: { deep: true } } })).status).toBe(200);
  });

  test('missing `document` or bad JSON: MALFORMED', async () => {
    const id = await seedRecord();
    expectError(await save('alice', id, {}), 400, 'MALFORMED');
    expectError(await save('alice', id, '{"document": '), 400, 'MALFORMED');
    expectError(await save('alice', id, DOC), 400, 'MALFORMED');
    expect((await load('alice', id)).body.document).toBeNull();
  });

  test('the class minIdentityStrength floor applies: WEAK_IDENTITY with required and presented, no field', async () => {
    // The record exists (seeded by SQL: no API key can write to this class).
    await sqlQuery(`insert into records (class, rid, record_version) values ('strongroom', 'vault', 0)`);
    const r = await save('alice', 'vault', { document: { summary: 's' } }, 'strongroom');
    expectError(r, 403, 'WEAK_IDENTITY');
    expect(r.body.required).toBe('sa-bound');
    expect(r.body.presented).toBe('shared-secret');
    expect(r.body).not.toHaveProperty('field');
    const cp = await sqlQuery(
      `select count(*)::int as n from checkpoints c join records r on r.rid = c.rid and r.id = c.record_id where r.class = 'strongroom'`,
    );
    expect(cp[0].n).toBe(0);
  });

  test("a field's own floor never applies to save", async () => {
    // `strong` needs pod-bound; alice (shared-secret) may read and write it by role.
    const id = await seedRecord();
    expectError(await put('alice', id, 'strong', { value: 1, expected_version: 0 }), 403, 'WEAK_IDENTITY');
    const r = await save('alice', id, { document: DOC });
    expect(r.status).toBe(200);
    expect(r.body.role).toBe('responder');
  });

  test('save and load on a record that does not exist: NOT_FOUND', async () => {
    const id = fresh('nope');
    expectError(await save('alice', id, { document: DOC }), 404, 'NOT_FOUND');
    expectError(await load('alice', id), 404, 'NOT_FOUND');
    // and the save did not create it
    expectError(await get('alice', id), 404, 'NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------
describe('checkpoint load', () => {
  test('an identity with two roles must name one; a role not held is MALFORMED', async () => {
    const id = await seedRecord();
    await ok(save('alice', id, { document: { ...DOC, by: 'responder' } }));
    await ok(save('bob', id, { document: { ...DOC, by: 'reviewer' } }));
    expectError(await load('dave', id), 400, 'MALFORMED');
    const asResponder = await load('dave', id, 'responder');
    expect(asResponder.status).toBe(200);
    expect(asResponder.body).toMatchObject({ role: 'responder', document: { ...DOC, by: 'responder' } });
    const asReviewer = await load('dave', id, 'reviewer');
    expect(asReviewer.status).toBe(200);
    expect(asReviewer.body).toMatchObject({ role: 'reviewer', document: { ...DOC, by: 'reviewer' } });
    // changed_fields follow the role named, not everything the identity may read
    await ok(put('alice', id, 'severity', { value: 2, expected_version: 0, evidence: 'sev' }));
    await ok(put('bob', id, 'hidden', { value: 'h', expected_version: 0, evidence: 'rev' }));
    expect((await load('dave', id, 'responder')).body.changed_fields.map((c: any) => c.field)).toEqual(['severity']);
    expect((await load('dave', id, 'reviewer')).body.changed_fields.map((c: any) => c.field)).toEqual(['hidden']);
    expectError(await load('dave', id, 'admin'), 400, 'MALFORMED');
    // alice holds only responder: reviewer is a role of the class she does not hold
    expectError(await load('alice', id, 'reviewer'), 400, 'MALFORMED');
    // naming the one role held is fine
    expect((await load('alice', id, 'responder')).body.role).toBe('responder');
  });

  test('200 {record, role, document, record_version, changed_fields}', async () => {
    const id = await seedRecord();
    const s = await ok(save('alice', id, { document: DOC }));
    const l = await load('alice', id);
    expect(l.status).toBe(200);
    expect(Object.keys(l.body).sort()).toEqual(['changed_fields', 'document', 'record', 'record_version', 'role']);
    expect(l.body).toEqual({ record: `caseflow/${id}`, role: 'responder', document: DOC, record_version: s.record_version, changed_fields: [] });
  });

  test('changed_fields: readable fields changed after the checkpoint; never task fields, never unreadable ones', async () => {
    const id = await seedRecord(); // title v1
    await ok(put('alice', id, 'status', { value: 'open', expected_version: 0, evidence: 'triage' }));
    await ok(put('alice', id, 'severity', { value: 3, expected_version: 0, evidence: 'sev' }));
    const s = await ok(save('alice', id, { document: DOC }));
    expect(s.record_version).toBe(3);

    // after the checkpoint: title moves (carol), a note (carol), a claim, a field responders cannot read
    await ok(put('carol', id, 'title', { value: 'disk really full', expected_version: 1, evidence: 'df -h' }));
    await ok(append('carol', id, 'notes', { entry: { text: 'cleared /tmp' }, evidence: 'shell' }));
    await ok(claim('carol', id, 'task', { lease_seconds: 60 }));
    await ok(put('bob', id, 'hidden', { value: 'reviewer only', expected_version: 0, evidence: 'review' }));
    await ok(put('alice', id, 'scratch', { value: { n: 1 }, evidence: 'scratchpad' }));

    const l = await load('alice', id);
    expect(l.status).toBe(200);
    expect(l.body.record_version).toBe(3);
    expect(l.body.document).toEqual(DOC);
    for (const c of l.body.changed_fields) expect(Object.keys(c).sort()).toEqual(['author', 'evidence', 'field', 'version']);
    expect(byField(l.body.changed_fields)).toEqual([
      { field: 'notes', version: 1, author: 'apikey:carol', evidence: 'shell' },
      { field: 'scratch', version: 1, author: 'apikey:alice', evidence: 'scratchpad' },
      { field: 'title', version: 2, author: 'apikey:carol', evidence: 'df -h' },
    ]);

    // The reviewer (no checkpoint) sees what it may read: hidden but not severity, scratch, task.
    const r = await load('bob', id);
    expect(r.body.document).toBeNull();
    expect(byField(r.body.changed_fields).map((c: any) => c.field)).toEqual(['hidden', 'notes', 'status', 'title']);
  });

  test('no checkpoint: document null, record_version 0, every readable non-task field written at least once', async () => {
    const id = await seedRecord(); // title v1 (evidence pager)
    await ok(put('alice', id, 'status', { value: 'open', expected_version: 0, evidence: 'e-status' }));
    await ok(put('alice', id, 'status', { value: 'investigating', expected_version: 1, evidence: 'e-status-2' }));
    await ok(append('alice', id, 'notes', { entry: 'n1', evidence: 'e-n1' }));
    await ok(append('carol', id, 'notes', { entry: 'n2', evidence: 'e-n2' }));
    await ok(claim('alice', id, 'task', { lease_seconds: 60 }));
    await ok(put('bob', id, 'hidden', { value: 1, expected_version: 0, evidence: 'e-hidden' }));

    const l = await load('alice', id);
    expect(l.status).toBe(200);
    expect(l.body).toMatchObject({ record: `caseflow/${id}`, role: 'responder', document: null, record_version: 0 });
    expect(byField(l.body.changed_fields)).toEqual([
      { field: 'notes', version: 2, author: 'apikey:carol', evidence: 'e-n2' },
      { field: 'status', version: 2, author: 'apikey:alice', evidence: 'e-status-2' },
      { field: 'title', version: 1, author: 'apikey:alice', evidence: 'pager' },
    ]);
  });
});

// ---------------------------------------------------------------------------------------
describe('resolve gate', () => {
  /** A record with status open (v1) and title v1. */
  async function openCase(): Promise<string> {
    const id = await seedRecord();
    await ok(put('alice', id, 'status', { value: 'open', expected_version: 0 }));
    return id;
  }

  test('status=resolved while a required role has not checkpointed: 422 INVALID_CHECKPOINT; after it has, the same put applies', async () => {
    const id = await openCase();
    await ok(save('alice', id, { document: DOC })); // responder done, reviewer not

    const r = await put('alice', id, 'status', { value: 'resolved', expected_version: 1 });
    expectError(r, 422, 'INVALID_CHECKPOINT');
    expect(Object.keys(r.body).sort()).toEqual(['error', 'field', 'message', 'record']);
    expect(r.body).toMatchObject({ field: 'status', record: `caseflow/${id}` });
    expect(r.body.message).toContain('reviewer');
    const g = await get('alice', id);
    expect(g.body.fields.status).toMatchObject({ value: 'open', version: 1 });
    expect(g.body.record_version).toBe(2);

    await ok(save('bob', id, { document: DOC }));
    const again = await put('alice', id, 'status', { value: 'resolved', expected_version: 1 });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ record: `caseflow/${id}`, field: 'status', version: 2, record_version: 3 });
  });

  test('the message names every role that has not checkpointed; other status values are not gated', async () => {
    const id = await openCase();
    const r = await put('alice', id, 'status', { value: 'resolved', expected_version: 1 });
    expectError(r, 422, 'INVALID_CHECKPOINT');
    expect(r.body.message).toContain('responder');
    expect(r.body.message).toContain('reviewer');
    expect((await put('alice', id, 'status', { value: 'investigating', expected_version: 1 })).status).toBe(200);
  });

  test('gate order: STALE before the gate', async () => {
    const id = await openCase();
    const r = await put('alice', id, 'status', { value: 'resolved', expected_version: 0 });
    expectError(r, 409, 'STALE');
  });

  test('gate order: the gate before STALE_PREMISE', async () => {
    const id = await openCase();
    await ok(put('alice', id, 'title', { value: 'moved', expected_version: 1 })); // title now v2
    const body = { value: 'resolved', expected_version: 1, based_on: [{ field: 'title', version: 1 }] };
    expectError(await put('alice', id, 'status', body), 422, 'INVALID_CHECKPOINT');
    // once the gate is open, the same put is STALE_PREMISE: the premise really moved
    await ok(save('alice', id, { document: DOC }));
    await ok(save('bob', id, { document: DOC }));
    expectError(await put('alice', id, 'status', body), 409, 'STALE_PREMISE');
  });
});
