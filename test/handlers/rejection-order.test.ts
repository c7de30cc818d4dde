/**
 * Rejection order (interface.md "Rejection order"): when several checks fail, the first in
 * the spec's order is returned, and the same request always gets the same answer.
 *
 *  1 UNAUTHENTICATED  2 NOT_FOUND (class)  3 NO_ROLE  4 CLASS_GONE (writes only)
 *  5 MALFORMED (record id)  6 UNKNOWN_FIELD  7 SCOPE_DENIED  8 WEAK_IDENTITY
 *  9 NOT_WRITABLE  (10 IDENTITY_MISMATCH: not built yet, not tested here)
 *  then MALFORMED body incl. type and enum, 12 EVIDENCE_REQUIRED, 13 STALE,
 *  checkpoint gate (INVALID_CHECKPOINT), 14 STALE_PREMISE.
 *
 * Every case below is ONE request that fails two or more checks at once.
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { bastion, ledger, relic } from '../fixtures/order-classes.js';
import { startTestGateway, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
const LIVE = [incident, ledger, bastion];

const P = (cls: string, id: string, field: string) => `/v1/records/${cls}/${id}/fields/${field}`;

async function ok(who: string, path: string, body: unknown): Promise<any> {
  const r = await t.call(who, 'PUT', path, body);
  if (r.status !== 200 && r.status !== 201) throw new Error(`seed ${path} failed: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

async function makeRelicGone(): Promise<void> {
  t.writeClasses(LIVE);
  await t.gw.services.sweepOnce();
}

async function bringRelicBack(): Promise<void> {
  t.writeClasses([...LIVE, relic]);
  await t.gw.services.sweepOnce();
}

async function historyCount(cls: string, rid: string): Promise<number> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    const r = await c.query('select count(*)::int as n from history where class = $1 and rid = $2', [cls, rid]);
    return r.rows[0].n as number;
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  t = await startTestGateway([...LIVE, relic]);
  // incident/base: title v1, status v2 (so a premise on status version 1 has moved). record_version 3.
  await ok('alice', P('incident', 'base', 'title'), { value: 'hello', expected_version: 0 });
  await ok('alice', P('incident', 'base', 'status'), { value: 'open', expected_version: 0 });
  await ok('alice', P('incident', 'base', 'status'), { value: 'investigating', expected_version: 1 });
  // incident/gate-a: status v1 (open).
  await ok('alice', P('incident', 'gate-a', 'status'), { value: 'open', expected_version: 0 });
  // incident/gate-b: status v1, title v2 (a premise on title version 1 has moved).
  await ok('alice', P('incident', 'gate-b', 'status'), { value: 'open', expected_version: 0 });
  await ok('alice', P('incident', 'gate-b', 'title'), { value: 'one', expected_version: 0 });
  await ok('alice', P('incident', 'gate-b', 'title'), { value: 'two', expected_version: 1 });
  // ledger/base: decision v1 (requires evidence class-wide). record_version 1.
  await ok('alice', P('ledger', 'base', 'decision'), { value: 'approve', expected_version: 0, evidence: 'board minutes' });
  // relic/old: label v1, then the class is deleted.
  await ok('alice', P('relic', 'old', 'label'), { value: 'vase', expected_version: 0 });
  await makeRelicGone();
});
afterAll(() => t?.close());

interface Case {
  name: string;
  who: string | null;
  method?: 'GET' | 'PUT';
  path: string;
  /** JSON-encoded unless a string (sent as-is). */
  body?: unknown;
  headers?: Record<string, string>;
  status: number;
  error: string;
}

const GOOD = { value: 'x', expected_version: 0 };
const BAD_JSON = '{"value": "x", "expected_version": ';

