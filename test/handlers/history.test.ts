/**
 * History (interface.md "History row", "history", "Limits"; decisions §4; docs/decisions.md
 * "History"): one row per write attempt with the listed outcomes, newest first, readable
 * fields only, value capping, limits and authenticated paging cursors.
 */
import { createHash } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;

beforeAll(async () => {
  t = await startTestGateway([incident]);
});
afterAll(() => t?.close());

const P = (id: string, field: string) => `/v1/records/incident/${id}/fields/${field}`;
const H = (id: string, q = '') => `/v1/records/incident/${id}/history${q}`;

/** Every key the spec's History row table allows, plus the size/digest pair of docs/decisions.md. */
const ROW_KEYS = new Set([
  'seq',
  'field',
  'op',
  'version',
  'record_version',
  'value',
  'value_size',
  'value_sha256',
  'author',
  'identity_strength',
  'evidence',
  'expected_version',
  'based_on',
  'invocation',
  'outcome',
  'created_at',
]);
const OUTCOMES = ['applied', 'stale', 'stale_premise', 'held', 'scope_denied', 'weak_identity', 'evidence_required', 'identity_mismatch'];
const RFC3339_MS = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}([+-]\d{2}:\d{2})$/;

/** The server's UTC offset as RFC 3339 writes it (the gateway runs in this process). */
function serverOffset(): string {
  const off = -new Date().getTimezoneOffset();
  const a = Math.abs(off);
  return `${off >= 0 ? '+' : '-'}${String(Math.trunc(a / 60)).padStart(2, '0')}:${String(a % 60).padStart(2, '0')}`;
}

function checkRow(r: any): void {
  for (const k of Object.keys(r)) expect(ROW_KEYS, `unexpected history row key "${k}"`).toContain(k);
  expect(Number.isSafeInteger(r.seq)).toBe(true);
  expect(typeof r.field).toBe('string');
  expect(r.op).toBe('put');
  expect(OUTCOMES).toContain(r.outcome);
  expect(typeof r.author).toBe('string');
  expect(r.created_at).toMatch(RFC3339_MS);
  expect(RFC3339_MS.exec(r.created_at)![1]).toBe(serverOffset());
  expect(Math.abs(Date.parse(r.created_at) - Date.now())).toBeLessThan(10 * 60_000);
  if (r.outcome === 'applied') {
    expect(Number.isSafeInteger(r.version)).toBe(true);
    expect(Number.isSafeInteger(r.record_version)).toBe(true);
  } else {
    expect(r).not.toHaveProperty('version');
  }
  if ('value_sha256' in r) {
    expect(r).not.toHaveProperty('value');
    expect(r.value_sha256).toMatch(/^[0-9a-f]{64}$/);
    expect(Number.isSafeInteger(r.value_size)).toBe(true);
  }
}

async function history(who: string, id: string, q = ''): Promise<{ status: number; body: any }> {
  const res = await t.call(who, 'GET', H(id, q));
  if (res.status === 200) {
    expect(Object.keys(res.body).sort()).toEqual(
      'next_before' in res.body ? ['history', 'next_before', 'record'] : ['history', 'record'],
    );
    expect(res.body.record).toBe(`incident/${id}`);
    const seqs = res.body.history.map((r: any) => r.seq);
    // newest first
    for (let i = 1; i < seqs.length; i++) expect(seqs[i]).toBeLessThan(seqs[i - 1]);
    for (const r of res.body.history) checkRow(r);
  }
  return res;
}

async function put(who: string, id: string, field: string, body: unknown) {
  return t.call(who, 'PUT', P(id, field), body);
}

async function sql<T = any>(text: string, params: unknown[] = []): Promise<T[]> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    return (await c.query(text, params)).rows as T[];
  } finally {
    await c.end();
  }
}

const outcomesInDb = async (rid: string, field?: string) =>
  (
    await sql<{ outcome: string }>(
      `select outcome from history where class = 'incident' and rid = $1 ${field ? 'and field = $2' : ''} order by id`,
      field ? [rid, field] : [rid],
    )
  ).map((r) => r.outcome);

