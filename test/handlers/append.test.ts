/**
 * append: POST /v1/records/{class}/{id}/fields/{field}/entries, against a real gateway and
 * PostgreSQL. Expectations come from interface.md ("Field kinds", "Field value", "append",
 * "History row", "Errors", "Limits") and the decisions, not from the code.
 */
import pg from 'pg';
import { describe, expect, test } from 'vitest';
import { tasks } from '../fixtures/task-classes.js';
import { type TestGateway, TS, useGatewayWithSql } from '../setup/gateway.js';


let t: TestGateway;
let sql: pg.Client;
useGatewayWithSql((g, c) => ((t = g), (sql = c)), [tasks]);

type Res = { status: number; body: any };

let n = 0;
const fresh = (prefix = 'a') => `${prefix}-${++n}`;

const append = (who: string, id: string, field: string, body?: unknown, headers?: Record<string, string>): Promise<Res> =>
  t.call(who, 'POST', `/v1/records/tasks/${id}/fields/${field}/entries`, body, headers);

const put = (who: string, id: string, field: string, body: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/tasks/${id}/fields/${field}`, body);

const claim = (who: string, id: string, field: string, body?: unknown): Promise<Res> =>
  t.call(who, 'PUT', `/v1/records/tasks/${id}/fields/${field}/claim`, body);

const get = (who: string, id: string, query = ''): Promise<Res> => t.call(who, 'GET', `/v1/records/tasks/${id}${query}`);

async function history(id: string, field: string): Promise<any[]> {
  const h = await t.call('alice', 'GET', `/v1/records/tasks/${id}/history?field=${field}`);
  expect(h.status, JSON.stringify(h.body)).toBe(200);
  return h.body.history; // newest first
}

function expectError(res: Res, status: number, code: string): void {
  expect(res.body, JSON.stringify(res.body)?.slice(0, 500)).toMatchObject({ error: code });
  expect(res.status).toBe(status);
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

async function mustAppend(who: string, id: string, field: string, body: unknown): Promise<Res> {
  const r = await append(who, id, field, body);
  expect([200, 201], JSON.stringify(r.body)).toContain(r.status);
  return r;
}

/** Create the record with a put on `title`, so rejections below happen on an existing record. */
async function seedRecord(id: string): Promise<void> {
  const r = await put('alice', id, 'title', { value: 'seed', expected_version: 0 });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}

// ---------------------------------------------------------------------------------------
describe('request body', () => {
  test('`entry` is required: a body without it is MALFORMED and nothing is written', async () => {
    const id = fresh();
    expectError(await append('alice', id, 'log', { evidence: 'e' }), 400, 'MALFORMED');
    expect((await get('alice', id)).status).toBe(404);
    await seedRecord(id);
    expectError(await append('alice', id, 'log', { evidence: 'e' }), 400, 'MALFORMED');
    // No body at all: only claim may omit it.
    expectError(await append('alice', id, 'log'), 400, 'MALFORMED');
    const g = await get('alice', id);
    expect(g.body.fields).not.toHaveProperty('log');
    expect(g.body.record_version).toBe(1);
  });

  test('`entry` may be any JSON value on an untyped field, including null, false and 0', async () => {
    const id = fresh();
    const values = [null, false, 0, '', [], {}, 'text', { nested: [1, { a: null }] }];
    for (const v of values) await mustAppend('alice', id, 'log', { entry: v, evidence: 'e' });
    const g = await get('alice', id);
    expect(g.body.fields.log.version).toBe(values.length);
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual(values);
  });

  test('missing `evidence` is 422 EVIDENCE_REQUIRED with a history row, outcome evidence_required', async () => {
    const id = fresh();
    await seedRecord(id);
    const r = await append('alice', id, 'log', { entry: { x: 1 } });
    expectError(r, 422, 'EVIDENCE_REQUIRED');
    expect(r.body).toMatchObject({ record: `tasks/${id}`, field: 'log' });
    const h = await history(id, 'log');
    expect(h).toHaveLength(1);
    expect(h[0]).toMatchObject({ field: 'log', op: 'append', outcome: 'evidence_required', author: 'apikey:alice', value: { x: 1 } });
    expect(h[0]).not.toHaveProperty('version');
    const g = await get('alice', id);
    expect(g.body.fields).not.toHaveProperty('log');
    expect(g.body.record_version).toBe(1);
  });

  test('empty `evidence` is EVIDENCE_REQUIRED too', async () => {
    const id = fresh();
    await seedRecord(id);
    expectError(await append('alice', id, 'log', { entry: 'x', evidence: '' }), 422, 'EVIDENCE_REQUIRED');
    const h = await history(id, 'log');
    expect(h).toHaveLength(1);
    expect(h[0]).toMatchObject({ op: 'append', outcome: 'evidence_required' });
    expect((await get('alice', id)).body.fields).not.toHaveProperty('log');
  });

  test('evidence is required on every append field, not only where the class says requireEvidence', async () => {
    const id = fresh();
    for (const field of ['log', 'counts', 'level', 'notes']) {
      expectError(await append('alice', id, field, { entry: field === 'notes' ? {} : field === 'counts' ? 1 : 'info' }), 422, 'EVIDENCE_REQUIRED');
    }
    expect((await get('alice', id)).status).toBe(404);
  });

  test('a non-string `evidence` is MALFORMED', async () => {
    const id = fresh();
    await seedRecord(id);
    for (const ev of [123, true, { why: 'x' }, ['a']]) {
      expectError(await append('alice', id, 'log', { entry: 'x', evidence: ev }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).body.fields).not.toHaveProperty('log');
  });

  test('`based_on` is stored on the entry and on the history row', async () => {
    const id = fresh();
    await seedRecord(id); // title version 1
    const premises = [{ field: 'title', version: 1 }];
    await mustAppend('alice', id, 'log', { entry: 'first', evidence: 'e', based_on: premises });
    const g = await get('alice', id);
    expect(g.body.fields.log.entries[0].based_on).toEqual(premises);
    const h = await history(id, 'log');
    expect(h[0]).toMatchObject({ op: 'append', outcome: 'applied', based_on: premises });
  });

  test('`invocation` (an object up to 1 KiB) is stored and returned unchanged', async () => {
    const id = fresh();
    const invocation = { tool: 'pager', args: { n: 1, list: [true, null, 'x'] }, z: 'last', a: 'first' };
    await mustAppend('alice', id, 'log', { entry: 1, evidence: 'e', invocation });
    // Exactly 1 KiB of JSON is allowed.
    const big = { p: 'x'.repeat(1024 - JSON.stringify({ p: '' }).length) };
    expect(Buffer.byteLength(JSON.stringify(big))).toBe(1024);
    await mustAppend('alice', id, 'log', { entry: 2, evidence: 'e', invocation: big });
    const g = await get('alice', id);
    expect(g.body.fields.log.entries[0].invocation).toEqual(invocation);
    expect(Object.keys(g.body.fields.log.entries[0].invocation)).toEqual(Object.keys(invocation));
    expect(g.body.fields.log.entries[1].invocation).toEqual(big);
    const h = await history(id, 'log');
    expect(h[1].invocation).toEqual(invocation);
  });

  test('`invocation` over 1 KiB or not an object is MALFORMED', async () => {
    const id = fresh();
    await seedRecord(id);
    const over = { p: 'x'.repeat(1025 - JSON.stringify({ p: '' }).length) };
    expect(Buffer.byteLength(JSON.stringify(over))).toBe(1025);
    for (const invocation of [over, [1, 2], 'call', 7, true]) {
      expectError(await append('alice', id, 'log', { entry: 'x', evidence: 'e', invocation }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).body.fields).not.toHaveProperty('log');
  });
});

// ---------------------------------------------------------------------------------------
describe('applied appends', () => {
  test('response is {record, field, seq, record_version}: 201 when it creates the record, then 200; seq rises 1, 2, 3', async () => {
    const id = fresh();
    const rec = `tasks/${id}`;
    const r1 = await append('alice', id, 'log', { entry: 'one', evidence: 'e1' });
    expect(r1.body).toEqual({ record: rec, field: 'log', seq: 1, record_version: 1 });
    expect(r1.status).toBe(201);
    const r2 = await append('bob', id, 'log', { entry: 'two', evidence: 'e2' });
    expect(r2.body).toEqual({ record: rec, field: 'log', seq: 2, record_version: 2 });
    expect(r2.status).toBe(200);
    const r3 = await append('alice', id, 'log', { entry: 'three', evidence: 'e3' });
    expect(r3.body).toEqual({ record: rec, field: 'log', seq: 3, record_version: 3 });
    expect(r3.status).toBe(200);
  });

  test('the first append to a field of an existing record answers 200 with seq 1', async () => {
    const id = fresh();
    await seedRecord(id);
    const r = await append('alice', id, 'log', { entry: 'x', evidence: 'e' });
    expect(r.body).toEqual({ record: `tasks/${id}`, field: 'log', seq: 1, record_version: 2 });
    expect(r.status).toBe(200);
  });

  test('field version equals the entry count; get shows version and entries[] with every key', async () => {
    const id = fresh();
    await mustAppend('alice', id, 'log', { entry: { step: 1 }, evidence: 'saw it' });
    await mustAppend('bob', id, 'log', {
      entry: { step: 2 },
      evidence: 'bob saw it',
      based_on: [{ field: 'log', version: 1 }],
      invocation: { tool: 't' },
    });
    const g = await get('alice', id);
    expect(g.status).toBe(200);
    const log = g.body.fields.log;
    expect(log.version).toBe(2);
    expect(log.entries).toHaveLength(2);
    const [e1, e2] = log.entries;
    expect(Object.keys(e1).sort()).toEqual(['author', 'evidence', 'identity_strength', 'seq', 'updated_at', 'value']);
    expect(e1).toMatchObject({ seq: 1, value: { step: 1 }, author: 'apikey:alice', identity_strength: 'shared-secret', evidence: 'saw it' });
    expect(e1.updated_at).toMatch(TS);
    expect(Object.keys(e2).sort()).toEqual(
      ['author', 'based_on', 'evidence', 'identity_strength', 'invocation', 'seq', 'updated_at', 'value'],
    );
    expect(e2).toMatchObject({
      seq: 2,
      value: { step: 2 },
      author: 'apikey:bob',
      identity_strength: 'shared-secret',
      evidence: 'bob saw it',
      based_on: [{ field: 'log', version: 1 }],
      invocation: { tool: 't' },
    });
    expect(e2.updated_at).toMatch(TS);
    expect(Date.parse(e2.updated_at)).toBeGreaterThanOrEqual(Date.parse(e1.updated_at));
  });

  test('entries_limit keeps the newest entries, oldest first; version stays the full count', async () => {
    const id = fresh();
    for (let i = 1; i <= 7; i++) await mustAppend('alice', id, 'log', { entry: i, evidence: 'e' });
    const all = await get('alice', id);
    expect(all.body.fields.log.entries.map((e: any) => e.seq)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    const g = await get('alice', id, '?entries_limit=3');
    expect(g.status).toBe(200);
    expect(g.body.fields.log.version).toBe(7);
    expect(g.body.fields.log.entries.map((e: any) => e.seq)).toEqual([5, 6, 7]);
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual([5, 6, 7]);
    const big = await get('alice', id, '?entries_limit=100');
    expect(big.body.fields.log.entries).toHaveLength(7);
    const none = await get('alice', id, '?entries_limit=0');
    expect(none.body.fields.log.version).toBe(7);
    expect(none.body.fields.log.entries).toEqual([]);
  });

  test('entries_limit caps each append field separately', async () => {
    const id = fresh();
    for (let i = 1; i <= 4; i++) await mustAppend('alice', id, 'log', { entry: `l${i}`, evidence: 'e' });
    for (let i = 1; i <= 3; i++) await mustAppend('alice', id, 'counts', { entry: i, evidence: 'e' });
    const g = await get('alice', id, '?entries_limit=2');
    expect(g.body.fields.log).toMatchObject({ version: 4 });
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual(['l3', 'l4']);
    expect(g.body.fields.counts).toMatchObject({ version: 3 });
    expect(g.body.fields.counts.entries.map((e: any) => e.value)).toEqual([2, 3]);
  });

  test('earlier entries are unchanged after more appends (value and updated_at)', async () => {
    const id = fresh();
    await mustAppend('alice', id, 'log', { entry: { first: true, list: [1, 2, 3] }, evidence: 'origin', invocation: { k: 'v' } });
    const before = (await get('alice', id)).body.fields.log.entries[0];
    await new Promise((r) => setTimeout(r, 20)); // later appends get a later timestamp
    for (let i = 0; i < 20; i++) await mustAppend(i % 2 ? 'bob' : 'carol', id, 'log', { entry: { i }, evidence: `e${i}` });
    const g = await get('alice', id);
    expect(g.body.fields.log.version).toBe(21);
    expect(g.body.fields.log.entries).toHaveLength(21);
    const after = g.body.fields.log.entries[0];
    expect(after).toEqual(before);
    expect(after.updated_at).toBe(before.updated_at);
    expect(after.value).toEqual({ first: true, list: [1, 2, 3] });
    expect(after.author).toBe('apikey:alice');
    expect(Date.parse(g.body.fields.log.entries[20].updated_at)).toBeGreaterThan(Date.parse(before.updated_at));
    expect(g.body.fields.log.entries.map((e: any) => e.seq)).toEqual(Array.from({ length: 21 }, (_, i) => i + 1));
  });

  test('record_version rises with each append, alongside writes to other fields', async () => {
    const id = fresh();
    const rec = `tasks/${id}`;
    expect((await append('alice', id, 'log', { entry: 'a', evidence: 'e' })).body).toEqual({ record: rec, field: 'log', seq: 1, record_version: 1 });
    expect((await put('alice', id, 'title', { value: 't', expected_version: 0 })).body.record_version).toBe(2);
    expect((await append('alice', id, 'log', { entry: 'b', evidence: 'e' })).body).toEqual({ record: rec, field: 'log', seq: 2, record_version: 3 });
    expect((await append('alice', id, 'counts', { entry: 5, evidence: 'e' })).body).toEqual({ record: rec, field: 'counts', seq: 1, record_version: 4 });
    expect((await append('alice', id, 'log', { entry: 'c', evidence: 'e' })).body).toEqual({ record: rec, field: 'log', seq: 3, record_version: 5 });
    // A rejected append does not raise it.
    expectError(await append('alice', id, 'log', { entry: 'd' }), 422, 'EVIDENCE_REQUIRED');
    const g = await get('alice', id);
    expect(g.body.record_version).toBe(5);
    expect(g.body.fields.log.version).toBe(3);
  });

  test('history rows: op append, version = seq, value = entry, outcome applied', async () => {
    const id = fresh();
    const entries = [{ n: 1 }, 'two', [3]];
    for (const [i, entry] of entries.entries()) {
      await mustAppend('alice', id, 'log', { entry, evidence: `why ${i}`, invocation: { i } });
    }
    const h = (await history(id, 'log')).reverse(); // oldest first
    expect(h).toHaveLength(3);
    h.forEach((row, i) => {
      expect(row).toMatchObject({
        field: 'log',
        op: 'append',
        version: i + 1,
        record_version: i + 1,
        value: entries[i],
        author: 'apikey:alice',
        identity_strength: 'shared-secret',
        evidence: `why ${i}`,
        invocation: { i },
        outcome: 'applied',
      });
    });
  });
});

// ---------------------------------------------------------------------------------------
describe('entry type and enum', () => {
  test('an entry not matching the field type is MALFORMED', async () => {
    const id = fresh();
    await seedRecord(id);
    for (const entry of ['1', 1.5, true, null, [1], { n: 1 }]) {
      expectError(await append('alice', id, 'counts', { entry, evidence: 'e' }), 400, 'MALFORMED');
    }
    for (const entry of ['x', 1, [], null]) {
      expectError(await append('alice', id, 'notes', { entry, evidence: 'e' }), 400, 'MALFORMED');
    }
    const g = await get('alice', id);
    expect(g.body.fields).not.toHaveProperty('counts');
    expect(g.body.fields).not.toHaveProperty('notes');
    await mustAppend('alice', id, 'counts', { entry: -3, evidence: 'e' });
    await mustAppend('alice', id, 'notes', { entry: { ok: 1 }, evidence: 'e' });
  });

  test('an entry outside the field enum is MALFORMED', async () => {
    const id = fresh();
    await seedRecord(id);
    for (const entry of ['debug', 'INFO', 1, null, ['info']]) {
      expectError(await append('alice', id, 'level', { entry, evidence: 'e' }), 400, 'MALFORMED');
    }
    expect((await get('alice', id)).body.fields).not.toHaveProperty('level');
    for (const entry of ['info', 'warn', 'error']) await mustAppend('alice', id, 'level', { entry, evidence: 'e' });
    const g = await get('alice', id);
    expect(g.body.fields.level.version).toBe(3);
    expect(g.body.fields.level.entries.map((e: any) => e.value)).toEqual(['info', 'warn', 'error']);
  });
});

// ---------------------------------------------------------------------------------------
describe('wrong operation for the field kind', () => {
  test('append on a versioned, soft or task field is 422 NOT_APPEND_FIELD', async () => {
    const id = fresh();
    await seedRecord(id);
    for (const field of ['title', 'memo', 'job', 'chore']) {
      const r = await append('alice', id, field, { entry: 'x', evidence: 'e' });
      expectError(r, 422, 'NOT_APPEND_FIELD');
    }
    const g = await get('alice', id);
    expect(g.body.record_version).toBe(1);
    expect(g.body.fields.title).toMatchObject({ value: 'seed', version: 1 });
    expect(Object.keys(g.body.fields)).toEqual(['title']);
  });

  test('put on an append field is 422 NOT_WRITABLE', async () => {
    const id = fresh();
    await mustAppend('alice', id, 'log', { entry: 'x', evidence: 'e' });
    expectError(await put('alice', id, 'log', { value: 'y', expected_version: 1, evidence: 'e' }), 422, 'NOT_WRITABLE');
    expectError(await put('alice', id, 'counts', { value: 1, expected_version: 0, evidence: 'e' }), 422, 'NOT_WRITABLE');
    const g = await get('alice', id);
    expect(g.body.fields.log.version).toBe(1);
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual(['x']);
  });
});

// ---------------------------------------------------------------------------------------
describe('STALE_PREMISE', () => {
  test('an append whose premise moved is refused with the same body as put, and nothing is added', async () => {
    const id = fresh();
    await seedRecord(id); // title v1 by alice
    await mustAppend('carol', id, 'log', { entry: 'c1', evidence: 'carol note' });
    await mustAppend('carol', id, 'log', { entry: 'c2', evidence: 'carol note 2' });
    const moved = await put('bob', id, 'title', { value: 'moved', expected_version: 1, evidence: 'bob changed it' });
    expect(moved.status).toBe(200);
    const r = await append('alice', id, 'log', { entry: 'a', evidence: 'e', based_on: [{ field: 'title', version: 1 }] });
    expectError(r, 409, 'STALE_PREMISE');
    expect(Object.keys(r.body).sort()).toEqual(['current_author', 'current_version', 'error', 'field', 'message', 'moved', 'record'].sort());
    expect(r.body).toMatchObject({
      record: `tasks/${id}`,
      field: 'log',
      current_version: 2,
      current_author: 'apikey:carol',
    });
    expect(r.body.moved).toEqual([
      { field: 'title', your_version: 1, current_version: 2, current_author: 'apikey:bob', current_evidence: 'bob changed it' },
    ]);
    const g = await get('alice', id);
    expect(g.body.fields.log.version).toBe(2);
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual(['c1', 'c2']);
    expect(g.body.record_version).toBe(4);
    const h = await history(id, 'log');
    expect(h[0]).toMatchObject({ op: 'append', outcome: 'stale_premise', value: 'a', based_on: [{ field: 'title', version: 1 }] });
    expect(h[0]).not.toHaveProperty('version');
  });

  test('only moved premises are listed; a not-yet-written append field has current_version 0 and current_author null', async () => {
    const id = fresh();
    await seedRecord(id); // title v1
    await mustAppend('alice', id, 'counts', { entry: 1, evidence: 'e' }); // counts v1
    await mustAppend('bob', id, 'counts', { entry: 2, evidence: 'bob counted' }); // counts v2
    const r = await append('alice', id, 'log', {
      entry: 'x',
      evidence: 'e',
      based_on: [
        { field: 'title', version: 1 },
        { field: 'counts', version: 1 },
      ],
    });
    expectError(r, 409, 'STALE_PREMISE');
    expect(r.body).toMatchObject({ record: `tasks/${id}`, field: 'log', current_version: 0, current_author: null });
    expect(r.body.moved).toEqual([
      { field: 'counts', your_version: 1, current_version: 2, current_author: 'apikey:bob', current_evidence: 'bob counted' },
    ]);
    expect((await get('alice', id)).body.fields).not.toHaveProperty('log');
    // With the current versions it applies.
    const ok = await append('alice', id, 'log', {
      entry: 'x',
      evidence: 'e',
      based_on: [
        { field: 'title', version: 1 },
        { field: 'counts', version: 2 },
      ],
    });
    expect(ok.body).toEqual({ record: `tasks/${id}`, field: 'log', seq: 1, record_version: 4 });
  });
});

// ---------------------------------------------------------------------------------------
describe('many entries', () => {
  test('appending to a field with 100,000 entries works; entries_limit=5 returns 5', async () => {
    const id = fresh('big');
    const first = await append('alice', id, 'log', { entry: 1, evidence: 'e' });
    expect(first.status).toBe(201);
    const rec = await sql.query<{ id: string }>(`select id from records where class = 'tasks' and rid = $1`, [id]);
    const recordId = rec.rows[0].id;
    await sql.query(
      `insert into entries (rid, record_id, field, seq, value, author, identity_strength, evidence)
       select $2, $1::bigint, 'log', g, to_json(g), 'apikey:alice', 'shared-secret', 'seeded'
       from generate_series(2, 100000) g`,
      [recordId, id],
    );
    await sql.query(`update fields set version = 100000 where rid = $2 and record_id = $1 and name = 'log'`, [recordId, id]);
    await sql.query(`update records set record_version = 100000 where rid = $2 and id = $1`, [recordId, id]);

    const r = await append('bob', id, 'log', { entry: 'last', evidence: 'e' });
    expect(r.body).toEqual({ record: `tasks/${id}`, field: 'log', seq: 100001, record_version: 100001 });
    expect(r.status).toBe(200);

    const g = await get('alice', id, '?entries_limit=5');
    expect(g.status).toBe(200);
    expect(g.body.fields.log.version).toBe(100001);
    expect(g.body.fields.log.entries).toHaveLength(5);
    expect(g.body.fields.log.entries.map((e: any) => e.seq)).toEqual([99997, 99998, 99999, 100000, 100001]);
    expect(g.body.fields.log.entries.map((e: any) => e.value)).toEqual([99997, 99998, 99999, 100000, 'last']);
    expect(g.body.fields.log.entries[4]).toMatchObject({ author: 'apikey:bob', evidence: 'e' });

    const count = await sql.query<{ n: string }>(`select count(*) as n from entries where rid = $2 and record_id = $1 and field = 'log'`, [recordId, id]);
    expect(Number(count.rows[0].n)).toBe(100001);
  });
});
