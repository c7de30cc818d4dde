/**
 * Errors (interface.md "Errors", "Authentication", "Limits"; decisions §2, §4;
 * docs/decisions.md "Errors"): every error body has `error` and `message`, the HTTP status
 * of each code, UNAUTHENTICATED and the rejected-credential budget, unknown paths, bad
 * input never answered 500, and a real internal fault answered 500 INTERNAL with a
 * request id that is also in the log.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { stringify } from 'yaml';
import { parseConfig } from '../../runtime/config.js';
import { startGateway, type Gateway } from '../../runtime/serve.js';
import { audited, fortress, incident } from '../fixtures/classes.js';
import { relic } from '../fixtures/order-classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { SPEC_STATUS } from '../fixtures/spec-errors.js';
import { KEYS, manifestsYaml, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';

let t: TestGateway;
const LIVE = [incident, fortress, audited];

const P = (cls: string, id: string, field: string) => `/v1/records/${cls}/${id}/fields/${field}`;

/** The spec's status for every code (interface.md "Errors"). */
const STATUS = SPEC_STATUS;

function expectError(res: { status: number; body: any }, code: string): void {
  expect(res.body, `body of a ${res.status} is not a JSON object: ${String(res.body).slice(0, 200)}`).toBeTypeOf('object');
  expect({ status: res.status, error: res.body.error }).toEqual({ status: STATUS[code], error: code });
  expect(typeof res.body.message).toBe('string');
  expect(res.body.message.length).toBeGreaterThan(0);
}

beforeAll(async () => {
  t = await startTestGateway([...LIVE, relic]);
  const seed = async (who: string, path: string, body: unknown) => {
    const r = await t.call(who, 'PUT', path, body);
    if (r.status >= 300) throw new Error(`seed ${path}: ${r.status} ${JSON.stringify(r.body)}`);
  };
  await seed('alice', P('incident', 'e1', 'title'), { value: 'hello', expected_version: 0, evidence: 'pager' });
  await seed('alice', P('incident', 'e1', 'status'), { value: 'open', expected_version: 0 });
  await seed('alice', P('incident', 'e1', 'status'), { value: 'investigating', expected_version: 1 });
  await seed('alice', P('relic', 'r1', 'label'), { value: 'vase', expected_version: 0 });
  // relic is deleted for the rest of the file
  t.writeClasses(LIVE);
  await t.gw.services.sweepOnce();
});
afterAll(() => t?.close());