const sha256 = (v: unknown) => createHash('sha256').update(JSON.stringify(v)).digest('hex');
const size = (v: unknown) => Buffer.byteLength(JSON.stringify(v));

/** Run `n` writes with a few in flight at once. */
async function many(n: number, fn: (i: number) => Promise<unknown>, width = 8): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      for (let i = next++; i < n; i = next++) await fn(i);
    }),
  );
}

describe('rows for write attempts', () => {
  test('one row per attempt with outcome applied, stale, stale_premise, scope_denied, weak_identity, evidence_required; none for MALFORMED, UNKNOWN_FIELD, NOT_WRITABLE, NO_ROLE', async () => {
    const id = 'outcomes';
    expect((await put('alice', id, 'status', { value: 'open', expected_version: 0 })).status).toBe(201);
    const applied = await put('alice', id, 'title', {
      value: 'first',
      expected_version: 0,
      evidence: 'read the pager',
      based_on: [{ field: 'status', version: 1 }],
      invocation: { agent: 'a1', step: 3 },
    });
    expect(applied.body).toEqual({ record: `incident/${id}`, field: 'title', version: 1, record_version: 2 });
    expect((await put('alice', id, 'title', { value: 'second', expected_version: 0 })).body.error).toBe('STALE');
    expect(
      (await put('alice', id, 'title', { value: 'third', expected_version: 1, based_on: [{ field: 'status', version: 0 }] })).body.error,
    ).toBe('STALE_PREMISE');
    expect(
      (await put('bob', id, 'title', { value: 'bobs', expected_version: 1, evidence: 'bob saw', invocation: { by: 'bob' } })).body.error,
    ).toBe('SCOPE_DENIED');
    expect((await put('alice', id, 'strong', { value: 42, expected_version: 0 })).body.error).toBe('WEAK_IDENTITY');
    expect((await put('alice', id, 'proof', { value: 'p', expected_version: 0 })).body.error).toBe('EVIDENCE_REQUIRED');
    // attempts that leave no row
    expect((await put('alice', id, 'title', '{"value": ')).body.error).toBe('MALFORMED');
    expect((await put('alice', id, 'title', { value: 5, expected_version: 1 })).body.error).toBe('MALFORMED');
    expect((await put('alice', id, 'status', { value: 'bogus', expected_version: 1 })).body.error).toBe('MALFORMED');
    expect((await put('alice', id, 'title', { value: 'x', expected_version: 1, surprise: true })).body.error).toBe('MALFORMED');
    expect((await put('alice', id, 'nosuch', { value: 'x', expected_version: 0 })).body.error).toBe('UNKNOWN_FIELD');
    expect((await put('alice', id, 'notes', { value: { a: 1 }, expected_version: 0, evidence: 'e' })).body.error).toBe('NOT_WRITABLE');
    expect((await put('dave', id, 'title', { value: 'x', expected_version: 1 })).body.error).toBe('NO_ROLE');

    expect(await outcomesInDb(id)).toEqual([
      'applied',
      'applied',
      'stale',
      'stale_premise',
      'scope_denied',
      'weak_identity',
      'evidence_required',
    ]);

    const h = await history('alice', id);
    expect(h.status).toBe(200);
    expect(h.body).not.toHaveProperty('next_before');
    const rows = h.body.history;
    expect(rows.map((r: any) => [r.field, r.outcome])).toEqual([
      ['proof', 'evidence_required'],
      ['strong', 'weak_identity'],
      ['title', 'scope_denied'],
      ['title', 'stale_premise'],
      ['title', 'stale'],
      ['title', 'applied'],
      ['status', 'applied'],
    ]);
    const strip = ({ seq, created_at, ...rest }: any) => rest;
    const alice = { author: 'apikey:alice', identity_strength: 'shared-secret' };
    const [evid, weak, scope, premise, stale, appliedTitle, appliedStatus] = rows.map(strip);
    expect(appliedStatus).toMatchObject({ ...alice, field: 'status', op: 'put', version: 1, record_version: 1, value: 'open', expected_version: 0 });
    expect(appliedStatus.evidence ?? null).toBeNull();
    expect(appliedStatus).not.toHaveProperty('based_on');
    expect(appliedStatus).not.toHaveProperty('invocation');
    expect(appliedTitle).toEqual({
      ...alice,
      field: 'title',
      op: 'put',
      version: 1,
      record_version: 2,
      value: 'first',
      evidence: 'read the pager',
      expected_version: 0,
      based_on: [{ field: 'status', version: 1 }],
      invocation: { agent: 'a1', step: 3 },
      outcome: 'applied',
    });
    // rejected rows on an existing record: no version, record_version as refused
    expect(stale).toMatchObject({ ...alice, field: 'title', record_version: 2, value: 'second', expected_version: 0, outcome: 'stale' });
    expect(premise).toMatchObject({
      ...alice,
      field: 'title',
      record_version: 2,
      value: 'third',
      expected_version: 1,
      based_on: [{ field: 'status', version: 0 }],
      outcome: 'stale_premise',
    });
    expect(scope).toMatchObject({
      author: 'apikey:bob',
      identity_strength: 'shared-secret',
      field: 'title',
      record_version: 2,
      value: 'bobs',
      evidence: 'bob saw',
      expected_version: 1,
      invocation: { by: 'bob' },
      outcome: 'scope_denied',
    });
    expect(weak).toMatchObject({ ...alice, field: 'strong', record_version: 2, value: 42, expected_version: 0, outcome: 'weak_identity' });
    expect(evid).toMatchObject({ ...alice, field: 'proof', record_version: 2, value: 'p', expected_version: 0, outcome: 'evidence_required' });
    for (const r of [evid, weak, scope, premise, stale]) expect(r).not.toHaveProperty('version');
    // seq is shared with what the database holds
    const dbSeqs = (await sql<{ id: number }>(`select id from history where class = 'incident' and rid = $1 order by id desc`, [id])).map(
      (r) => Number(r.id),
    );
    expect(rows.map((r: any) => r.seq)).toEqual(dbSeqs);
  });

  test('rows of rejections decided before the transaction keep the based_on the writer sent', async () => {
    const id = 'premise-kept';
    expect((await put('alice', id, 'status', { value: 'open', expected_version: 0 })).status).toBe(201);
    const based_on = [{ field: 'status', version: 1 }];
    expect((await put('bob', id, 'title', { value: 'b', expected_version: 0, based_on })).body.error).toBe('SCOPE_DENIED');
    expect((await put('alice', id, 'strong', { value: 1, expected_version: 0, based_on })).body.error).toBe('WEAK_IDENTITY');
    const h = await history('alice', id);
    const [weak, scope] = h.body.history;
    expect([scope.outcome, weak.outcome]).toEqual(['scope_denied', 'weak_identity']);
    expect(scope.based_on).toEqual(based_on);
    expect(weak.based_on).toEqual(based_on);
  });

  test('rejected rows on a record that does not exist have no record_version; history answers 200 with them', async () => {
    const id = 'ghost';
    expect((await put('bob', id, 'title', { value: 'b', expected_version: 0 })).body.error).toBe('SCOPE_DENIED');
    expect((await put('alice', id, 'strong', { value: 1, expected_version: 0 })).body.error).toBe('WEAK_IDENTITY');
    expect((await put('alice', id, 'proof', { value: 'p', expected_version: 0 })).body.error).toBe('EVIDENCE_REQUIRED');
    expect((await put('alice', id, 'title', { value: 't', expected_version: 3 })).body.error).toBe('STALE');
    expect(
      (await put('alice', id, 'title', { value: 't', expected_version: 0, based_on: [{ field: 'status', version: 2 }] })).body.error,
    ).toBe('STALE_PREMISE');
    expect((await t.call('alice', 'GET', `/v1/records/incident/${id}`)).status).toBe(404);

    const h = await history('alice', id);
    expect(h.status).toBe(200);
    expect(h.body.history.map((r: any) => r.outcome)).toEqual(['stale_premise', 'stale', 'evidence_required', 'weak_identity', 'scope_denied']);
    for (const r of h.body.history) {
      expect(r).not.toHaveProperty('version');
      expect(r).not.toHaveProperty('record_version');
    }
    // bob's own scope_denied row is visible to him (he may read title)
    const hb = await history('bob', id);
    expect(hb.status).toBe(200);
    expect(hb.body.history.map((r: any) => [r.field, r.outcome])).toEqual([
      ['title', 'stale_premise'],
      ['title', 'stale'],
      ['title', 'scope_denied'],
    ]);

    // once the record exists, a rejected row carries the record version it was refused at
    expect((await put('alice', id, 'title', { value: 't', expected_version: 0 })).status).toBe(201);
    expect((await put('bob', id, 'title', { value: 'b', expected_version: 1 })).body.error).toBe('SCOPE_DENIED');
    const after = await history('alice', id, '?limit=2');
    expect(after.body.history[0]).toMatchObject({ outcome: 'scope_denied', record_version: 1 });
    expect(after.body.history[1]).toMatchObject({ outcome: 'applied', version: 1, record_version: 1 });
  });

  test('history of a record that never existed and has no rows is NOT_FOUND', async () => {
    // attempts that leave no row do not make history appear
    await put('alice', 'nothing-here', 'title', '{"value": ');
    await put('dave', 'nothing-here', 'title', { value: 'x', expected_version: 0 });
    await put('alice', 'nothing-here', 'nosuch', { value: 'x', expected_version: 0 });
    for (const q of ['', '?field=title', '?limit=5']) {
      const r = await t.call('alice', 'GET', H('nothing-here', q));
      expect(r.status).toBe(404);
      expect(r.body.error).toBe('NOT_FOUND');
      expect(typeof r.body.message).toBe('string');
    }
    expect((await t.call('bob', 'GET', H('never-ever'))).body.error).toBe('NOT_FOUND');
  });

  test('a rejected row is written in the same transaction as the outcome', async () => {
    const id = 'atomic';
    expect((await put('alice', id, 'title', { value: 'a', expected_version: 0 })).status).toBe(201);
    const stale = await put('alice', id, 'title', { value: 'b', expected_version: 0 });
    expect(stale.status).toBe(409);
    const g = await t.call('alice', 'GET', `/v1/records/incident/${id}`);
    expect(g.body.record_version).toBe(1);
    expect(g.body.fields.title).toMatchObject({ value: 'a', version: 1 });
    expect(await outcomesInDb(id, 'title')).toEqual(['applied', 'stale']);
    const ev = await put('alice', id, 'proof', { value: 'p', expected_version: 0 });
    expect(ev.status).toBe(422);
    expect((await t.call('alice', 'GET', `/v1/records/incident/${id}`)).body.fields).not.toHaveProperty('proof');
    expect(await outcomesInDb(id, 'proof')).toEqual(['evidence_required']);
  });

  test('racing writers on one version: one wins, the others are stale, one row each', async () => {
    const id = 'race';
    expect((await put('alice', id, 'title', { value: 'a', expected_version: 0 })).status).toBe(201);
    // ten writers who all read version 1: the row lock lets exactly one apply
    const results = await Promise.all(
      Array.from({ length: 10 }, (_, i) => put('alice', id, 'title', { value: `w${i}`, expected_version: 1 })),
    );
    expect(results.filter((r) => r.status === 200)).toHaveLength(1);
    expect(results.filter((r) => r.status === 409 && r.body.error === 'STALE')).toHaveLength(9);
    const outcomes = await outcomesInDb(id, 'title');
    expect(outcomes.filter((o) => o === 'applied')).toHaveLength(2);
    expect(outcomes.filter((o) => o === 'stale')).toHaveLength(9);
    const winner = results.find((r) => r.status === 200)!;
    const g2 = await t.call('alice', 'GET', `/v1/records/incident/${id}?fields=title`);
    expect(g2.body.fields.title.version).toBe(2);
    expect(winner.body.version).toBe(2);
  });
});