/** Writes (put), each failing at least two checks. */
const putCases: Case[] = [
  // ---- adjacent pairs -------------------------------------------------------------------
  { name: '1 UNAUTHENTICATED > 2 NOT_FOUND: no credential on an unknown class', who: null, path: P('nosuch', 'x', 'f'), body: GOOD, status: 401, error: 'UNAUTHENTICATED' },
  { name: '1 UNAUTHENTICATED > 2 NOT_FOUND: unknown key on an unknown class', who: 'not-a-real-key', path: P('nosuch', 'x', 'f'), body: GOOD, status: 401, error: 'UNAUTHENTICATED' },
  { name: '1 UNAUTHENTICATED > 3 NO_ROLE: unknown key on a class', who: 'not-a-real-key', path: P('incident', 'base', 'title'), body: GOOD, status: 401, error: 'UNAUTHENTICATED' },
  { name: '2 NOT_FOUND > 3 NO_ROLE: identity with no role anywhere, unknown class', who: 'dave', path: P('nosuch', 'x', 'f'), body: GOOD, status: 404, error: 'NOT_FOUND' },
  { name: '3 NO_ROLE > 4 CLASS_GONE: no role in a deleted class', who: 'dave', path: P('relic', 'old', 'label'), body: { value: 'urn', expected_version: 1 }, status: 403, error: 'NO_ROLE' },
  { name: '4 CLASS_GONE > 5 MALFORMED id: deleted class, id not matching idPattern', who: 'alice', path: P('relic', 'Bad_ID', 'label'), body: GOOD, status: 410, error: 'CLASS_GONE' },
  { name: '5 MALFORMED id > 6 UNKNOWN_FIELD: id not matching idPattern, unknown field', who: 'alice', path: P('incident', 'Bad_ID', 'nosuch'), body: GOOD, status: 400, error: 'MALFORMED' },
  { name: '5 MALFORMED id > 6 UNKNOWN_FIELD: id over 256 bytes, unknown field', who: 'alice', path: P('bastion', 'a'.repeat(257), 'nosuch'), body: GOOD, status: 400, error: 'MALFORMED' },
  { name: '5 MALFORMED id > 6 UNKNOWN_FIELD: id containing "/", unknown field', who: 'alice', path: P('bastion', 'a%2Fb', 'nosuch'), body: GOOD, status: 400, error: 'MALFORMED' },
  { name: '6 UNKNOWN_FIELD > 7 SCOPE_DENIED: role that writes nothing, unknown field', who: 'bob', path: P('incident', 'base', 'nosuch'), body: GOOD, status: 422, error: 'UNKNOWN_FIELD' },
  { name: '7 SCOPE_DENIED > 8 WEAK_IDENTITY: field floor on a field the role may not write', who: 'bob', path: P('incident', 'base', 'strong'), body: { value: 1, expected_version: 0 }, status: 403, error: 'SCOPE_DENIED' },
  { name: '7 SCOPE_DENIED > 8 WEAK_IDENTITY: class floor, role may not write', who: 'bob', path: P('bastion', 'b1', 'gate'), body: GOOD, status: 403, error: 'SCOPE_DENIED' },
  { name: '8 WEAK_IDENTITY > 9 NOT_WRITABLE: put on a task field with a field floor', who: 'alice', path: P('incident', 'base', 'triage'), body: { value: 1, expected_version: 0 }, status: 403, error: 'WEAK_IDENTITY' },
  { name: '8 WEAK_IDENTITY > 9 NOT_WRITABLE: put on an append field of a class with a floor', who: 'alice', path: P('bastion', 'b1', 'log'), body: GOOD, status: 403, error: 'WEAK_IDENTITY' },
  { name: '9 NOT_WRITABLE > MALFORMED body: put on an append field with bad JSON', who: 'alice', path: P('incident', 'base', 'notes'), body: BAD_JSON, status: 422, error: 'NOT_WRITABLE' },
  { name: '9 NOT_WRITABLE > MALFORMED body: put on an append field without value', who: 'alice', path: P('incident', 'base', 'notes'), body: {}, status: 422, error: 'NOT_WRITABLE' },
  { name: 'MALFORMED body > 12 EVIDENCE_REQUIRED: missing expected_version, no evidence', who: 'alice', path: P('incident', 'base', 'proof'), body: { value: 'p' }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED type > 12 EVIDENCE_REQUIRED: wrong type, no evidence', who: 'alice', path: P('ledger', 'base', 'amount'), body: { value: 'ten', expected_version: 0 }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED enum > 12 EVIDENCE_REQUIRED: enum violation, no evidence', who: 'alice', path: P('ledger', 'base', 'decision'), body: { value: 'maybe', expected_version: 1 }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED body > 12 EVIDENCE_REQUIRED: unknown body key (typo of evidence)', who: 'alice', path: P('ledger', 'base', 'memo'), body: { value: 'm', evidnce: 'typo' }, status: 400, error: 'MALFORMED' },
  { name: '12 EVIDENCE_REQUIRED > 13 STALE: class requires evidence, stale version', who: 'alice', path: P('ledger', 'base', 'decision'), body: { value: 'reject', expected_version: 0 }, status: 422, error: 'EVIDENCE_REQUIRED' },
  { name: '12 EVIDENCE_REQUIRED > 13 STALE: field requires evidence, stale version', who: 'alice', path: P('incident', 'base', 'proof'), body: { value: 'p', expected_version: 7 }, status: 422, error: 'EVIDENCE_REQUIRED' },
  { name: '13 STALE > checkpoint gate: status=resolved without checkpoint, stale version', who: 'alice', path: P('incident', 'gate-a', 'status'), body: { value: 'resolved', expected_version: 0 }, status: 409, error: 'STALE' },
  { name: 'checkpoint gate > 14 STALE_PREMISE: status=resolved without checkpoint, moved premise', who: 'alice', path: P('incident', 'gate-b', 'status'), body: { value: 'resolved', expected_version: 1, based_on: [{ field: 'title', version: 1 }] }, status: 422, error: 'INVALID_CHECKPOINT' },
  { name: '13 STALE > 14 STALE_PREMISE: stale version and moved premise', who: 'alice', path: P('incident', 'base', 'title'), body: { value: 't', expected_version: 0, based_on: [{ field: 'status', version: 1 }] }, status: 409, error: 'STALE' },

  // ---- non-adjacent ------------------------------------------------------------------------
  { name: 'UNAUTHENTICATED: no credential + unknown class + bad id + bad body', who: null, path: P('nosuch', 'Bad_ID', 'f'), body: BAD_JSON, status: 401, error: 'UNAUTHENTICATED' },
  { name: 'UNAUTHENTICATED: non-Bearer credential + no role + bad body', who: null, headers: { authorization: 'Basic ZGF2ZTpkYXZl' }, path: P('bastion', 'b1', 'gate'), body: BAD_JSON, status: 401, error: 'UNAUTHENTICATED' },
  { name: 'NOT_FOUND: unknown class + bad id + bad body', who: 'alice', path: P('nosuch', 'Bad_ID', 'f'), body: BAD_JSON, status: 404, error: 'NOT_FOUND' },
  { name: 'NO_ROLE: no role + bad JSON', who: 'dave', path: P('incident', 'base', 'title'), body: BAD_JSON, status: 403, error: 'NO_ROLE' },
  { name: 'NO_ROLE: no role + bad id + unknown field + bad JSON', who: 'dave', path: P('incident', 'Bad_ID', 'nosuch'), body: BAD_JSON, status: 403, error: 'NO_ROLE' },
  { name: 'NO_ROLE: role in another class only + class floor', who: 'carol', path: P('bastion', 'b1', 'gate'), body: GOOD, status: 403, error: 'NO_ROLE' },
  { name: 'CLASS_GONE: deleted class + unknown field + bad JSON', who: 'alice', path: P('relic', 'old', 'nosuch'), body: BAD_JSON, status: 410, error: 'CLASS_GONE' },
  { name: 'CLASS_GONE: deleted class + role may not write the field', who: 'bob', path: P('relic', 'old', 'label'), body: GOOD, status: 410, error: 'CLASS_GONE' },
  { name: 'MALFORMED id: bad id + scope denied + bad JSON', who: 'bob', path: P('incident', 'Bad_ID', 'strong'), body: BAD_JSON, status: 400, error: 'MALFORMED' },
  { name: 'UNKNOWN_FIELD: unknown field + bad JSON', who: 'alice', path: P('incident', 'base', 'nosuch'), body: BAD_JSON, status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'SCOPE_DENIED: scope denied + bad JSON', who: 'bob', path: P('incident', 'base', 'title'), body: BAD_JSON, status: 403, error: 'SCOPE_DENIED' },
  { name: 'SCOPE_DENIED: scope denied + missing evidence + stale', who: 'bob', path: P('ledger', 'base', 'decision'), body: { value: 'reject', expected_version: 0 }, status: 403, error: 'SCOPE_DENIED' },
  { name: 'WEAK_IDENTITY: field floor + bad JSON', who: 'alice', path: P('incident', 'base', 'strong'), body: BAD_JSON, status: 403, error: 'WEAK_IDENTITY' },
  { name: 'WEAK_IDENTITY: field floor + stale version', who: 'alice', path: P('incident', 'base', 'strong'), body: { value: 1, expected_version: 5 }, status: 403, error: 'WEAK_IDENTITY' },
  { name: 'WEAK_IDENTITY: class floor + missing value', who: 'alice', path: P('bastion', 'b1', 'gate'), body: {}, status: 403, error: 'WEAK_IDENTITY' },
  { name: 'NOT_WRITABLE: append field + type error + missing evidence', who: 'alice', path: P('incident', 'base', 'notes'), body: { value: 'text', expected_version: 0 }, status: 422, error: 'NOT_WRITABLE' },
  { name: 'MALFORMED: type error + missing evidence + stale', who: 'alice', path: P('ledger', 'base', 'amount'), body: { value: 'ten', expected_version: 9 }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED: enum violation + stale + moved premise', who: 'alice', path: P('incident', 'base', 'status'), body: { value: 'bogus', expected_version: 0, based_on: [{ field: 'title', version: 0 }] }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED: invocation over 1 KiB + missing evidence', who: 'alice', path: P('ledger', 'base', 'memo'), body: { value: 'm', invocation: { pad: 'x'.repeat(2000) } }, status: 400, error: 'MALFORMED' },
  { name: 'MALFORMED: invocation not an object + stale', who: 'alice', path: P('incident', 'base', 'title'), body: { value: 't', expected_version: 0, invocation: 'run-1' }, status: 400, error: 'MALFORMED' },
  { name: 'EVIDENCE_REQUIRED: missing evidence + moved premise', who: 'alice', path: P('ledger', 'base', 'amount'), body: { value: 5, expected_version: 0, based_on: [{ field: 'decision', version: 0 }] }, status: 422, error: 'EVIDENCE_REQUIRED' },
  { name: 'EVIDENCE_REQUIRED: missing evidence + stale + moved premise', who: 'alice', path: P('ledger', 'base', 'decision'), body: { value: 'reject', expected_version: 0, based_on: [{ field: 'amount', version: 3 }] }, status: 422, error: 'EVIDENCE_REQUIRED' },
  { name: 'STALE: stale + moved premise on a record that does not exist', who: 'alice', path: P('incident', 'nowhere', 'title'), body: { value: 't', expected_version: 2, based_on: [{ field: 'status', version: 1 }] }, status: 409, error: 'STALE' },

  // ---- premises (decisions §3; docs/decisions.md: resolved after the body, before type/enum)
  { name: 'UNKNOWN_FIELD: premise on an unknown field + type error', who: 'alice', path: P('incident', 'base', 'title'), body: { value: 5, expected_version: 1, based_on: [{ field: 'nosuch', version: 1 }] }, status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'SCOPE_DENIED: premise on an unreadable field + enum violation', who: 'alice', path: P('incident', 'base', 'status'), body: { value: 'bogus', expected_version: 2, based_on: [{ field: 'secret', version: 0 }] }, status: 403, error: 'SCOPE_DENIED' },
  { name: 'MALFORMED: malformed premise naming an unknown field', who: 'alice', path: P('incident', 'base', 'title'), body: { value: 't', expected_version: 1, based_on: [{ field: 'nosuch', version: -1 }] }, status: 400, error: 'MALFORMED' },
  { name: 'UNKNOWN_FIELD: premise on an unknown field + missing evidence + stale', who: 'alice', path: P('ledger', 'base', 'decision'), body: { value: 'reject', expected_version: 0, based_on: [{ field: 'nosuch', version: 0 }] }, status: 422, error: 'UNKNOWN_FIELD' },
];

/** Reads (get, history, class), each failing at least two checks. */
const readCases: Case[] = [
  // get: NOT_FOUND class > NO_ROLE > MALFORMED id > UNKNOWN_FIELD (fields=) > SCOPE_DENIED
  { name: 'get: UNAUTHENTICATED > NOT_FOUND', who: null, path: '/v1/records/nosuch/x', status: 401, error: 'UNAUTHENTICATED' },
  { name: 'get: NOT_FOUND class > NO_ROLE > MALFORMED id', who: 'dave', path: '/v1/records/nosuch/Bad_ID?fields=nosuch', status: 404, error: 'NOT_FOUND' },
  { name: 'get: NOT_FOUND class (caller has roles elsewhere) > MALFORMED id', who: 'alice', path: '/v1/records/nosuch/Bad_ID', status: 404, error: 'NOT_FOUND' },
  { name: 'get: NO_ROLE > MALFORMED id > UNKNOWN_FIELD', who: 'dave', path: '/v1/records/incident/Bad_ID?fields=nosuch', status: 403, error: 'NO_ROLE' },
  { name: 'get: NO_ROLE > bad entries_limit', who: 'dave', path: '/v1/records/incident/base?entries_limit=abc', status: 403, error: 'NO_ROLE' },
  { name: 'get: MALFORMED id > UNKNOWN_FIELD', who: 'alice', path: '/v1/records/incident/Bad_ID?fields=nosuch', status: 400, error: 'MALFORMED' },
  { name: 'get: MALFORMED id > SCOPE_DENIED', who: 'bob', path: '/v1/records/incident/Bad_ID?fields=severity', status: 400, error: 'MALFORMED' },
  { name: 'get: UNKNOWN_FIELD > SCOPE_DENIED (unreadable field listed first)', who: 'alice', path: '/v1/records/incident/base?fields=secret,nosuch', status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'get: UNKNOWN_FIELD > SCOPE_DENIED (bob)', who: 'bob', path: '/v1/records/incident/base?fields=severity,nosuch', status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'get: SCOPE_DENIED > bad entries_limit', who: 'bob', path: '/v1/records/incident/base?fields=severity&entries_limit=-5', status: 403, error: 'SCOPE_DENIED' },
  // a read is never CLASS_GONE: the later checks still apply
  { name: 'get on a deleted class: NO_ROLE', who: 'dave', path: '/v1/records/relic/old', status: 403, error: 'NO_ROLE' },
  { name: 'get on a deleted class: MALFORMED id, not CLASS_GONE', who: 'alice', path: '/v1/records/relic/Bad_ID', status: 400, error: 'MALFORMED' },
  { name: 'get on a deleted class: UNKNOWN_FIELD, not CLASS_GONE', who: 'alice', path: '/v1/records/relic/old?fields=nosuch', status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'get on a deleted class: SCOPE_DENIED, not CLASS_GONE', who: 'bob', path: '/v1/records/relic/old?fields=era', status: 403, error: 'SCOPE_DENIED' },

  // history: same order with field=
  { name: 'history: UNAUTHENTICATED > NOT_FOUND', who: null, path: '/v1/records/nosuch/x/history', status: 401, error: 'UNAUTHENTICATED' },
  { name: 'history: NOT_FOUND class > NO_ROLE > MALFORMED id', who: 'dave', path: '/v1/records/nosuch/Bad_ID/history', status: 404, error: 'NOT_FOUND' },
  { name: 'history: NO_ROLE > MALFORMED id > UNKNOWN_FIELD > bad limit', who: 'dave', path: '/v1/records/incident/Bad_ID/history?field=nosuch&limit=0', status: 403, error: 'NO_ROLE' },
  { name: 'history: MALFORMED id > UNKNOWN_FIELD', who: 'alice', path: '/v1/records/incident/Bad_ID/history?field=nosuch', status: 400, error: 'MALFORMED' },
  { name: 'history: UNKNOWN_FIELD > SCOPE_DENIED > bad limit', who: 'bob', path: '/v1/records/incident/base/history?field=nosuch&limit=0', status: 422, error: 'UNKNOWN_FIELD' },
  { name: 'history: SCOPE_DENIED > bad limit', who: 'bob', path: '/v1/records/incident/base/history?field=severity&limit=0', status: 403, error: 'SCOPE_DENIED' },
  { name: 'history: SCOPE_DENIED > forged cursor', who: 'bob', path: '/v1/records/incident/base/history?field=severity&before=garbage', status: 403, error: 'SCOPE_DENIED' },
  { name: 'history: SCOPE_DENIED for a field the role may write but not read', who: 'alice', path: '/v1/records/incident/base/history?field=secret&limit=99999', status: 403, error: 'SCOPE_DENIED' },
  { name: 'history on a deleted class: NO_ROLE', who: 'dave', path: '/v1/records/relic/old/history', status: 403, error: 'NO_ROLE' },
  { name: 'history on a deleted class: MALFORMED id, not CLASS_GONE', who: 'alice', path: '/v1/records/relic/Bad_ID/history', status: 400, error: 'MALFORMED' },

  // class
  { name: 'class: UNAUTHENTICATED > NOT_FOUND', who: null, path: '/v1/classes/nosuch', status: 401, error: 'UNAUTHENTICATED' },
  { name: 'class: NOT_FOUND > NO_ROLE', who: 'dave', path: '/v1/classes/nosuch', status: 404, error: 'NOT_FOUND' },
  { name: 'class: NO_ROLE', who: 'dave', path: '/v1/classes/incident', status: 403, error: 'NO_ROLE' },
  { name: 'class: NO_ROLE on a deleted class', who: 'dave', path: '/v1/classes/relic', status: 403, error: 'NO_ROLE' },
];

async function send(c: Case) {
  return t.call(c.who, c.method ?? (c.body === undefined ? 'GET' : 'PUT'), c.path, c.body, c.headers);
}

describe('put: the earlier check of the spec order wins', () => {
  test.each(putCases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const first = await send(c);
    expect({ status: first.status, error: first.body?.error }).toEqual({ status: c.status, error: c.error });
    // The same request always gets the same answer.
    const again = await send(c);
    const third = await send(c);
    expect(again).toEqual(first);
    expect(third).toEqual(first);
  });

  test('rejections before the write transaction leave the records untouched', async () => {
    const base = await t.call('alice', 'GET', '/v1/records/incident/base');
    expect(base.status).toBe(200);
    expect(base.body.record_version).toBe(3);
    expect(base.body.fields.title).toMatchObject({ value: 'hello', version: 1 });
    expect(base.body.fields.status).toMatchObject({ value: 'investigating', version: 2 });
    expect(Object.keys(base.body.fields).sort()).toEqual(['status', 'title']);
    const gateB = await t.call('alice', 'GET', '/v1/records/incident/gate-b');
    expect(gateB.body.fields.status).toMatchObject({ value: 'open', version: 1 });
    const led = await t.call('alice', 'GET', '/v1/records/ledger/base');
    expect(led.body.record_version).toBe(1);
    expect(led.body.fields.decision).toMatchObject({ value: 'approve', version: 1 });
    expect((await t.call('alice', 'GET', '/v1/records/incident/nowhere')).status).toBe(404);
  });
});