describe('every error body has error and message, with the status of its code', () => {
  const cases: { name: string; who: string | null; method: string; path: string; body?: unknown; code: string }[] = [
    { name: 'bad JSON', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'title'), body: '{', code: 'MALFORMED' },
    { name: 'bad record id', who: 'alice', method: 'GET', path: '/v1/records/incident/NOT_OK', code: 'MALFORMED' },
    { name: 'no credential', who: null, method: 'GET', path: '/v1/classes', code: 'UNAUTHENTICATED' },
    { name: 'no role', who: 'dave', method: 'GET', path: '/v1/records/incident/e1', code: 'NO_ROLE' },
    { name: 'write outside the role', who: 'bob', method: 'PUT', path: P('incident', 'e1', 'title'), body: { value: 'b', expected_version: 1 }, code: 'SCOPE_DENIED' },
    { name: 'read outside the role', who: 'bob', method: 'GET', path: '/v1/records/incident/e1?fields=severity', code: 'SCOPE_DENIED' },
    { name: 'field floor', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'strong'), body: { value: 1, expected_version: 0 }, code: 'WEAK_IDENTITY' },
    { name: 'class floor', who: 'alice', method: 'PUT', path: P('fortress', 'f1', 'gate'), body: { value: 1, expected_version: 0 }, code: 'WEAK_IDENTITY' },
    { name: 'unknown class', who: 'alice', method: 'GET', path: '/v1/classes/nosuch', code: 'NOT_FOUND' },
    { name: 'unknown record', who: 'alice', method: 'GET', path: '/v1/records/incident/never', code: 'NOT_FOUND' },
    { name: 'stale version', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'title'), body: { value: 'x', expected_version: 0 }, code: 'STALE' },
    { name: 'moved premise', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'title'), body: { value: 'x', expected_version: 1, based_on: [{ field: 'status', version: 1 }] }, code: 'STALE_PREMISE' },
    { name: 'deleted class', who: 'alice', method: 'PUT', path: P('relic', 'r1', 'label'), body: { value: 'urn', expected_version: 1 }, code: 'CLASS_GONE' },
    { name: 'missing evidence', who: 'alice', method: 'PUT', path: P('audited', 'a1', 'decision'), body: { value: 'go', expected_version: 0 }, code: 'EVIDENCE_REQUIRED' },
    { name: 'unknown field', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'nosuch'), body: { value: 1, expected_version: 0 }, code: 'UNKNOWN_FIELD' },
    { name: 'put on an append field', who: 'alice', method: 'PUT', path: P('incident', 'e1', 'notes'), body: { value: {}, expected_version: 0 }, code: 'NOT_WRITABLE' },
    { name: 'unknown path', who: 'alice', method: 'GET', path: '/v1/nothing-here', code: 'NOT_FOUND' },
  ];

  test.each(cases.map((c) => [`${c.code}: ${c.name}`, c] as const))('%s', async (_n, c) => {
    expectError(await t.call(c.who, c.method, c.path, c.body), c.code);
  });

  test('STALE carries field (not record) and the current state; STALE_PREMISE carries record, field and moved[]', async () => {
    const stale = await t.call('alice', 'PUT', P('incident', 'e1', 'title'), { value: 'x', expected_version: 0 });
    expectError(stale, 'STALE');
    expect(stale.body).not.toHaveProperty('record');
    for (const k of ['field', 'your_version', 'current_version', 'current_value', 'current_author', 'current_evidence', 'current_updated_at', 'diff']) {
      expect(stale.body).toHaveProperty(k);
    }
    expect(stale.body).toMatchObject({ field: 'title', your_version: 0, current_version: 1, current_value: 'hello', current_author: 'apikey:alice', current_evidence: 'pager' });

    const prem = await t.call('alice', 'PUT', P('incident', 'e1', 'title'), { value: 'x', expected_version: 1, based_on: [{ field: 'status', version: 1 }] });
    expectError(prem, 'STALE_PREMISE');
    expect(prem.body).toMatchObject({ record: 'incident/e1', field: 'title', current_version: 1, current_author: 'apikey:alice' });
    expect(prem.body.moved).toEqual([{ field: 'status', your_version: 1, current_version: 2, current_author: 'apikey:alice', current_evidence: null }]);
  });

  test('WEAK_IDENTITY carries required and presented, and field only for a field floor', async () => {
    const field = await t.call('alice', 'PUT', P('incident', 'e1', 'strong'), { value: 1, expected_version: 0 });
    expect(field.body).toMatchObject({ error: 'WEAK_IDENTITY', field: 'strong', required: 'sa-bound', presented: 'shared-secret' });
    const cls = await t.call('alice', 'PUT', P('fortress', 'f1', 'gate'), { value: 1, expected_version: 0 });
    expect(cls.body).toMatchObject({ error: 'WEAK_IDENTITY', required: 'pod-bound', presented: 'shared-secret' });
    expect(cls.body).not.toHaveProperty('field');
  });
});

describe('UNAUTHENTICATED', () => {
  const headers: [string, Record<string, string>][] = [
    ['no Authorization header', {}],
    ['a Basic credential', { authorization: `Basic ${Buffer.from('alice:alice-test-key').toString('base64')}` }],
    ['a token without scheme', { authorization: KEYS.alice }],
    ['Bearer with no token', { authorization: 'Bearer ' }],
    ['an unknown key', { authorization: 'Bearer unknown-key-0123456789' }],
    ['a known key with a suffix', { authorization: `Bearer ${KEYS.alice}x` }],
  ];
  const targets: [string, string, unknown?][] = [
    ['GET', '/v1/classes'],
    ['GET', '/v1/classes/incident'],
    ['GET', '/v1/records/incident/e1'],
    ['GET', '/v1/records/incident/e1/history'],
    ['PUT', P('incident', 'e1', 'title'), { value: 'x', expected_version: 1 }],
  ];

  test.each(headers)('%s → 401 on every endpoint, never echoing the credential', async (_n, h) => {
    for (const [method, path, body] of targets) {
      const r = await t.call(null, method, path, body, h);
      expectError(r, 'UNAUTHENTICATED');
      const text = JSON.stringify(r.body);
      expect(text).not.toContain('alice-test-key');
      expect(text).not.toContain('unknown-key-0123456789');
    }
    // nothing was written
    const g = await t.call('alice', 'GET', '/v1/records/incident/e1?fields=title');
    expect(g.body.fields.title.version).toBe(1);
  });
});