describe('value kept in a row', () => {
  test('scope, evidence and identity rejections keep the value up to 64 KiB, then value_size and value_sha256; STALE, STALE_PREMISE and applied rows keep it whole', async () => {
    const id = 'big';
    expect((await put('alice', id, 'title', { value: 'x', expected_version: 0 })).status).toBe(201);
    const exact = 'x'.repeat(64 * 1024 - 2); // JSON text exactly 64 KiB
    const over = 'x'.repeat(64 * 1024 - 1); // one byte more
    const wideUnder = 'é'.repeat(32766); // 32768 chars, 65534 bytes
    const wideOver = 'é'.repeat(33000); // 33002 chars, 66002 bytes: bytes count, not characters
    const obj = { a: 'y'.repeat(70_000), n: [1, 2, 3], nested: { k: 'v' } };
    expect(size(exact)).toBe(65536);
    expect(size(over)).toBe(65537);

    const expectCode = async (who: string, field: string, body: unknown, code: string) =>
      expect((await put(who, id, field, body)).body.error).toBe(code);
    await expectCode('bob', 'title', { value: exact, expected_version: 1 }, 'SCOPE_DENIED');
    await expectCode('bob', 'title', { value: over, expected_version: 1 }, 'SCOPE_DENIED');
    await expectCode('bob', 'title', { value: wideUnder, expected_version: 1 }, 'SCOPE_DENIED');
    await expectCode('bob', 'title', { value: wideOver, expected_version: 1 }, 'SCOPE_DENIED');
    await expectCode('bob', 'blob', { value: obj, expected_version: 0 }, 'SCOPE_DENIED');
    await expectCode('alice', 'proof', { value: exact, expected_version: 0 }, 'EVIDENCE_REQUIRED');
    await expectCode('alice', 'proof', { value: obj, expected_version: 0 }, 'EVIDENCE_REQUIRED');
    await expectCode('alice', 'strong', { value: exact, expected_version: 0 }, 'WEAK_IDENTITY');
    await expectCode('alice', 'strong', { value: obj, expected_version: 0 }, 'WEAK_IDENTITY');
    await expectCode('alice', 'title', { value: over, expected_version: 0 }, 'STALE');
    await expectCode('alice', 'title', { value: over, expected_version: 1, based_on: [{ field: 'status', version: 3 }] }, 'STALE_PREMISE');
    expect((await put('alice', id, 'blob', { value: obj, expected_version: 0 })).status).toBe(200);

    const h = await history('alice', id);
    const rows = h.body.history.slice().reverse().slice(1); // oldest first, without the creating write
    const whole = (r: any, v: unknown) => {
      expect(r.value).toEqual(v);
      expect(r).not.toHaveProperty('value_size');
      expect(r).not.toHaveProperty('value_sha256');
    };
    const digest = (r: any, v: unknown) => {
      expect(r).not.toHaveProperty('value');
      expect(r.value_size).toBe(size(v));
      expect(r.value_sha256).toBe(sha256(v));
    };
    expect(rows.map((r: any) => r.outcome)).toEqual([
      'scope_denied',
      'scope_denied',
      'scope_denied',
      'scope_denied',
      'scope_denied',
      'evidence_required',
      'evidence_required',
      'weak_identity',
      'weak_identity',
      'stale',
      'stale_premise',
      'applied',
    ]);
    whole(rows[0], exact);
    digest(rows[1], over);
    whole(rows[2], wideUnder);
    digest(rows[3], wideOver);
    expect(rows[3].value_size).toBe(66002);
    digest(rows[4], obj);
    whole(rows[5], exact);
    digest(rows[6], obj);
    whole(rows[7], exact);
    digest(rows[8], obj);
    whole(rows[9], over);
    whole(rows[10], over);
    whole(rows[11], obj);
  });
});