describe('get, history and class: the earlier check of the spec order wins', () => {
  test.each(readCases.map((c) => [c.name, c] as const))('%s', async (_name, c) => {
    const first = await send(c);
    expect({ status: first.status, error: first.body?.error }).toEqual({ status: c.status, error: c.error });
    const again = await send(c);
    expect(again).toEqual(first);
  });
});

describe('NO_ROLE tells nothing about the class', () => {
  const SECRETS = [
    // field names, role names, subjects, namespace and idPattern of `incident`
    ...Object.keys(incident.spec.fields),
    ...Object.keys(incident.spec.roles),
    'apikey:alice',
    'apikey:bob',
    'apikey:carol',
    'team-a',
    '[a-z0-9-]',
    'summary',
    'next_steps',
  ];
  const requests: { path: string; method: 'GET' | 'PUT'; body?: unknown }[] = [
    { method: 'PUT', path: P('incident', 'base', 'nosuch'), body: GOOD },
    { method: 'PUT', path: P('incident', 'Bad_ID', 'nosuch'), body: BAD_JSON },
    { method: 'GET', path: '/v1/records/incident/base' },
    { method: 'GET', path: '/v1/records/incident/base?fields=nosuch' },
    { method: 'GET', path: '/v1/records/incident/base/history' },
    { method: 'GET', path: '/v1/classes/incident' },
  ];

  test.each(requests.map((r) => [`${r.method} ${r.path}`, r] as const))('%s', async (_n, r) => {
    const res = await t.call('dave', r.method, r.path, r.body);
    expect(res.status).toBe(403);
    expect(res.body.error).toBe('NO_ROLE');
    expect(typeof res.body.message).toBe('string');
    for (const k of Object.keys(res.body)) expect(['error', 'message', 'record', 'class']).toContain(k);
    const text = JSON.stringify(res.body);
    for (const s of SECRETS) expect(text, `NO_ROLE body reveals "${s}"`).not.toContain(s);
  });

  test('an existing and an unknown field, a good and a bad id, get the same NO_ROLE body', async () => {
    const known = await t.call('dave', 'PUT', P('incident', 'base', 'title'), GOOD);
    const unknown = await t.call('dave', 'PUT', P('incident', 'base', 'zzzz'), GOOD);
    expect(known.status).toBe(403);
    const strip = (b: any) => JSON.stringify(b).replaceAll('title', 'F').replaceAll('zzzz', 'F');
    expect(strip(unknown.body)).toBe(strip(known.body));
    const readKnown = await t.call('dave', 'GET', '/v1/records/incident/base?fields=title');
    const readUnknown = await t.call('dave', 'GET', '/v1/records/incident/base?fields=zzzz');
    expect(readUnknown).toEqual(readKnown);
    const liveClass = await t.call('dave', 'PUT', P('incident', 'x', 'title'), GOOD);
    const goneClass = await t.call('dave', 'PUT', P('relic', 'x', 'title'), GOOD);
    expect(goneClass.status).toBe(liveClass.status);
    expect(Object.keys(goneClass.body).sort()).toEqual(Object.keys(liveClass.body).sort());
  });
});

