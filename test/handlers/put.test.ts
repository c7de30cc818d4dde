/**
 * put: PUT /v1/records/{class}/{id}/fields/{field}, against a real gateway and PostgreSQL.
 * Every expectation is taken from interface.md and the decisions, not from the code.
 */
import { request as httpRequest } from 'node:http';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { audited, fortress, incident } from '../fixtures/classes.js';
import { typed } from '../fixtures/put-classes.js';
import { KEYS, startTestGateway, type TestGateway, TS } from '../setup/gateway.js';


let t: TestGateway;
beforeAll(async () => {
  t = await startTestGateway([incident, fortress, audited, typed]);
});
afterAll(() => t?.close());

type Res = { status: number; body: any };

let seq = 0;
/** A record id nobody has used yet in this file. */
const fresh = (prefix = 'r') => `${prefix}-${++seq}`;

const put = (who: string | null, cls: string, id: string, field: string, body?: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/${cls}/${encodeURIComponent(id)}/fields/${field}`, body);

const get = (who: string, cls: string, id: string, query = ''): Promise<Res> =>
  t.call(who, 'GET', `/v1/records/${cls}/${encodeURIComponent(id)}${query}`);

/**
 * A PUT on a connection of its own (no keep-alive pool), for bodies the server may stop
 * reading: with `withLength` the Content-Length header is sent, otherwise the body is chunked.
 */
function rawPut(path: string, chunks: Buffer[], withLength: boolean): Promise<Res> {
  return new Promise((resolve, reject) => {
    const u = new URL(t.url + path);
    const headers: Record<string, string | number> = {
      authorization: `Bearer ${KEYS.alice}`,
      'content-type': 'application/json',
    };
    if (withLength) headers['content-length'] = chunks.reduce((n, c) => n + c.length, 0);
    let answered = false;
    const req = httpRequest({ host: u.hostname, port: u.port, path: u.pathname, method: 'PUT', headers, agent: false }, (res) => {
      answered = true;
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => parts.push(d));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        let body: unknown = text;
        try {
          body = JSON.parse(text);
        } catch {
          /* keep text */
        }
        resolve({ status: res.statusCode ?? 0, body });
      });
      res.on('error', reject);
    });
    // The server may answer and close before the whole body is sent: that is not a failure.
    req.on('error', (e) => {
      if (!answered) reject(e);
    });
    (async () => {
      for (const c of chunks) {
        if (req.destroyed) return;
        if (!req.write(c)) await new Promise<void>((r) => { req.once('drain', r); req.once('close', r); });
      }
      req.end();
    })().catch(() => undefined);
  });
}

/** Every error body has `error` (the code) and `message` (a sentence for a person). */
function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

function expectApplied(res: Res, status: 200 | 201, body: { record: string; field: string; version: number; record_version: number }) {
  expect(res.body).toEqual(body);
  expect(res.status).toBe(status);
}

// ---------------------------------------------------------------------------------------
describe('version transitions', () => {
  test('0 -> 1 creates the record (201), N -> N+1 answers 200', async () => {
    const id = fresh();
    expect((await get('alice', 'incident', id)).status).toBe(404);
    const r1 = await put('alice', 'incident', id, 'title', { value: 'one', expected_version: 0 });
    expectApplied(r1, 201, { record: `incident/${id}`, field: 'title', version: 1, record_version: 1 });
    const r2 = await put('alice', 'incident', id, 'title', { value: 'two', expected_version: 1 });
    expectApplied(r2, 200, { record: `incident/${id}`, field: 'title', version: 2, record_version: 2 });
    const r3 = await put('alice', 'incident', id, 'title', { value: 'three', expected_version: 2 });
    expectApplied(r3, 200, { record: `incident/${id}`, field: 'title', version: 3, record_version: 3 });
    const g = await get('alice', 'incident', id);
    expect(g.status).toBe(200);
    expect(g.body.record_version).toBe(3);
    expect(g.body.fields.title).toMatchObject({ value: 'three', version: 3, author: 'apikey:alice' });
  });

  test('record_version rises with every applied write to any field of the record', async () => {
    const id = fresh();
    const rec = `incident/${id}`;
    expectApplied(await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0 }), 201, {
      record: rec, field: 'title', version: 1, record_version: 1,
    });
    // First write of another field of an existing record: 200, not 201.
    expectApplied(await put('alice', 'incident', id, 'status', { value: 'open', expected_version: 0 }), 200, {
      record: rec, field: 'status', version: 1, record_version: 2,
    });
    expectApplied(await put('carol', 'incident', id, 'title', { value: 't2', expected_version: 1 }), 200, {
      record: rec, field: 'title', version: 2, record_version: 3,
    });
    expectApplied(await put('alice', 'incident', id, 'scratch', { value: { any: 'thing' } }), 200, {
      record: rec, field: 'scratch', version: 1, record_version: 4,
    });
    expectApplied(await put('alice', 'incident', id, 'severity', { value: 2, expected_version: 0 }), 200, {
      record: rec, field: 'severity', version: 1, record_version: 5,
    });
    // A rejected write does not raise it.
    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 1 }), 409, 'STALE');
    const g = await get('alice', 'incident', id);
    expect(g.body.record_version).toBe(5);
    expect(g.body.fields.title.version).toBe(2);
    expect(g.body.fields.title.author).toBe('apikey:carol');
    expect(g.body.fields.status.version).toBe(1);
    expect(g.body.fields.scratch.version).toBe(1);
    expect(g.body.fields.severity.version).toBe(1);
  });

  test('JSON null is a value on a field whose type allows it', async () => {
    const id = fresh();
    expectApplied(await put('alice', 'incident', id, 'blob', { value: null, expected_version: 0 }), 201, {
      record: `incident/${id}`, field: 'blob', version: 1, record_version: 1,
    });
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.blob).toMatchObject({ value: null, version: 1 });
    expect('value' in g.body.fields.blob).toBe(true);
  });
});

// ---------------------------------------------------------------------------------------
describe('STALE', () => {
  test('409 body has every key, no `record`, and the current state of the field', async () => {
    const id = fresh();
    await put('carol', 'incident', id, 'blob', { value: { a: 1, b: 'x' }, expected_version: 0, evidence: 'from the pager' });
    const after = await get('alice', 'incident', id);
    const r = await put('alice', 'incident', id, 'blob', { value: { a: 2, b: 'x' }, expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(Object.keys(r.body).sort()).toEqual(
      [
        'error', 'message', 'field', 'your_version', 'current_version', 'current_value',
        'current_author', 'current_evidence', 'current_updated_at', 'diff',
      ].sort(),
    );
    expect(r.body).not.toHaveProperty('record');
    expect(r.body).toMatchObject({
      field: 'blob',
      your_version: 0,
      current_version: 1,
      current_value: { a: 1, b: 'x' },
      current_author: 'apikey:carol',
      current_evidence: 'from the pager',
    });
    expect(r.body.current_updated_at).toMatch(TS);
    expect(r.body.current_updated_at).toBe(after.body.fields.blob.updated_at);
  });

  test('diff is a unified diff of pretty-printed JSON, current versus proposed', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'blob', { value: { a: 1, b: 'x' }, expected_version: 0 });
    await put('alice', 'incident', id, 'blob', { value: { a: 1, b: 'x' }, expected_version: 1 });
    const r = await put('alice', 'incident', id, 'blob', { value: { a: 2, b: 'x' }, expected_version: 1 });
    expectError(r, 409, 'STALE');
    const diff: string = r.body.diff;
    expect(typeof diff).toBe('string');
    expect(diff).toMatch(/^--- current/m);
    expect(diff).toMatch(/^\+\+\+ proposed/m);
    expect(diff).toMatch(/^@@ .* @@/m);
    expect(diff).toMatch(/^- {2}"a": 1,?$/m);
    expect(diff).toMatch(/^\+ {2}"a": 2,?$/m);
    // The unchanged key is context, not a change.
    expect(diff).toMatch(/^ {3}"b": "x"$/m);
    expect(diff).not.toMatch(/^[-+] {2}"b"/m);
  });

  test('a role that may write but not read the field gets nulls and an empty diff', async () => {
    const id = fresh();
    // responder alice may write `secret` but not read it.
    const r1 = await put('alice', 'incident', id, 'secret', { value: 'hunter2', expected_version: 0, evidence: 'e' });
    expect(r1.status).toBe(201);
    const r = await put('alice', 'incident', id, 'secret', { value: 'other', expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(r.body).not.toHaveProperty('record');
    expect(r.body).toMatchObject({
      field: 'secret',
      your_version: 0,
      current_version: 1,
      current_value: null,
      current_author: null,
      current_evidence: null,
      current_updated_at: null,
      diff: '',
    });
    expect(JSON.stringify(r.body)).not.toContain('hunter2');
  });

  test('diff is replaced by a short note when the current value exceeds 64 KiB', async () => {
    const id = fresh();
    const big = 'x'.repeat(70 * 1024); // one line, over 64 KiB
    expect((await put('alice', 'incident', id, 'blob', { value: big, expected_version: 0 })).status).toBe(201);
    const r = await put('alice', 'incident', id, 'blob', { value: 'small', expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(r.body.current_value).toBe(big);
    expect(typeof r.body.diff).toBe('string');
    expect(r.body.diff.length).toBeGreaterThan(0);
    expect(r.body.diff.length).toBeLessThan(1024);
    expect(r.body.diff).not.toContain('@@');
    expect(r.body.diff).not.toContain('xxxxxxxxxx');
  });

  test('diff is replaced by a short note when the proposed value exceeds 64 KiB', async () => {
    const id = fresh();
    expect((await put('alice', 'incident', id, 'blob', { value: 'small', expected_version: 0 })).status).toBe(201);
    const r = await put('alice', 'incident', id, 'blob', { value: 'y'.repeat(70 * 1024), expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(r.body.diff.length).toBeGreaterThan(0);
    expect(r.body.diff.length).toBeLessThan(1024);
    expect(r.body.diff).not.toContain('@@');
  });

  test('diff is replaced by a short note when a value exceeds 500 lines', async () => {
    const id = fresh();
    // 600 small numbers: about 2 KiB, but over 600 lines once pretty-printed.
    const long = Array.from({ length: 600 }, (_, i) => i);
    expect(JSON.stringify(long).length).toBeLessThan(64 * 1024);
    expect(JSON.stringify(long, null, 2).split('\n').length).toBeGreaterThan(500);
    expect((await put('alice', 'incident', id, 'blob', { value: [0], expected_version: 0 })).status).toBe(201);
    const r = await put('alice', 'incident', id, 'blob', { value: long, expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(r.body.diff.length).toBeGreaterThan(0);
    expect(r.body.diff.length).toBeLessThan(1024);
    expect(r.body.diff).not.toContain('@@');
    // ... and the same when the long value is the current one.
    const id2 = fresh();
    expect((await put('alice', 'incident', id2, 'blob', { value: long, expected_version: 0 })).status).toBe(201);
    const r2 = await put('alice', 'incident', id2, 'blob', { value: [0], expected_version: 0 });
    expectError(r2, 409, 'STALE');
    expect(r2.body.current_value).toEqual(long);
    expect(r2.body.diff.length).toBeGreaterThan(0);
    expect(r2.body.diff.length).toBeLessThan(1024);
    expect(r2.body.diff).not.toContain('@@');
  });

  test('expected_version 0 on an existing field is STALE', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'title', { value: 'a', expected_version: 0 });
    const r = await put('alice', 'incident', id, 'title', { value: 'b', expected_version: 0 });
    expectError(r, 409, 'STALE');
    expect(r.body).toMatchObject({ field: 'title', your_version: 0, current_version: 1, current_value: 'a' });
  });

  test('expected_version > 0 on a missing field is STALE with current_version 0 and current_value null', async () => {
    // The record exists, the field has never been written.
    const id = fresh();
    await put('alice', 'incident', id, 'title', { value: 'a', expected_version: 0 });
    const r = await put('alice', 'incident', id, 'severity', { value: 3, expected_version: 2 });
    expectError(r, 409, 'STALE');
    expect(r.body).toMatchObject({ field: 'severity', your_version: 2, current_version: 0, current_value: null });
    expect(r.body).not.toHaveProperty('record');
    const g = await get('alice', 'incident', id);
    expect(g.body.fields).not.toHaveProperty('severity');
    expect(g.body.record_version).toBe(1);

    // The record does not exist at all: STALE, and the record is not created.
    const id2 = fresh();
    const r2 = await put('alice', 'incident', id2, 'title', { value: 'a', expected_version: 1 });
    expectError(r2, 409, 'STALE');
    expect(r2.body).toMatchObject({ field: 'title', your_version: 1, current_version: 0, current_value: null });
    expectError(await get('alice', 'incident', id2), 404, 'NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------
describe('soft fields', () => {
  test('expected_version is ignored (absent or any value) and the version rises', async () => {
    const id = fresh();
    const rec = `incident/${id}`;
    expectApplied(await put('alice', 'incident', id, 'scratch', { value: 1 }), 201, {
      record: rec, field: 'scratch', version: 1, record_version: 1,
    });
    const bodies: unknown[] = [
      { value: 2, expected_version: 0 },
      { value: 3, expected_version: 99 },
      { value: 4, expected_version: -5 },
      { value: 5, expected_version: 1.5 },
      { value: 6, expected_version: 'whatever' },
      { value: 7, expected_version: null },
      { value: 8 },
    ];
    let v = 1;
    for (const b of bodies) {
      v++;
      expectApplied(await put('alice', 'incident', id, 'scratch', b), 200, {
        record: rec, field: 'scratch', version: v, record_version: v,
      });
    }
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.scratch).toMatchObject({ value: 8, version: 8 });
  });

  test('a soft field still checks its type', async () => {
    const id = fresh();
    expectError(await put('alice', 'typed', id, 'softstr', { value: 5 }), 400, 'MALFORMED');
    expect((await put('alice', 'typed', id, 'softstr', { value: 'ok' })).status).toBe(201);
  });
});

// ---------------------------------------------------------------------------------------
describe('value type and enum', () => {
  const cases: { field: string; good: unknown[]; bad: unknown[] }[] = [
    { field: 'str', good: ['', 'text'], bad: [1, true, null, ['a'], { a: 'b' }] },
    { field: 'int', good: [0, -3, 42], bad: [1.5, '2', true, null, [1], {}] },
    { field: 'num', good: [1.5, -2, 0], bad: ['1.5', false, null, [], {}] },
    { field: 'bool', good: [true, false], bad: ['true', 0, 1, null, []] },
    { field: 'obj', good: [{}, { a: { b: [1] } }], bad: [[], 'x', 1, null, true] },
    { field: 'arr', good: [[], [1, 'a', { b: null }]], bad: [{}, 'x', 1, null] },
    { field: 'anything', good: [null, 'x', 1, 1.5, true, [], { a: 1 }], bad: [] },
    { field: 'untyped', good: [null, 'x', 1, false, [1], { a: 1 }], bad: [] },
    { field: 'mixed', good: [1, 'one', true, null], bad: ['1', 2, 'two', false, [1], { one: 1 }] },
  ];

  for (const c of cases) {
    test(`${c.field}: matching values apply, others are MALFORMED naming the field`, async () => {
      const id = fresh('ty');
      let version = 0;
      for (const good of c.good) {
        const r = await put('alice', 'typed', id, c.field, { value: good, expected_version: version });
        expect(r.body, `${c.field} = ${JSON.stringify(good)}`).toMatchObject({ field: c.field, version: version + 1 });
        expect([200, 201]).toContain(r.status);
        version++;
        const g = await get('alice', 'typed', id, `?fields=${c.field}`);
        expect(g.body.fields[c.field].value).toEqual(good);
      }
      for (const bad of c.bad) {
        const r = await put('alice', 'typed', id, c.field, { value: bad, expected_version: version });
        expectError(r, 400, 'MALFORMED');
        expect(r.body.message, `${c.field} = ${JSON.stringify(bad)}`).toContain(c.field);
      }
      if (c.good.length > 0) {
        const g = await get('alice', 'typed', id, `?fields=${c.field}`);
        expect(g.body.fields[c.field].version).toBe(version);
        expect(g.body.fields[c.field].value).toEqual(c.good[c.good.length - 1]);
      }
    });
  }

  test('enum violation on incident.status is MALFORMED naming the field', async () => {
    const id = fresh();
    const r = await put('alice', 'incident', id, 'status', { value: 'closed', expected_version: 0 });
    expectError(r, 400, 'MALFORMED');
    expect(r.body.message).toContain('status');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
    expect((await put('alice', 'incident', id, 'status', { value: 'investigating', expected_version: 0 })).status).toBe(201);
  });
});

// ---------------------------------------------------------------------------------------
describe('malformed bodies', () => {
  test('`value` missing is MALFORMED (versioned and soft)', async () => {
    const id = fresh();
    expectError(await put('alice', 'incident', id, 'title', { expected_version: 0 }), 400, 'MALFORMED');
    expectError(await put('alice', 'incident', id, 'scratch', {}), 400, 'MALFORMED');
    expectError(await put('alice', 'incident', id, 'scratch', { evidence: 'x' }), 400, 'MALFORMED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('expected_version missing, negative, non-integer or not a number on a versioned field is MALFORMED', async () => {
    const id = fresh();
    for (const ev of [undefined, -1, 1.5, '0', '1', null, true, [0], { v: 0 }]) {
      const body: Record<string, unknown> = { value: 'x' };
      if (ev !== undefined) body.expected_version = ev;
      const r = await put('alice', 'incident', id, 'title', body);
      expect(r.body.error, `expected_version ${JSON.stringify(ev)}`).toBe('MALFORMED');
      expectError(r, 400, 'MALFORMED');
    }
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('an unknown body key is MALFORMED', async () => {
    const id = fresh();
    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 0, extra: 1 }), 400, 'MALFORMED');
    // A typo on a soft field must not be silently ignored.
    expectError(await put('alice', 'incident', id, 'scratch', { value: 'x', expected_verison: 0 }), 400, 'MALFORMED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('bad JSON, a JSON array, a JSON scalar, null, an empty body and no body are MALFORMED', async () => {
    const id = fresh();
    for (const raw of ['{"value": "x", "expected_version": 0', 'not json', '[{"value":"x","expected_version":0}]', '"x"', '42', 'null', '', '   ']) {
      const r = await put('alice', 'incident', id, 'title', raw);
      expect(r.body?.error, `body ${JSON.stringify(raw)}`).toBe('MALFORMED');
      expectError(r, 400, 'MALFORMED');
    }
    expectError(await put('alice', 'incident', id, 'title'), 400, 'MALFORMED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a body over 4 MiB (with Content-Length) is MALFORMED 400, not 413 or 500', async () => {
    const id = fresh();
    const body = JSON.stringify({ value: 'z'.repeat(4 * 1024 * 1024 + 16), expected_version: 0 });
    expect(body.length).toBeGreaterThan(4 * 1024 * 1024);
    const r = await rawPut(`/v1/records/incident/${id}/fields/blob`, [Buffer.from(body)], true);
    expectError(r, 400, 'MALFORMED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a chunked body over 4 MiB (no Content-Length) is MALFORMED 400', async () => {
    const id = fresh();
    const chunks = [Buffer.from('{"expected_version":0,"value":"')];
    for (let i = 0; i < 20; i++) chunks.push(Buffer.alloc(256 * 1024, 'z'));
    chunks.push(Buffer.from('"}'));
    const r = await rawPut(`/v1/records/incident/${id}/fields/blob`, chunks, false);
    expectError(r, 400, 'MALFORMED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a body just under 4 MiB is accepted', async () => {
    const id = fresh();
    const value = 'q'.repeat(4 * 1024 * 1024 - 100);
    const r = await put('alice', 'incident', id, 'blob', { value, expected_version: 0 });
    expect(r.status).toBe(201);
  });
});

// ---------------------------------------------------------------------------------------
describe('evidence', () => {
  test('a field with requireEvidence: missing or empty evidence is EVIDENCE_REQUIRED', async () => {
    const id = fresh();
    expectError(await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0 }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0, evidence: '' }), 422, 'EVIDENCE_REQUIRED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
    const ok = await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0, evidence: 'seen in the logs' });
    expect(ok.status).toBe(201);
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.proof).toMatchObject({ value: 1, version: 1, evidence: 'seen in the logs' });
    // Fields without the flag need none.
    expect((await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0 })).status).toBe(200);
  });

  test('a class with requireEvidence needs it on every put (versioned and soft)', async () => {
    const id = fresh();
    expectError(await put('alice', 'audited', id, 'decision', { value: 'go', expected_version: 0 }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('alice', 'audited', id, 'decision', { value: 'go', expected_version: 0, evidence: '' }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('alice', 'audited', id, 'memo', { value: 'm' }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('alice', 'audited', id, 'memo', { value: 'm', evidence: '' }), 422, 'EVIDENCE_REQUIRED');
    expectError(await get('alice', 'audited', id), 404, 'NOT_FOUND');
    expect((await put('alice', 'audited', id, 'decision', { value: 'go', expected_version: 0, evidence: 'ticket 12' })).status).toBe(201);
    expect((await put('alice', 'audited', id, 'memo', { value: 'm', evidence: 'note' })).status).toBe(200);
    const g = await get('alice', 'audited', id);
    expect(g.body.fields.decision).toMatchObject({ value: 'go', evidence: 'ticket 12' });
    expect(g.body.fields.memo).toMatchObject({ value: 'm', evidence: 'note' });
  });

  test('evidence that is not a string is MALFORMED', async () => {
    const id = fresh();
    expectError(await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0, evidence: 5 }), 400, 'MALFORMED');
    expectError(await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0, evidence: ['a'] }), 400, 'MALFORMED');
  });
});

// ---------------------------------------------------------------------------------------
describe('invocation', () => {
  test('an object of at most 1 KiB is stored and returned unchanged (nested values, key order)', async () => {
    const id = fresh();
    // Key order deliberately unlike any sorted or length-first order.
    const invocation = {
      zeta_tool: 'search',
      alpha: { b: 2, a: [1, { y: null, x: 'é' }], c: { z: true, m: 1.25 } },
      m: 0,
      longer_key_name: ['x', { k2: 'v', k1: [] }],
    };
    expect(new TextEncoder().encode(JSON.stringify(invocation)).length).toBeLessThanOrEqual(1024);
    expect((await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, invocation })).status).toBe(201);
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.title.invocation).toEqual(invocation);
    expect(JSON.stringify(g.body.fields.title.invocation)).toBe(JSON.stringify(invocation));
  });

  test('exactly 1 KiB applies; over 1 KiB is MALFORMED', async () => {
    const id = fresh();
    const exact = { p: 'x'.repeat(1024 - '{"p":""}'.length) };
    expect(JSON.stringify(exact).length).toBe(1024);
    expect((await put('alice', 'incident', id, 'scratch', { value: 1, invocation: exact })).status).toBe(201);
    const over = { p: 'x'.repeat(1025 - '{"p":""}'.length) };
    expect(JSON.stringify(over).length).toBe(1025);
    expectError(await put('alice', 'incident', id, 'scratch', { value: 2, invocation: over }), 400, 'MALFORMED');
    const big = { p: 'x'.repeat(4000) };
    expectError(await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, invocation: big }), 400, 'MALFORMED');
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.scratch).toMatchObject({ value: 1, version: 1 });
    expect(g.body.fields).not.toHaveProperty('title');
  });

  test('an invocation that is not an object is MALFORMED', async () => {
    const id = fresh();
    const cases: unknown[] = [[], [1, 2], 'call', null, 5, true];
    const got: Record<string, string> = {};
    for (const invocation of cases) {
      const r = await put('alice', 'incident', id, 'scratch', { value: 't', invocation });
      got[JSON.stringify(invocation)] = `${r.status} ${r.body?.error ?? 'applied'}`;
    }
    expect(got).toEqual(Object.fromEntries(cases.map((c) => [JSON.stringify(c), '400 MALFORMED'])));
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });
});

// ---------------------------------------------------------------------------------------
describe('record id', () => {
  test('exactly 256 bytes is accepted when the class has no idPattern', async () => {
    const id = 'a'.repeat(256);
    const r = await put('alice', 'typed', id, 'str', { value: 'x', expected_version: 0 });
    expectApplied(r, 201, { record: `typed/${id}`, field: 'str', version: 1, record_version: 1 });
    const g = await get('alice', 'typed', id);
    expect(g.status).toBe(200);
    expect(g.body.record).toBe(`typed/${id}`);
  });

  test('257 bytes is MALFORMED', async () => {
    const id = 'b'.repeat(257);
    expectError(await put('alice', 'typed', id, 'str', { value: 'x', expected_version: 0 }), 400, 'MALFORMED');
  });

  test('multi-byte UTF-8 is counted in bytes, not characters', async () => {
    const ok = 'é'.repeat(128); // 128 characters, 256 bytes
    const r = await put('alice', 'typed', ok, 'str', { value: 'x', expected_version: 0 });
    expectApplied(r, 201, { record: `typed/${ok}`, field: 'str', version: 1, record_version: 1 });
    const g = await get('alice', 'typed', ok);
    expect(g.body.record).toBe(`typed/${ok}`);

    const tooLong = 'é'.repeat(129); // 129 characters, 258 bytes
    expectError(await put('alice', 'typed', tooLong, 'str', { value: 'x', expected_version: 0 }), 400, 'MALFORMED');
    const euro = '€'.repeat(86); // 86 characters, 258 bytes
    expectError(await put('alice', 'typed', euro, 'str', { value: 'x', expected_version: 0 }), 400, 'MALFORMED');
    const mixed = 'a' + 'é'.repeat(128); // 129 characters, 257 bytes
    expectError(await put('alice', 'typed', mixed, 'str', { value: 'x', expected_version: 0 }), 400, 'MALFORMED');
  });

  test('an id containing "/" (sent as %2F) is MALFORMED', async () => {
    const r = await t.call('alice', 'PUT', '/v1/records/typed/a%2Fb/fields/str', { value: 'x', expected_version: 0 });
    expectError(r, 400, 'MALFORMED');
    const r2 = await t.call('alice', 'PUT', '/v1/records/typed/%2F/fields/str', { value: 'x', expected_version: 0 });
    expectError(r2, 400, 'MALFORMED');
  });

  test('an id not matching the class idPattern is MALFORMED', async () => {
    for (const id of ['Upper', 'has space', 'under_score', 'x'.repeat(65)]) {
      const r = await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 0 });
      expect(r.body.error, id).toBe('MALFORMED');
      expectError(r, 400, 'MALFORMED');
    }
  });
});

// ---------------------------------------------------------------------------------------
describe('authorization and field errors', () => {
  test('no or bad credential is UNAUTHENTICATED 401', async () => {
    expectError(await put(null, 'incident', fresh(), 'title', { value: 'x', expected_version: 0 }), 401, 'UNAUTHENTICATED');
    expectError(await put('not-a-key', 'incident', fresh(), 'title', { value: 'x', expected_version: 0 }), 401, 'UNAUTHENTICATED');
  });

  test('WEAK_IDENTITY for a class floor: required and presented, no field', async () => {
    const r = await put('alice', 'fortress', fresh(), 'gate', { value: 1, expected_version: 0 });
    expectError(r, 403, 'WEAK_IDENTITY');
    expect(r.body.required).toBe('pod-bound');
    expect(r.body.presented).toBe('shared-secret');
    expect(r.body).not.toHaveProperty('field');
  });

  test('WEAK_IDENTITY for a field floor: required, presented and field', async () => {
    const id = fresh();
    const r = await put('alice', 'incident', id, 'strong', { value: 1, expected_version: 0 });
    expectError(r, 403, 'WEAK_IDENTITY');
    expect(r.body).toMatchObject({ required: 'sa-bound', presented: 'shared-secret', field: 'strong' });
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('SCOPE_DENIED when the role may not write the field', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'title', { value: 'orig', expected_version: 0 });
    const r = await put('bob', 'incident', id, 'title', { value: 'x', expected_version: 1 });
    expectError(r, 403, 'SCOPE_DENIED');
    expect(r.body.field).toBe('title');
  });

  test('NO_ROLE for an identity without a role in the class', async () => {
    const r = await put('dave', 'incident', fresh(), 'title', { value: 'x', expected_version: 0 });
    expectError(r, 403, 'NO_ROLE');
  });

  test('NOT_WRITABLE for put on an append or a task field', async () => {
    expectError(await put('alice', 'incident', fresh(), 'notes', { value: { n: 1 }, expected_version: 0, evidence: 'e' }), 422, 'NOT_WRITABLE');
    expectError(await put('alice', 'typed', fresh(), 'log', { value: 1, expected_version: 0 }), 422, 'NOT_WRITABLE');
    expectError(await put('alice', 'typed', fresh(), 'job', { value: 1, expected_version: 0 }), 422, 'NOT_WRITABLE');
  });

  test('UNKNOWN_FIELD for a field not in the class', async () => {
    const r = await put('alice', 'incident', fresh(), 'nonexistent', { value: 'x', expected_version: 0 });
    expectError(r, 422, 'UNKNOWN_FIELD');
  });

  test('NOT_FOUND for an unknown class', async () => {
    expectError(await put('alice', 'nosuchclass', 'x1', 'title', { value: 'x', expected_version: 0 }), 404, 'NOT_FOUND');
    // The class check comes before the role check.
    expectError(await put('dave', 'nosuchclass', 'x1', 'title', { value: 'x', expected_version: 0 }), 404, 'NOT_FOUND');
  });

  test('rejection order: authorization before the body, record id before the field', async () => {
    // NO_ROLE and SCOPE_DENIED beat a body that is not JSON.
    expectError(await put('dave', 'incident', fresh(), 'title', '{oops'), 403, 'NO_ROLE');
    expectError(await put('bob', 'incident', fresh(), 'title', '{oops'), 403, 'SCOPE_DENIED');
    // MALFORMED record id (5) before UNKNOWN_FIELD (6).
    expectError(await put('alice', 'incident', 'BAD', 'nonexistent', { value: 1, expected_version: 0 }), 400, 'MALFORMED');
    // UNKNOWN_FIELD (6) before SCOPE_DENIED (7).
    expectError(await put('bob', 'incident', fresh(), 'nonexistent', { value: 1, expected_version: 0 }), 422, 'UNKNOWN_FIELD');
    // WEAK_IDENTITY (8) before NOT_WRITABLE (9): triage is a task field with an sa-bound floor.
    expectError(await put('alice', 'incident', fresh(), 'triage', { value: 1, expected_version: 0 }), 403, 'WEAK_IDENTITY');
    // Type check before EVIDENCE_REQUIRED.
    expectError(await put('alice', 'audited', fresh(), 'decision', { value: 5, expected_version: 0 }), 400, 'MALFORMED');
  });

  test('rejection order: EVIDENCE_REQUIRED before STALE, STALE before STALE_PREMISE', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'proof', { value: 1, expected_version: 0, evidence: 'e' });
    await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0 });
    await put('alice', 'incident', id, 'title', { value: 't2', expected_version: 1 });
    expectError(await put('alice', 'incident', id, 'proof', { value: 2, expected_version: 7 }), 422, 'EVIDENCE_REQUIRED');
    expectError(
      await put('alice', 'incident', id, 'proof', { value: 2, expected_version: 7, evidence: 'e', based_on: [{ field: 'title', version: 1 }] }),
      409,
      'STALE',
    );
  });

  test('a rejected write changes nothing', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'title', { value: 'orig', expected_version: 0, evidence: 'first' });
    const before = await get('alice', 'incident', id);
    expect(before.body.fields.title).toMatchObject({ value: 'orig', version: 1 });

    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 0 }), 409, 'STALE');
    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 2 }), 409, 'STALE');
    expectError(await put('alice', 'incident', id, 'title', { value: 5, expected_version: 1 }), 400, 'MALFORMED');
    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 1, bogus: true }), 400, 'MALFORMED');
    expectError(await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 1, invocation: { p: 'x'.repeat(2048) } }), 400, 'MALFORMED');
    expectError(await put('bob', 'incident', id, 'title', { value: 'x', expected_version: 1 }), 403, 'SCOPE_DENIED');
    expectError(await put('dave', 'incident', id, 'title', { value: 'x', expected_version: 1 }), 403, 'NO_ROLE');
    expectError(await put('alice', 'incident', id, 'proof', { value: 'x', expected_version: 0 }), 422, 'EVIDENCE_REQUIRED');
    expectError(await put('alice', 'incident', id, 'strong', { value: 'x', expected_version: 0 }), 403, 'WEAK_IDENTITY');
    expectError(
      await put('alice', 'incident', id, 'title', { value: 'x', expected_version: 1, based_on: [{ field: 'status', version: 3 }] }),
      409,
      'STALE_PREMISE',
    );

    const after = await get('alice', 'incident', id);
    expect(after.body).toEqual(before.body);
  });
});

// ---------------------------------------------------------------------------------------
describe('based_on premises', () => {
  test('a moved premise is STALE_PREMISE listing only the moved premises', async () => {
    const id = fresh();
    const rec = `incident/${id}`;
    await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, evidence: 'title ev' });
    await put('alice', 'incident', id, 'status', { value: 'open', expected_version: 0 });
    await put('alice', 'incident', id, 'severity', { value: 1, expected_version: 0 });
    // carol moves status after alice read it at version 1.
    await put('carol', 'incident', id, 'status', { value: 'investigating', expected_version: 1, evidence: 'pager fired' });

    const r = await put('alice', 'incident', id, 'title', {
      value: 't2',
      expected_version: 1,
      based_on: [
        { field: 'status', version: 1 },
        { field: 'severity', version: 1 },
      ],
    });
    expectError(r, 409, 'STALE_PREMISE');
    for (const k of ['error', 'record', 'field', 'current_version', 'current_author', 'moved']) {
      expect(r.body, k).toHaveProperty(k);
    }
    expect(r.body).toMatchObject({ record: rec, field: 'title', current_version: 1, current_author: 'apikey:alice' });
    expect(r.body.moved).toEqual([
      { field: 'status', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: 'pager fired' },
    ]);
    for (const m of r.body.moved) {
      expect(Object.keys(m).sort()).toEqual(['current_author', 'current_evidence', 'current_version', 'field', 'your_version']);
    }
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.title).toMatchObject({ value: 't', version: 1 });
    expect(g.body.record_version).toBe(4);
  });

  test('several moved premises are all listed; current_evidence is null when none was given', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'status', { value: 'open', expected_version: 0 });
    await put('alice', 'incident', id, 'severity', { value: 1, expected_version: 0 });
    await put('carol', 'incident', id, 'status', { value: 'investigating', expected_version: 1 });
    await put('carol', 'incident', id, 'severity', { value: 2, expected_version: 1 });
    const r = await put('alice', 'incident', id, 'blob', {
      value: 'decision',
      expected_version: 0,
      based_on: [
        { field: 'severity', version: 1 },
        { field: 'status', version: 1 },
      ],
    });
    expectError(r, 409, 'STALE_PREMISE');
    const moved = [...r.body.moved].sort((a: any, b: any) => a.field.localeCompare(b.field));
    expect(moved).toEqual([
      { field: 'severity', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: null },
      { field: 'status', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: null },
    ]);
  });

  test('the written field without a value yet: top-level current_version 0 and current_author null', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'status', { value: 'open', expected_version: 0 });
    await put('carol', 'incident', id, 'status', { value: 'investigating', expected_version: 1 });
    const r = await put('alice', 'incident', id, 'severity', {
      value: 3,
      expected_version: 0,
      based_on: [{ field: 'status', version: 1 }],
    });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body).toMatchObject({ record: `incident/${id}`, field: 'severity', current_version: 0, current_author: null });
    expect(r.body.moved).toEqual([
      { field: 'status', your_version: 1, current_version: 2, current_author: 'apikey:carol', current_evidence: null },
    ]);
  });

  test('a premise on a field that was never written but now has a value moved from version 0', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0 });
    await put('carol', 'incident', id, 'severity', { value: 5, expected_version: 0 });
    const r = await put('alice', 'incident', id, 'title', { value: 't2', expected_version: 1, based_on: [{ field: 'severity', version: 0 }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved).toEqual([
      { field: 'severity', your_version: 0, current_version: 1, current_author: 'apikey:carol', current_evidence: null },
    ]);
  });

  test('unchanged premises: the write applies and get shows based_on', async () => {
    const id = fresh();
    await put('alice', 'incident', id, 'status', { value: 'open', expected_version: 0 });
    await put('alice', 'incident', id, 'status', { value: 'investigating', expected_version: 1 });
    const premises = [
      { field: 'status', version: 2 },
      { field: 'severity', version: 0 }, // never written: version 0 still holds
    ];
    const r = await put('alice', 'incident', id, 'title', { value: 'decided', expected_version: 0, based_on: premises });
    expectApplied(r, 200, { record: `incident/${id}`, field: 'title', version: 1, record_version: 3 });
    const g = await get('alice', 'incident', id);
    expect(g.body.fields.title.based_on).toEqual(premises);
    // A soft write with premises too.
    const r2 = await put('alice', 'incident', id, 'scratch', { value: 1, based_on: [{ field: 'title', version: 1 }] });
    expect(r2.status).toBe(200);
    const g2 = await get('alice', 'incident', id);
    expect(g2.body.fields.scratch.based_on).toEqual([{ field: 'title', version: 1 }]);
  });

  test('a premise naming an unknown field is UNKNOWN_FIELD', async () => {
    const id = fresh();
    const r = await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, based_on: [{ field: 'ghost', version: 0 }] });
    expectError(r, 422, 'UNKNOWN_FIELD');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a premise naming a field the role may not read is SCOPE_DENIED', async () => {
    const id = fresh();
    const r = await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, based_on: [{ field: 'secret', version: 0 }] });
    expectError(r, 403, 'SCOPE_DENIED');
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a premise kind other than fence is MALFORMED; malformed premises are MALFORMED', async () => {
    const id = fresh();
    for (const based_on of [
      [{ field: 'status', version: 0, kind: 'lease' }],
      [{ field: 'status', version: 0, kind: '' }],
      [{ field: 'status' }],
      [{ version: 0 }],
      [{ field: 'status', version: -1 }],
      [{ field: 'status', version: 1.5 }],
      [{ field: 'status', version: '1' }],
      [{ field: 'status', version: 0, extra: 1 }],
      ['status'],
      { field: 'status', version: 0 },
    ]) {
      const r = await put('alice', 'incident', id, 'title', { value: 't', expected_version: 0, based_on });
      expect(r.body.error, JSON.stringify(based_on)).toBe('MALFORMED');
      expectError(r, 400, 'MALFORMED');
    }
    expectError(await get('alice', 'incident', id), 404, 'NOT_FOUND');
  });

  test('a fence premise on a task field the writer holds no lease on is STALE_PREMISE', async () => {
    // decisions §3: a fence holds only while the field version is unchanged AND the writer
    // holds its lease unexpired. Nobody has claimed `job`, so the fence cannot hold.
    const id = fresh();
    await put('alice', 'typed', id, 'str', { value: 'a', expected_version: 0 });
    const r = await put('alice', 'typed', id, 'str', {
      value: 'b',
      expected_version: 1,
      based_on: [{ field: 'job', version: 0, kind: 'fence' }],
    });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body.moved.map((m: any) => m.field)).toEqual(['job']);
  });
});