describe('which rows', () => {
  const id = 'filter';
  beforeAll(async () => {
    const w = async (who: string, field: string, body: unknown, status: number) =>
      expect((await put(who, id, field, body)).status).toBe(status);
    await w('alice', 'title', { value: 't1', expected_version: 0 }, 201);
    await w('alice', 'status', { value: 'open', expected_version: 0 }, 200);
    await w('alice', 'severity', { value: 2, expected_version: 0 }, 200);
    await w('alice', 'title', { value: 't2', expected_version: 1 }, 200);
    await w('alice', 'secret', { value: 'hush', expected_version: 0 }, 200);
    await w('alice', 'scratch', { value: { any: 'thing' } }, 200);
    await w('alice', 'severity', { value: 3, expected_version: 0 }, 409);
    await w('bob', 'title', { value: 'bob', expected_version: 2 }, 403);
    await w('bob', 'severity', { value: 9, expected_version: 1 }, 403);
    await w('alice', 'status', { value: 'investigating', expected_version: 1 }, 200);
    await w('alice', 'title', { value: 't3', expected_version: 2 }, 200);
  });

  test('`field` returns only that field, newest first', async () => {
    const h = await history('alice', id, '?field=title');
    expect(h.status).toBe(200);
    expect(h.body.history.map((r: any) => [r.field, r.outcome, r.value])).toEqual([
      ['title', 'applied', 't3'],
      ['title', 'scope_denied', 'bob'],
      ['title', 'applied', 't2'],
      ['title', 'applied', 't1'],
    ]);
    const s = await history('alice', id, '?field=severity');
    expect(s.body.history.map((r: any) => r.outcome)).toEqual(['scope_denied', 'stale', 'applied']);
  });

  test('an unknown field filter is UNKNOWN_FIELD; an unreadable one is SCOPE_DENIED', async () => {
    const u = await t.call('alice', 'GET', H(id, '?field=nosuch'));
    expect([u.status, u.body.error]).toEqual([422, 'UNKNOWN_FIELD']);
    const b = await t.call('bob', 'GET', H(id, '?field=severity'));
    expect([b.status, b.body.error]).toEqual([403, 'SCOPE_DENIED']);
    // alice may write `secret` but not read it
    const a = await t.call('alice', 'GET', H(id, '?field=secret'));
    expect([a.status, a.body.error]).toEqual([403, 'SCOPE_DENIED']);
  });

  test('only rows of fields the role may read are returned', async () => {
    const all = await sql<{ field: string }>(`select field from history where class = 'incident' and rid = $1`, [id]);
    expect(all.map((r) => r.field)).toContain('secret');
    expect(all.map((r) => r.field)).toContain('severity');

    const bob = await history('bob', id);
    const bobFields = bob.body.history.map((r: any) => r.field);
    for (const f of bobFields) expect(['title', 'status', 'notes']).toContain(f);
    expect(bobFields).not.toContain('severity');
    expect(bob.body.history).toHaveLength(all.filter((r) => ['title', 'status', 'notes'].includes(r.field)).length);

    const alice = await history('alice', id);
    const aliceFields = alice.body.history.map((r: any) => r.field);
    expect(aliceFields).not.toContain('secret');
    expect(aliceFields).toContain('severity');
    expect(alice.body.history).toHaveLength(all.filter((r) => r.field !== 'secret').length);
  });
});