describe('RATE_LIMITED', () => {
  test('rejected credentials from one address exhaust a burst of 200, then 429 — even for a valid key', async () => {
    const rl = await startTestGateway([incident]);
    try {
      const bad = () => rl.call('no-such-key', 'GET', '/v1/classes');
      // the burst: the first 200 rejected credentials are answered 401
      for (let i = 0; i < 200; i++) {
        const r = await bad();
        expect(r.status, `request ${i + 1} of the burst`).toBe(401);
      }
      // then the budget runs out (it refills at 50/s, far slower than this loop)
      let limited: { status: number; body: any } | undefined;
      for (let i = 0; i < 2000 && !limited; i++) {
        const r = await bad();
        if (r.status === 429) limited = r;
        else expect(r.status).toBe(401);
      }
      expect(limited, 'no 429 after 2200 rejected credentials').toBeDefined();
      expectError(limited!, 'RATE_LIMITED');

      // while exhausted, a valid key is answered 429 too (before any credential check)
      let validLimited: { status: number; body: any } | undefined;
      for (let round = 0; round < 200 && !validLimited; round++) {
        const [, , , , good] = await Promise.all([bad(), bad(), bad(), bad(), rl.call('alice', 'GET', '/v1/classes')]);
        if (good.status === 429) validLimited = good;
        else expect(good.status).toBe(200);
      }
      expect(validLimited, 'a valid key was never refused while the budget was exhausted').toBeDefined();
      expectError(validLimited!, 'RATE_LIMITED');
    } finally {
      await rl.close();
    }
  });
});

describe('unknown paths', () => {
  test.each([
    ['GET', '/nope'],
    ['GET', '/v1'],
    ['GET', '/v2/classes'],
    ['GET', '/v1/classes/incident/extra'],
    ['GET', '/v1/records/incident/e1/fields/title/extra/deeper'],
  ])('%s %s → 404 NOT_FOUND as JSON', async (method, path) => {
    const r = await t.call('alice', method, path);
    expectError(r, 'NOT_FOUND');
  });
});

describe('a known path with a method it does not take', () => {
  test.each([
    ['DELETE', '/v1/classes/incident', 'GET'],
    ['POST', '/v1/classes', 'GET'],
    ['DELETE', '/v1/records/incident/e1', 'GET'],
    ['POST', '/v1/records/incident/e1/fields/title', 'PUT'],
    ['GET', '/v1/records/incident/e1/fields/title/claim', 'PUT'],
    ['DELETE', '/v1/records/incident/e1/checkpoint', 'GET, PUT'],
    ['PUT', '/v1/records/incident/e1/history', 'GET'],
    ['PUT', '/mcp', 'DELETE, GET, POST'],
  ])('%s %s → 405 with Allow: %s, before any credential check', async (method, path, allow) => {
    for (const who of ['alice', null]) {
      const res = await fetch(t.url + path, { method, headers: who ? { authorization: 'Bearer alice-test-key' } : {} });
      expect(res.status).toBe(405);
      expect(res.headers.get('allow')).toBe(allow);
      const body = await res.json();
      expect(body).toMatchObject({ error: 'METHOD_NOT_ALLOWED' });
      expect(body.message).toContain(allow);
    }
  });
});