describe('a deleted (gone) class', () => {
  test('is listed with gone: true and its definition still reads', async () => {
    const list = await t.call('alice', 'GET', '/v1/classes');
    expect(list.status).toBe(200);
    expect(list.body.classes).toContainEqual({ name: 'relic', gone: true });
    const cls = await t.call('alice', 'GET', '/v1/classes/relic');
    expect(cls.status).toBe(200);
    expect(cls.body.name).toBe('relic');
    expect(cls.body.gone).toBe(true);
  });

  test('get and history keep working', async () => {
    const g = await t.call('alice', 'GET', '/v1/records/relic/old');
    expect(g.status).toBe(200);
    expect(g.body.fields.label).toMatchObject({ value: 'vase', version: 1 });
    const gb = await t.call('bob', 'GET', '/v1/records/relic/old');
    expect(gb.status).toBe(200);
    expect(Object.keys(gb.body.fields)).toEqual(['label']);
    const h = await t.call('alice', 'GET', '/v1/records/relic/old/history');
    expect(h.status).toBe(200);
    expect(h.body.history.map((r: any) => [r.field, r.outcome])).toEqual([['label', 'applied']]);
  });

  test('writes get CLASS_GONE (410), change nothing and leave no history row', async () => {
    const before = await historyCount('relic', 'old');
    const upd = await t.call('alice', 'PUT', P('relic', 'old', 'label'), { value: 'urn', expected_version: 1 });
    expect(upd.status).toBe(410);
    expect(upd.body.error).toBe('CLASS_GONE');
    const create = await t.call('alice', 'PUT', P('relic', 'fresh', 'label'), { value: 'urn', expected_version: 0 });
    expect(create.status).toBe(410);
    expect(create.body.error).toBe('CLASS_GONE');
    const g = await t.call('alice', 'GET', '/v1/records/relic/old');
    expect(g.body.fields.label).toMatchObject({ value: 'vase', version: 1 });
    expect(g.body.record_version).toBe(1);
    expect((await t.call('alice', 'GET', '/v1/records/relic/fresh')).status).toBe(404);
    expect(await historyCount('relic', 'old')).toBe(before);
    expect(await historyCount('relic', 'fresh')).toBe(0);
  });

  test('NO_ROLE beats CLASS_GONE; CLASS_GONE beats a bad id', async () => {
    const noRole = await t.call('dave', 'PUT', P('relic', 'old', 'label'), { value: 'urn', expected_version: 1 });
    expect([noRole.status, noRole.body.error]).toEqual([403, 'NO_ROLE']);
    const gone = await t.call('alice', 'PUT', P('relic', 'Not_Valid!', 'label'), GOOD);
    expect([gone.status, gone.body.error]).toEqual([410, 'CLASS_GONE']);
  });

  test('brought back by its manifest, it takes writes again', async () => {
    await bringRelicBack();
    const cls = await t.call('alice', 'GET', '/v1/classes/relic');
    expect(cls.status).toBe(200);
    expect(cls.body.gone).toBe(false);
    const list = await t.call('alice', 'GET', '/v1/classes');
    expect(list.body.classes).toContainEqual({ name: 'relic' });
    const upd = await t.call('alice', 'PUT', P('relic', 'old', 'label'), { value: 'urn', expected_version: 1 });
    expect(upd).toEqual({ status: 200, body: { record: 'relic/old', field: 'label', version: 2, record_version: 2 } });
    const create = await t.call('alice', 'PUT', P('relic', 'fresh', 'label'), { value: 'cup', expected_version: 0 });
    expect(create.status).toBe(201);
    // and the ordinary order applies again: a bad id is MALFORMED now
    const badId = await t.call('alice', 'PUT', P('relic', 'Bad_ID', 'label'), GOOD);
    expect([badId.status, badId.body.error]).toEqual([400, 'MALFORMED']);
    // gone again, then back again: still consistent
    await makeRelicGone();
    const again = await t.call('alice', 'PUT', P('relic', 'old', 'label'), { value: 'jar', expected_version: 2 });
    expect([again.status, again.body.error]).toEqual([410, 'CLASS_GONE']);
    await bringRelicBack();
    const back = await t.call('alice', 'PUT', P('relic', 'old', 'label'), { value: 'jar', expected_version: 2 });
    expect(back.status).toBe(200);
  });
});