describe('limit', () => {
  const id = 'many';
  beforeAll(async () => {
    await many(1001, async (i) => {
      const r = await put('alice', id, 'scratch', { value: i });
      if (r.status !== 200 && r.status !== 201) throw new Error(`seed write ${i}: ${r.status}`);
    });
  }, 120_000);

  test('defaults to 1000, with next_before while older rows remain', async () => {
    const h = await history('alice', id);
    expect(h.body.history).toHaveLength(1000);
    expect(typeof h.body.next_before).toBe('string');
    const rest = await history('alice', id, `?before=${encodeURIComponent(h.body.next_before)}`);
    expect(rest.body.history).toHaveLength(1);
    expect(rest.body).not.toHaveProperty('next_before');
    expect(rest.body.history[0].seq).toBeLessThan(h.body.history[999].seq);
  });

  test('accepts up to 10000; next_before is absent when no older rows remain', async () => {
    const max = await history('alice', id, '?limit=10000');
    expect(max.status).toBe(200);
    expect(max.body.history).toHaveLength(1001);
    expect(max.body).not.toHaveProperty('next_before');
    const exact = await history('alice', id, '?limit=1001');
    expect(exact.body.history).toHaveLength(1001);
    expect(exact.body).not.toHaveProperty('next_before');
    const one = await history('alice', id, '?limit=1');
    expect(one.body.history).toHaveLength(1);
    expect(one.body.history[0]).toEqual(max.body.history[0]);
    expect(typeof one.body.next_before).toBe('string');
  });

  test('each of the 1001 applied soft writes raised the version: rows carry versions 1..1001', async () => {
    const rows = (await history('alice', id, '?limit=10000')).body.history;
    expect(rows.every((r: any) => r.outcome === 'applied')).toBe(true);
    const versions = rows.map((r: any) => r.version);
    expect(new Set(versions).size).toBe(1001);
    expect(versions[0]).toBe(1001);
    expect(rows.map((r: any) => r.record_version)).toEqual(versions);
    const g = await t.call('alice', 'GET', `/v1/records/incident/${id}?fields=scratch`);
    expect(g.body.fields.scratch.version).toBe(1001);
  });

  test.each(['10001', '0', '-1', 'abc', '1.5', ''])('limit=%s is MALFORMED', async (limit) => {
    const r = await t.call('alice', 'GET', H(id, `?limit=${limit}`));
    expect(r.status).toBe(400);
    expect(r.body.error).toBe('MALFORMED');
    expect(typeof r.body.message).toBe('string');
  });
});