describe('bad input is never answered 500', () => {
  // Each case writes to a record of its own that does not exist yet, with an expected_version
  // that would otherwise be right (0), so a wrongly accepted body shows as a created record.
  const badBodies: [string, string, unknown][] = [
    ['truncated JSON', 'title', '{"value": "x", "expected_version": 0'],
    ['not JSON', 'title', 'value=x&expected_version=0'],
    ['trailing garbage', 'title', '{"value": "x", "expected_version": 0} extra'],
    ['a JSON array', 'title', '[]'],
    ['a JSON string', 'title', '"x"'],
    ['a JSON number', 'title', '42'],
    ['JSON null', 'title', 'null'],
    ['an empty body', 'title', ''],
    ['whitespace only', 'title', '   \n'],
    ['missing value', 'title', { expected_version: 0 }],
    ['missing expected_version', 'title', { value: 'x' }],
    ['expected_version as a string', 'title', { value: 'x', expected_version: '0' }],
    ['expected_version negative', 'title', { value: 'x', expected_version: -1 }],
    ['expected_version fractional', 'title', { value: 'x', expected_version: 0.5 }],
    ['expected_version huge', 'title', '{"value": "x", "expected_version": 1e400}'],
    ['expected_version null', 'title', { value: 'x', expected_version: null }],
    ['expected_version an object', 'title', { value: 'x', expected_version: { v: 0 } }],
    ['value of the wrong type', 'title', { value: 5, expected_version: 0 }],
    ['value null for a string field', 'title', { value: null, expected_version: 0 }],
    ['value an object for a string field', 'title', { value: { a: 1 }, expected_version: 0 }],
    ['enum violation', 'status', { value: 'OPEN', expected_version: 0 }],
    ['integer field given a fraction', 'severity', { value: 1.5, expected_version: 0 }],
    ['integer field given a numeric string', 'severity', { value: '3', expected_version: 0 }],
    ['evidence a number', 'title', { value: 'x', expected_version: 0, evidence: 5 }],
    ['evidence an object', 'title', { value: 'x', expected_version: 0, evidence: { why: 'x' } }],
    ['based_on an object', 'title', { value: 'x', expected_version: 0, based_on: { field: 'status', version: 0 } }],
    ['based_on a string', 'title', { value: 'x', expected_version: 0, based_on: 'status' }],
    ['based_on with a number', 'title', { value: 'x', expected_version: 0, based_on: [1] }],
    ['premise without version', 'title', { value: 'x', expected_version: 0, based_on: [{ field: 'status' }] }],
    ['premise with a negative version', 'title', { value: 'x', expected_version: 0, based_on: [{ field: 'status', version: -1 }] }],
    ['premise with a string version', 'title', { value: 'x', expected_version: 0, based_on: [{ field: 'status', version: '0' }] }],
    ['premise with a bad kind', 'title', { value: 'x', expected_version: 0, based_on: [{ field: 'status', version: 0, kind: 'lock' }] }],
    ['premise with a numeric field', 'title', { value: 'x', expected_version: 0, based_on: [{ field: 7, version: 0 }] }],
    ['invocation a string', 'title', { value: 'x', expected_version: 0, invocation: 'run-1' }],
    ['invocation an array', 'title', { value: 'x', expected_version: 0, invocation: [1, 2] }],
    ['invocation a number', 'title', { value: 'x', expected_version: 0, invocation: 7 }],
    ['invocation null', 'title', { value: 'x', expected_version: 0, invocation: null }],
    ['invocation over 1 KiB', 'title', { value: 'x', expected_version: 0, invocation: { pad: 'x'.repeat(1100) } }],
    ['an unknown key', 'title', { value: 'x', expected_version: 0, expected_verison: 0 }],
    ['soft field without value', 'scratch', { expected_version: 'whatever' }],
    ['a body over 4 MiB', 'blob', JSON.stringify({ value: 'x'.repeat(4 * 1024 * 1024), expected_version: 0 })],
  ];

  test.each(badBodies.map(([n, f, b], i) => [n, f, b, `bad-${i}`] as const))(
    '%s → 400 MALFORMED; nothing is written',
    async (_n, field, body, id) => {
      const r = await t.call('alice', 'PUT', P('incident', id, field), body);
      expectError(r, 'MALFORMED');
      expect((await t.call('alice', 'GET', `/v1/records/incident/${id}`)).status).toBe(404);
      // MALFORMED leaves no history row either
      expect((await t.call('alice', 'GET', `/v1/records/incident/${id}/history`)).status).toBe(404);
    },
  );

  const badQueries: [string, string][] = [
    ['entries_limit not a number', '/v1/records/incident/e1?entries_limit=abc'],
    ['entries_limit negative', '/v1/records/incident/e1?entries_limit=-1'],
    ['fields naming nothing', '/v1/records/incident/e1?fields=,,'],
    ['history limit not a number', '/v1/records/incident/e1/history?limit=ten'],
    ['history limit too big', '/v1/records/incident/e1/history?limit=10001'],
    ['history cursor garbage', '/v1/records/incident/e1/history?before=%00%ff'],
    ['record id over 256 bytes', `/v1/records/audited/${'a'.repeat(300)}`],
    ['record id with an encoded slash', '/v1/records/audited/a%2Fb'],
  ];
  test.each(badQueries)('%s → 400 MALFORMED', async (_n, path) => {
    expectError(await t.call('alice', 'GET', path), 'MALFORMED');
  });

  // Valid JSON the database may dislike, odd path encodings: whatever the answer, not a 500.
  const odd: [string, string, string, unknown?][] = [
    ['a NUL character in a string value', 'PUT', P('incident', 'odd-1', 'blob'), { value: 'a\u0000b', expected_version: 0 }],
    ['a NUL character in an object key', 'PUT', P('incident', 'odd-2', 'blob'), { value: { 'k\u0000': 1 }, expected_version: 0 }],
    ['a lone surrogate in a string value', 'PUT', P('incident', 'odd-3', 'blob'), '{"value": "\\ud800", "expected_version": 0}'],
    ['a NUL character in evidence', 'PUT', P('incident', 'odd-4', 'proof'), { value: 1, expected_version: 0, evidence: 'a\u0000b' }],
    ['a NUL character in invocation', 'PUT', P('incident', 'odd-5', 'blob'), { value: 1, expected_version: 0, invocation: { a: '\u0000' } }],
    ['a NUL character in a refused value', 'PUT', P('incident', 'odd-6', 'strong'), { value: 'a\u0000b', expected_version: 0 }],
    ['deeply nested JSON', 'PUT', P('incident', 'odd-7', 'blob'), `{"value": ${'['.repeat(100_000)}${']'.repeat(100_000)}, "expected_version": 0}`],
    ['a NUL character in the record id (no idPattern)', 'PUT', P('audited', 'a%00b', 'memo'), { value: 1, evidence: 'e' }],
    ['a NUL character in the record id, get', 'GET', '/v1/records/audited/a%00b'],
    ['a NUL character in the record id, history', 'GET', '/v1/records/audited/a%00b/history'],
    ['an invalid UTF-8 escape in the record id', 'GET', '/v1/records/audited/%ED%A0%80'],
    ['a broken percent escape in the record id', 'GET', '/v1/records/audited/%E0%A4%A'],
    ['a NUL character in the field name', 'PUT', P('incident', 'e1', 'ti%00tle'), { value: 'x', expected_version: 1 }],
    ['a NUL character in the class name', 'GET', '/v1/classes/inc%00ident'],
    ['a NUL character in the history field filter', 'GET', '/v1/records/incident/e1/history?field=ti%00tle'],
  ];
  test.each(odd)('%s → not 500', async (_n, method, path, body) => {
    const r = await t.call('alice', method, path, body);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(500);
    expect(r.body).toBeTypeOf('object');
    if (r.status >= 400) expect(typeof r.body.error).toBe('string');
  });
});