describe('paging with before', () => {
  const id = 'pages';
  beforeAll(async () => {
    // 25 rows: the creating write, 20 applied scratch writes and 4 of bob's refused title writes, interleaved
    expect((await put('alice', id, 'title', { value: 't', expected_version: 0 })).status).toBe(201);
    for (let i = 0; i < 20; i++) {
      expect((await put('alice', id, 'scratch', { value: i })).status).toBe(200);
      if (i % 5 === 4) expect((await put('bob', id, 'title', { value: `b${i}`, expected_version: 1 })).status).toBe(403);
    }
  });

  async function pageAll(q: string, limit: number): Promise<{ pages: any[][]; cursors: string[] }> {
    const pages: any[][] = [];
    const cursors: string[] = [];
    let before: string | undefined;
    for (let n = 0; n < 100; n++) {
      const sep = q ? '&' : '?';
      const r = await history('alice', id, `${q}${sep}limit=${limit}${before ? `&before=${encodeURIComponent(before)}` : ''}`);
      expect(r.status).toBe(200);
      pages.push(r.body.history);
      if (!('next_before' in r.body)) break;
      before = r.body.next_before as string;
      cursors.push(before);
    }
    return { pages, cursors };
  }

  test('pages of 10 return every row once, with no overlap or gap', async () => {
    const full = (await history('alice', id)).body.history;
    expect(full).toHaveLength(25);
    const { pages } = await pageAll('', 10);
    expect(pages.map((p) => p.length)).toEqual([10, 10, 5]);
    expect(pages.flat()).toEqual(full);
    expect(new Set(pages.flat().map((r: any) => r.seq)).size).toBe(25);
  });

  test('when the last page is exactly full, it has no next_before', async () => {
    const full = (await history('alice', id)).body.history;
    const { pages } = await pageAll('', 5);
    expect(pages.map((p) => p.length)).toEqual([5, 5, 5, 5, 5]);
    expect(pages.flat()).toEqual(full);
  });

  test('paging respects the field filter', async () => {
    const full = (await history('alice', id, '?field=scratch')).body.history;
    expect(full).toHaveLength(20);
    const { pages } = await pageAll('?field=scratch', 7);
    expect(pages.map((p) => p.length)).toEqual([7, 7, 6]);
    expect(pages.flat()).toEqual(full);
    for (const r of pages.flat()) expect(r.field).toBe('scratch');
  });

  test('rows written after a cursor was issued do not shift the next page', async () => {
    const first = await history('alice', id, '?limit=10');
    const expected = (await history('alice', id, `?limit=10&before=${encodeURIComponent(first.body.next_before)}`)).body;
    expect((await put('alice', id, 'scratch', { value: 'late' })).status).toBe(200);
    const second = await history('alice', id, `?limit=10&before=${encodeURIComponent(first.body.next_before)}`);
    expect(second.body).toEqual(expected);
  });
});

describe('cursors', () => {
  let cursor: string; // issued for incident/pages, no field filter
  let fieldCursor: string; // issued for incident/pages, field=scratch
  let otherRecordCursor: string; // issued for incident/many

  beforeAll(async () => {
    cursor = (await history('alice', 'pages', '?limit=3')).body.next_before;
    fieldCursor = (await history('alice', 'pages', '?field=scratch&limit=3')).body.next_before;
    otherRecordCursor = (await history('alice', 'many', '?limit=3')).body.next_before;
    expect(typeof cursor).toBe('string');
    expect(typeof fieldCursor).toBe('string');
    expect(typeof otherRecordCursor).toBe('string');
  });

  const flip = (s: string, i: number) => s.slice(0, i) + (s[i] === 'A' ? 'B' : 'A') + s.slice(i + 1);

  function forged(): [string, string, string][] {
    const [payload, sig] = cursor.split('.');
    const decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
    const moved = Buffer.from(JSON.stringify({ ...decoded, p: decoded.p + 5 })).toString('base64url');
    return [
      ['a flipped character in the first half', 'pages', `?before=${encodeURIComponent(flip(cursor, 3))}`],
      ['a flipped character in the signature', 'pages', `?before=${encodeURIComponent(flip(cursor, payload.length + 5))}`],
      ['a re-encoded payload with another position', 'pages', `?before=${encodeURIComponent(`${moved}.${sig}`)}`],
      ['the signature dropped', 'pages', `?before=${encodeURIComponent(payload)}`],
      ['garbage', 'pages', '?before=garbage'],
      ['a dot', 'pages', '?before=.'],
      ['empty', 'pages', '?before='],
      ['a plain number', 'pages', '?before=12'],
      ['a very long value', 'pages', `?before=${'A'.repeat(5000)}.${'B'.repeat(40)}`],
      ['a cursor issued for another record', 'pages', `?before=${encodeURIComponent(otherRecordCursor)}`],
      ['a cursor issued for this record used on another', 'many', `?before=${encodeURIComponent(cursor)}`],
      ['a cursor issued without field filter used with one', 'pages', `?field=scratch&before=${encodeURIComponent(cursor)}`],
      ['a cursor issued with field=scratch used without filter', 'pages', `?before=${encodeURIComponent(fieldCursor)}`],
      ['a cursor issued with field=scratch used with field=title', 'pages', `?field=title&before=${encodeURIComponent(fieldCursor)}`],
    ];
  }

  test('a forged or misused cursor is MALFORMED (400)', async () => {
    for (const [what, rid, q] of forged()) {
      const r = await t.call('alice', 'GET', H(rid, q));
      expect({ what, status: r.status, error: r.body?.error }).toEqual({ what, status: 400, error: 'MALFORMED' });
      expect(typeof r.body.message).toBe('string');
    }
    // the genuine cursors still work
    expect((await t.call('alice', 'GET', H('pages', `?before=${encodeURIComponent(cursor)}`))).status).toBe(200);
    expect((await t.call('alice', 'GET', H('pages', `?field=scratch&before=${encodeURIComponent(fieldCursor)}`))).status).toBe(200);
    // and work for another caller of the same record
    expect((await t.call('carol', 'GET', H('pages', `?before=${encodeURIComponent(cursor)}`))).status).toBe(200);
  });

  test('a cursor from one gateway works on a second gateway on the same database', async () => {
    const t2 = await startTestGateway([incident], { db: t.db });
    try {
      const q = `?limit=5&before=${encodeURIComponent(cursor)}`;
      const here = await t.call('alice', 'GET', H('pages', q));
      const there = await t2.call('alice', 'GET', H('pages', q));
      expect(here.status).toBe(200);
      expect(there).toEqual(here);
      // and the other way round
      const issued = (await t2.call('alice', 'GET', H('pages', '?field=scratch&limit=4'))).body.next_before;
      const q2 = `?field=scratch&limit=4&before=${encodeURIComponent(issued)}`;
      const back = await t.call('alice', 'GET', H('pages', q2));
      expect(back.status).toBe(200);
      expect(back).toEqual(await t2.call('alice', 'GET', H('pages', q2)));
    } finally {
      await t2.close();
    }
  });
});