// ---- a real internal fault --------------------------------------------------------------------

interface LogEntry {
  level: string;
  msg: string;
  data?: Record<string, unknown>;
}

/** A gateway like startTestGateway's, but with a logger that keeps every line. */
async function startLoggedGateway(db: TestDb, classes: ClassInput[]) {
  const dir = mkdtempSync(join(tmpdir(), 'kslate-err-'));
  const classesDir = join(dir, 'classes');
  mkdirSync(classesDir, { recursive: true });
  writeFileSync(join(classesDir, 'classes.yaml'), manifestsYaml(classes));
  const keysFile = join(dir, 'apikeys.yaml');
  writeFileSync(
    keysFile,
    stringify({ keys: Object.entries(KEYS).map(([name, key]) => ({ name, sha256: createHash('sha256').update(key).digest('hex') })) }),
  );
  const logs: LogEntry[] = [];
  const at = (level: string) => (msg: string, data?: Record<string, unknown>) => void logs.push({ level, msg, data });
  const log = { debug: at('debug'), info: at('info'), warn: at('warn'), error: at('error') };
  const cfg = parseConfig(
    ['--database-url', db.url, '--listen', '127.0.0.1:0', '--metrics-port', '0', '--identity', 'apikey', '--apikeys', keysFile, '--classes', classesDir],
    {},
  );
  const gw: Gateway = await startGateway(cfg, log);
  const call = async (who: string, method: string, path: string, body?: unknown) => {
    const res = await fetch(gw.url + path, {
      method,
      headers: { authorization: `Bearer ${KEYS[who]}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    let parsed: any = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      /* keep text */
    }
    return { status: res.status, body: parsed, text };
  };
  return {
    logs,
    call,
    async close() {
      await gw.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('INTERNAL', () => {
  let db: TestDb;
  let g: Awaited<ReturnType<typeof startLoggedGateway>>;
  const admin = async (text: string) => {
    const c = new pg.Client({ connectionString: db.url });
    await c.connect();
    try {
      await c.query(text);
    } finally {
      await c.end();
    }
  };

  beforeAll(async () => {
    db = await freshDatabase();
    g = await startLoggedGateway(db, [incident]);
    // A broken object: every history insert for `title` violates a check (SQLSTATE 23514).
    await admin(`alter table history add constraint boom check (field <> 'title')`);
  });
  afterAll(async () => {
    await g?.close();
    await db?.drop();
  });

  test('a real fault answers 500 INTERNAL with request_id, logs the cause with the same id, and echoes nothing of it', async () => {
    const r = await g.call('alice', 'PUT', P('incident', 'i1', 'title'), { value: 'hello', expected_version: 0 });
    expectError(r, 'INTERNAL');
    expect(typeof r.body.request_id).toBe('string');
    expect(r.body.request_id.length).toBeGreaterThan(0);
    for (const k of Object.keys(r.body)) expect(['error', 'message', 'request_id']).toContain(k);
    for (const leak of ['boom', 'violates', 'constraint', '23514', 'history', 'relation', 'postgres', 'at ']) {
      expect(r.text.toLowerCase(), `500 body echoes "${leak}"`).not.toContain(leak);
    }
    const lines = g.logs.filter((l) => l.data?.request_id === r.body.request_id);
    expect(lines.length, 'no log line carries the request id').toBeGreaterThan(0);
    const cause = lines.find((l) => l.level === 'error');
    expect(cause, 'no error-level log line carries the request id').toBeDefined();
    expect(JSON.stringify(cause)).toContain('boom');

    // a second fault gets its own id
    const r2 = await g.call('alice', 'PUT', P('incident', 'i1', 'title'), { value: 'hello', expected_version: 0 });
    expectError(r2, 'INTERNAL');
    expect(r2.body.request_id).not.toBe(r.body.request_id);
    expect(g.logs.some((l) => l.level === 'error' && l.data?.request_id === r2.body.request_id)).toBe(true);
  });

  test('the failed write changed nothing: the field write and its history row are one transaction', async () => {
    expect((await g.call('alice', 'GET', '/v1/records/incident/i1')).status).toBe(404);
    // other fields still write; the faulty one still rolls back
    expect((await g.call('alice', 'PUT', P('incident', 'i1', 'severity'), { value: 2, expected_version: 0 })).status).toBe(201);
    expectError(await g.call('alice', 'PUT', P('incident', 'i1', 'title'), { value: 'x', expected_version: 0 }), 'INTERNAL');
    const rec = await g.call('alice', 'GET', '/v1/records/incident/i1');
    expect(rec.body.record_version).toBe(1);
    expect(rec.body.fields).not.toHaveProperty('title');
    // and once the broken object is gone, the same write applies
    await admin('alter table history drop constraint boom');
    const ok = await g.call('alice', 'PUT', P('incident', 'i1', 'title'), { value: 'x', expected_version: 0 });
    expect(ok.body).toEqual({ record: 'incident/i1', field: 'title', version: 1, record_version: 2 });
  });
});
