/**
 * Real answers of a real gateway over fetch validate against the OpenAPI document: the
 * success and error answers of every operation, every error code (INTERNAL from a broken
 * table, UNAVAILABLE from a lock held past --db-timeout, RATE_LIMITED from a spent
 * credential budget), the probes, /mcp and the document itself. Each answer's status must be
 * one the document lists for that operation, with its headers, and its body must be valid
 * against the schema documented for that status (Ajv, JSON Schema 2020-12).
 */
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { encodeWatchCursor } from '../../handlers/cursor.js';
import { ERROR_TABLE, type ErrorCode } from '../../handlers/errors.js';
import { openApiPath, operationRoutes, type Json } from '../../handlers/openapi.js';
import { apiDocument, apiDocumentText, OPENAPI_CACHE_CONTROL } from '../../runtime/http/openapi.js';
import { fortress } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { ajvFor, request, responseChecker, type Answer } from './check.js';

const ticket: ClassInput = {
  name: 'ticket',
  namespace: 'ops',
  spec: {
    idPattern: '^[a-z0-9-]{1,64}$',
    fields: {
      title: { kind: 'versioned', type: 'string' },
      status: { kind: 'versioned', type: 'string', enum: ['open', 'resolved'] },
      notes: { kind: 'append' },
      owner: { kind: 'task', leaseSeconds: 60 },
      scratch: { kind: 'soft' },
      proof: { kind: 'versioned', requireEvidence: true },
      strong: { kind: 'versioned', minIdentityStrength: 'sa-bound' },
    },
    roles: {
      worker: { subjects: ['apikey:alice', 'apikey:carol'], read: ['*'], write: ['*'] },
      reader: { subjects: ['apikey:bob'], read: ['title', 'status', 'notes'], write: [] },
    },
    checkpoint: { sections: ['summary'], requiredForResolve: ['worker'] },
  },
};
/** Deleted after start: writes answer CLASS_GONE. */
const relic: ClassInput = {
  name: 'relic',
  spec: { fields: { label: { kind: 'versioned' } }, roles: { keeper: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } },
};

const CLASSES = '/v1/classes';
const CLASS = '/v1/classes/{name}';
const QUERY = '/v1/records/{class}';
const GET = '/v1/records/{class}/{id}';
const PUT = '/v1/records/{class}/{id}/fields/{field}';
const APPEND = '/v1/records/{class}/{id}/fields/{field}/entries';
const CLAIM = '/v1/records/{class}/{id}/fields/{field}/claim';
const CHECKPOINT = '/v1/records/{class}/{id}/checkpoint';
const HISTORY = '/v1/records/{class}/{id}/history';
const TRANSACTION = '/v1/records/{class}/{id}/transactions';
const MCP_ACCEPT = { accept: 'application/json, text/event-stream' };

let t: TestGateway;
const doc = apiDocument();
const { check, seen } = responseChecker(doc);

/** One request, checked against the document; `template` is the documented path. */
async function call(
  who: string | null,
  method: string,
  template: string,
  url: string,
  body?: unknown,
  headers?: Record<string, string>,
): Promise<Answer & { body: any }> {
  const a = await request(t.url, method, url, { token: who === null ? null : (KEYS[who] ?? who), body, headers });
  check(method, template, a);
  return a as Answer & { body: any };
}

async function admin(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: t.db.url });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

beforeAll(async () => {
  // --write-lsn on: every documented header (X-Kslate-Lsn) is then on the answers it is documented for.
  t = await startTestGateway([ticket, fortress, relic], { extraArgs: ['--db-timeout', '1s', '--write-lsn', 'on'] });
  t.writeClasses([ticket, fortress]);
  await t.gw.services.sweepOnce();
});
afterAll(() => t?.close());

const expectCode = (a: { status: number; body: any }, code: ErrorCode) => {
  expect({ status: a.status, error: a.body?.error }).toEqual({ status: ERROR_TABLE[code].http, error: code });
};

describe('service routes', () => {
  test('probes', async () => {
    expect((await call(null, 'GET', '/healthz', '/healthz')).status).toBe(200);
    expect((await call(null, 'GET', '/readyz', '/readyz')).status).toBe(200);
  });

  test('GET /v1/openapi.json: the document, without a credential, cached, 304 on its ETag, equal to docs/openapi.json', async () => {
    const a = await call(null, 'GET', '/v1/openapi.json', '/v1/openapi.json', undefined, { 'x-request-id': 'doc-1' });
    expect(a.status).toBe(200);
    expect(a.body).toEqual(doc);
    expect(a.headers.get('cache-control')).toBe(OPENAPI_CACHE_CONTROL);
    expect(a.headers.get('x-request-id')).toBe('doc-1');
    const committed = readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8');
    expect(committed).toBe(apiDocumentText());
    const again = await call(null, 'GET', '/v1/openapi.json', '/v1/openapi.json', undefined, { 'if-none-match': a.headers.get('etag')! });
    expect(again.status).toBe(304);
    expect(again.headers.get('cache-control')).toBe(OPENAPI_CACHE_CONTROL);
    // A credential changes nothing, a bad one included.
    expect((await call('no-such-key', 'GET', '/v1/openapi.json', '/v1/openapi.json')).status).toBe(200);
  });

  test('/mcp: initialize, a notification, a refused tool call, the closed GET and DELETE, and 401', async () => {
    const init = await call('alice', 'POST', '/mcp', '/mcp', {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'openapi-test', version: '1' } },
    }, MCP_ACCEPT);
    expect(init.status).toBe(200);
    const note = await call('alice', 'POST', '/mcp', '/mcp', { jsonrpc: '2.0', method: 'notifications/initialized' }, MCP_ACCEPT);
    expect(note.status).toBe(202);
    const refused = await call('alice', 'POST', '/mcp', '/mcp', {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: 'svc_get', arguments: { record: 'ticket/never' } },
    }, MCP_ACCEPT);
    expect(refused.body.result).toMatchObject({ isError: true, structuredContent: { error: 'NOT_FOUND' } });
    expect((await call('alice', 'POST', '/mcp', '/mcp', { jsonrpc: '2.0', id: 3, method: 'tools/list' })).status).toBe(406);
    expect((await call('alice', 'POST', '/mcp', '/mcp', '{nope', MCP_ACCEPT)).status).toBe(400);
    expect((await call('alice', 'GET', '/mcp', '/mcp')).status).toBe(405);
    expect((await call('alice', 'DELETE', '/mcp', '/mcp')).status).toBe(405);
    expectCode(await call(null, 'POST', '/mcp', '/mcp', { jsonrpc: '2.0', id: 4, method: 'tools/list' }, MCP_ACCEPT), 'UNAUTHENTICATED');
  });

  test('/mcp/session: initialize with a session id, a subscribe, the refusals without or with an unknown session, DELETE, and 401', async () => {
    const P = '/mcp/session';
    const init = await call('alice', 'POST', P, P, {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'openapi-test', version: '1' } },
    }, MCP_ACCEPT);
    expect(init.status).toBe(200);
    const sid = init.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    const session = { ...MCP_ACCEPT, 'mcp-session-id': sid, 'mcp-protocol-version': '2025-06-18' };
    expect((await call('alice', 'POST', P, P, { jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status).toBe(202);
    await call('alice', 'PUT', PUT, '/v1/records/ticket/sub1/fields/title', { value: 'x', expected_version: 0 });
    const sub = await call('alice', 'POST', P, P, { jsonrpc: '2.0', id: 2, method: 'resources/subscribe', params: { uri: 'kslate://records/ticket/sub1' } }, session);
    expect(sub.body).toMatchObject({ id: 2, result: {} });
    expect((await call('alice', 'POST', P, P, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, MCP_ACCEPT)).status).toBe(400);
    expect((await call('alice', 'POST', P, P, { jsonrpc: '2.0', id: 3, method: 'tools/list' }, { ...session, 'mcp-session-id': 'nope' })).status).toBe(404);
    expect((await call('alice', 'GET', P, P, undefined, { accept: 'text/event-stream' })).status).toBe(400);
    expect((await call('alice', 'GET', P, P, undefined, { accept: 'text/event-stream', 'mcp-session-id': 'nope' })).status).toBe(404);
    expect((await call('alice', 'GET', P, P, undefined, { 'mcp-session-id': sid })).status).toBe(406);
    expect((await call('alice', 'DELETE', P, P, undefined, session)).status).toBe(200);
    expect((await call('alice', 'DELETE', P, P, undefined, session)).status).toBe(404);
    expectCode(await call(null, 'GET', P, P), 'UNAUTHENTICATED');
  });
});

describe('operations: success answers', () => {
  test('classes and class', async () => {
    const list = await call('alice', 'GET', CLASSES, '/v1/classes');
    expect(list.body.classes).toContainEqual({ name: 'relic', gone: true });
    expect((await call('alice', 'GET', CLASS, '/v1/classes/ticket')).status).toBe(200);
    expect((await call('alice', 'GET', CLASS, '/v1/classes/relic')).body.gone).toBe(true);
    expect((await call('alice', 'GET', CLASS, '/v1/classes/fortress')).status).toBe(200);
  });

  test('put (201 then 200, premises, soft), append, claim (take, 201, release), checkpoint save and load', async () => {
    const created = await call('alice', 'PUT', PUT, '/v1/records/ticket/t1/fields/title', {
      value: 'Disk full',
      expected_version: 0,
      evidence: 'pager',
      invocation: { run: 'r-1' },
    });
    expect(created.status).toBe(201);
    expect((await call('alice', 'PUT', PUT, '/v1/records/ticket/t1/fields/status', { value: 'open', expected_version: 0, based_on: [{ field: 'title', version: 1 }] })).status).toBe(200);
    expect((await call('alice', 'PUT', PUT, '/v1/records/ticket/t1/fields/scratch', { value: { a: [1, null] } })).status).toBe(200);
    expect((await call('alice', 'PUT', PUT, '/v1/records/ticket/t1/fields/proof', { value: 1, expected_version: 0, evidence: 'ran it' })).status).toBe(200);
    // A read in a scope, then a write without based_on: its premises are inferred.
    const scope = { 'x-svc-scope': 'openapi-run-alice' };
    expect((await call('alice', 'GET', GET, '/v1/records/ticket/t1', undefined, scope)).status).toBe(200);
    expect((await call('alice', 'PUT', PUT, '/v1/records/ticket/t1/fields/title', { value: 'Disk full on db-1', expected_version: 1 }, scope)).status).toBe(200);

    expect((await call('alice', 'POST', APPEND, '/v1/records/ticket/t1/fields/notes/entries', { entry: { saw: 'df -h' }, evidence: 'shell', invocation: { tool: 't1' } })).status).toBe(200);
    expect((await call('alice', 'POST', APPEND, '/v1/records/ticket/t2/fields/notes/entries', { entry: 'first', evidence: 'log' })).status).toBe(201);

    const taken = await call('alice', 'PUT', CLAIM, '/v1/records/ticket/t1/fields/owner/claim');
    expect(taken.status).toBe(200);
    expect(taken.body.owner).toBe('apikey:alice');
    expect((await call('alice', 'PUT', CLAIM, '/v1/records/ticket/t3/fields/owner/claim', { lease_seconds: 30 })).status).toBe(201);
    const released = await call('alice', 'PUT', CLAIM, '/v1/records/ticket/t3/fields/owner/claim', { lease_seconds: 0 });
    expect(released.body).not.toHaveProperty('owner');

    expect((await call('alice', 'PUT', CHECKPOINT, '/v1/records/ticket/t1/checkpoint', { document: { summary: 'df', next: [1] } })).status).toBe(200);
    expect((await call('alice', 'GET', CHECKPOINT, '/v1/records/ticket/t1/checkpoint')).body.document).toEqual({ summary: 'df', next: [1] });
    expect((await call('alice', 'GET', CHECKPOINT, '/v1/records/ticket/t2/checkpoint?role=worker')).body.document).toBeNull();

    // A transaction (issue 33): created, then applied on an existing record.
    const tx = { writes: [{ op: 'put', field: 'scratch', value: 1 }, { op: 'claim', field: 'owner', lease_seconds: 30 }] };
    expect((await call('alice', 'POST', TRANSACTION, '/v1/records/ticket/tx1/transactions', tx)).status).toBe(201);
    expect((await call('alice', 'POST', TRANSACTION, '/v1/records/ticket/tx1/transactions', tx)).status).toBe(200);
    const refused = { writes: [{ op: 'put', field: 'scratch', value: 2 }, { op: 'put', field: 'title', value: 'x', expected_version: 5 }] };
    expectCode(await call('alice', 'POST', TRANSACTION, '/v1/records/ticket/tx1/transactions', refused), 'STALE');
    // Its history rows (transaction ids, not_applied) are documented rows.
    const rows = (await call('alice', 'GET', HISTORY, '/v1/records/ticket/tx1/history')).body.history as Json[];
    expect(rows.map((r) => r.outcome).slice(0, 2)).toEqual(['stale', 'not_applied']);
  });

  test('get, query (pages) and history (pages, inferred premises, a value kept as size and digest)', async () => {
    const rec = await call('alice', 'GET', GET, '/v1/records/ticket/t1');
    expect(Object.keys(rec.body.fields).sort()).toEqual(['notes', 'owner', 'proof', 'scratch', 'status', 'title']);
    expect((await call('alice', 'GET', GET, '/v1/records/ticket/t1?fields=notes,owner&entries_limit=1')).status).toBe(200);
    // bob may read title, status and notes only.
    expect(Object.keys((await call('bob', 'GET', GET, '/v1/records/ticket/t1')).body.fields).sort()).toEqual(['notes', 'status', 'title']);

    const page = await call('alice', 'GET', QUERY, '/v1/records/ticket?limit=1');
    expect(typeof page.body.next_after).toBe('string');
    expect((await call('alice', 'GET', QUERY, `/v1/records/ticket?limit=1&after=${encodeURIComponent(page.body.next_after)}`)).body.records).toHaveLength(1);
    expect((await call('alice', 'GET', QUERY, '/v1/records/ticket?status=open&owner=apikey:alice')).body.records).toHaveLength(1);

    // A refused write of a value over 64 KiB keeps only its size and digest.
    expectCode(await call('bob', 'PUT', PUT, '/v1/records/ticket/t1/fields/title', { value: 'x'.repeat(70_000), expected_version: 2 }), 'SCOPE_DENIED');
    const hist = await call('alice', 'GET', HISTORY, '/v1/records/ticket/t1/history');
    const rows = hist.body.history as Json[];
    expect(rows.some((r) => typeof r.value_sha256 === 'string' && r.outcome === 'scope_denied')).toBe(true);
    expect(rows.some((r) => (r.based_on as Json[] | undefined)?.some((p) => p.inferred === true))).toBe(true);
    const older = await call('alice', 'GET', HISTORY, '/v1/records/ticket/t1/history?limit=1');
    expect((await call('alice', 'GET', HISTORY, `/v1/records/ticket/t1/history?limit=1&before=${encodeURIComponent(older.body.next_before)}`)).status).toBe(200);
    expect((await call('alice', 'GET', HISTORY, '/v1/records/ticket/t1/history?field=owner')).status).toBe(200);
  });
});

describe('operations: error answers', () => {
  const P = (id: string, field: string) => `/v1/records/ticket/${id}/fields/${field}`;
  const cases: [ErrorCode, string | null, string, string, string, unknown?, Record<string, string>?][] = [
    ['MALFORMED', 'alice', 'PUT', PUT, P('t1', 'title'), '{'],
    ['MALFORMED', 'alice', 'GET', GET, '/v1/records/ticket/t1?feilds=title'],
    ['MALFORMED', 'alice', 'GET', GET, '/v1/records/ticket/NOT_OK'],
    ['MALFORMED', 'alice', 'GET', CLASSES, '/v1/classes?x=1'],
    ['MALFORMED', 'alice', 'GET', CLASS, '/v1/classes/ticket?x=1'],
    ['MALFORMED', 'alice', 'GET', QUERY, '/v1/records/ticket?limit=0'],
    ['MALFORMED', 'alice', 'GET', HISTORY, '/v1/records/ticket/t1/history?before=nope'],
    ['MALFORMED', 'alice', 'GET', CHECKPOINT, '/v1/records/ticket/t1/checkpoint?role=reader'],
    ['MALFORMED', 'alice', 'PUT', CHECKPOINT, '/v1/records/ticket/t1/checkpoint', { document: {}, extra: 1 }],
    ['MALFORMED', 'alice', 'POST', APPEND, `${P('t1', 'notes')}/entries`, { entry: 1, evidence: 'e', based_on: 'x' }],
    ['MALFORMED', 'alice', 'PUT', CLAIM, `${P('t1', 'owner')}/claim`, { lease_seconds: 86_401 }],
    ['UNAUTHENTICATED', null, 'GET', CLASSES, '/v1/classes'],
    ['UNAUTHENTICATED', 'no-such-key', 'PUT', PUT, P('t1', 'title'), { value: 'x', expected_version: 2 }],
    ['NO_ROLE', 'dave', 'GET', GET, '/v1/records/ticket/t1'],
    ['NO_ROLE', 'dave', 'GET', CLASS, '/v1/classes/ticket'],
    ['NO_ROLE', 'dave', 'GET', QUERY, '/v1/records/ticket'],
    ['NO_ROLE', 'dave', 'PUT', CHECKPOINT, '/v1/records/ticket/t1/checkpoint', { document: { summary: 's' } }],
    ['SCOPE_DENIED', 'bob', 'GET', GET, '/v1/records/ticket/t1?fields=scratch'],
    ['SCOPE_DENIED', 'bob', 'GET', QUERY, '/v1/records/ticket?scratch=1'],
    ['SCOPE_DENIED', 'bob', 'GET', HISTORY, '/v1/records/ticket/t1/history?field=proof'],
    ['SCOPE_DENIED', 'bob', 'POST', APPEND, `${P('t1', 'notes')}/entries`, { entry: 1, evidence: 'e' }],
    ['SCOPE_DENIED', 'bob', 'PUT', CLAIM, `${P('t1', 'owner')}/claim`],
    ['WEAK_IDENTITY', 'alice', 'PUT', PUT, P('t1', 'strong'), { value: 1, expected_version: 0 }],
    ['WEAK_IDENTITY', 'alice', 'PUT', CHECKPOINT, '/v1/records/fortress/f1/checkpoint', { document: {} }],
    ['IDENTITY_MISMATCH', 'carol', 'GET', GET, '/v1/records/ticket/t1', undefined, { 'x-svc-scope': 'openapi-run-alice' }],
    ['IDENTITY_MISMATCH', 'carol', 'PUT', PUT, P('t1', 'scratch'), { value: 1 }, { 'x-svc-scope': 'openapi-run-alice' }],
    ['NOT_FOUND', 'alice', 'GET', CLASS, '/v1/classes/nosuch'],
    ['NOT_FOUND', 'alice', 'GET', GET, '/v1/records/ticket/never'],
    ['NOT_FOUND', 'alice', 'GET', QUERY, '/v1/records/nosuch'],
    ['NOT_FOUND', 'alice', 'GET', HISTORY, '/v1/records/ticket/never/history'],
    ['NOT_FOUND', 'alice', 'GET', CHECKPOINT, '/v1/records/ticket/never/checkpoint'],
    ['NOT_FOUND', 'alice', 'PUT', CHECKPOINT, '/v1/records/ticket/never/checkpoint', { document: { summary: 's' } }],
    ['NOT_FOUND', 'alice', 'PUT', CLAIM, '/v1/records/nosuch/n1/fields/owner/claim'],
    ['STALE', 'alice', 'PUT', PUT, P('t1', 'title'), { value: 'late', expected_version: 0 }],
    ['STALE', 'alice', 'POST', TRANSACTION, '/v1/records/ticket/t1/transactions', { writes: [{ op: 'put', field: 'title', value: 'late', expected_version: 0 }] }],
    ['MALFORMED', 'alice', 'POST', TRANSACTION, '/v1/records/ticket/t1/transactions', { writes: [] }],
    ['STALE_PREMISE', 'alice', 'PUT', PUT, P('t1', 'status'), { value: 'open', expected_version: 1, based_on: [{ field: 'title', version: 1 }] }],
    ['STALE_PREMISE', 'alice', 'POST', APPEND, `${P('t1', 'notes')}/entries`, { entry: 2, evidence: 'e', based_on: [{ field: 'title', version: 1 }] }],
    ['HELD', 'carol', 'PUT', CLAIM, `${P('t1', 'owner')}/claim`],
    ['CLASS_GONE', 'alice', 'PUT', PUT, '/v1/records/relic/r1/fields/label', { value: 1, expected_version: 0 }],
    ['CLASS_GONE', 'alice', 'PUT', CHECKPOINT, '/v1/records/relic/r1/checkpoint', { document: {} }],
    ['EVIDENCE_REQUIRED', 'alice', 'PUT', PUT, P('t1', 'proof'), { value: 2, expected_version: 1 }],
    ['EVIDENCE_REQUIRED', 'alice', 'POST', APPEND, `${P('t1', 'notes')}/entries`, { entry: 2 }],
    ['UNKNOWN_FIELD', 'alice', 'PUT', PUT, P('t1', 'nosuch'), { value: 1, expected_version: 0 }],
    ['UNKNOWN_FIELD', 'alice', 'GET', GET, '/v1/records/ticket/t1?fields=nosuch'],
    ['UNKNOWN_FIELD', 'alice', 'GET', QUERY, '/v1/records/ticket?nosuch=1'],
    ['UNKNOWN_FIELD', 'alice', 'GET', HISTORY, '/v1/records/ticket/t1/history?field=nosuch'],
    ['UNKNOWN_FIELD', 'alice', 'PUT', CLAIM, `${P('t1', 'nosuch')}/claim`],
    ['NOT_WRITABLE', 'alice', 'PUT', PUT, P('t1', 'notes'), { value: 1, expected_version: 0 }],
    ['NOT_APPEND_FIELD', 'alice', 'POST', APPEND, `${P('t1', 'title')}/entries`, { entry: 1, evidence: 'e' }],
    ['NOT_TASK_FIELD', 'alice', 'PUT', CLAIM, `${P('t1', 'title')}/claim`],
    ['INVALID_CHECKPOINT', 'alice', 'PUT', CHECKPOINT, '/v1/records/ticket/t1/checkpoint', { document: { next: 1 } }],
    ['INVALID_CHECKPOINT', 'alice', 'PUT', PUT, P('t2', 'status'), { value: 'resolved', expected_version: 0 }],
  ];

  test.each(cases.map((c) => [`${c[0]}: ${c[2]} ${c[4]}`, c] as const))('%s', async (_n, [code, who, method, template, url, body, headers]) => {
    expectCode(await call(who, method, template, url, body, headers), code);
  });

  test('EXPIRED: a class watch cursor older than the retained window answers 410 with oldest, as documented', async () => {
    const c = new pg.Client({ connectionString: t.db.url });
    await c.connect();
    const key = (await c.query(`select value from kslate_meta where key = 'cursor_key'`)).rows[0].value as string;
    await c.end();
    // A cursor this gateway could have issued for a change long before --watch-retention (1h).
    const old = await encodeWatchCursor(key, 'ticket', { pos: { '0': { tx: '1', id: 0 } }, at: Date.now() - 2 * 3_600_000 });
    const a = await call('alice', 'GET', '/v1/classes/{class}/watch', `/v1/classes/ticket/watch?from=${old}`);
    expectCode(a, 'EXPIRED');
    expect(typeof a.body.oldest).toBe('string');
  });

  test('IDEMPOTENCY_KEY_REUSED and IDEMPOTENCY_KEY_IN_USE answer as documented', async () => {
    const key = { 'idempotency-key': 'doc-key-1' };
    expect((await call('alice', 'PUT', PUT, P('idem1', 'title'), { value: 'a', expected_version: 0 }, key)).status).toBe(201);
    expectCode(await call('alice', 'PUT', PUT, P('idem1', 'title'), { value: 'b', expected_version: 0 }, key), 'IDEMPOTENCY_KEY_REUSED');
    // The key held by another session stands for a first request still running.
    const c = new pg.Client({ connectionString: t.db.url });
    await c.connect();
    try {
      await c.query(`select pg_advisory_lock(hashtextextended('apikey:alice' || chr(10) || 'doc-key-2', 11))`);
      const a = await call('alice', 'PUT', PUT, P('idem2', 'title'), { value: 'a', expected_version: 0 }, { 'idempotency-key': 'doc-key-2' });
      expectCode(a, 'IDEMPOTENCY_KEY_IN_USE');
    } finally {
      await c.end();
    }
  });

  test('405 METHOD_NOT_ALLOWED with Allow, and 404 for an unknown path, as components.responses say', async () => {
    const responses = (doc.components as Json).responses as Record<string, Json>;
    const ajv = ajvFor(doc);
    const bodyOf = (name: string) => {
      const schema = ((responses[name].content as Json)['application/json'] as Json).schema as Json;
      return ajv.compile({ $ref: `https://kslate.invalid/openapi.json#/$defs/${String(schema.$ref).split('/').pop()}` });
    };
    const paths = doc.paths as Record<string, Json>;
    for (const [method, url, template] of [['DELETE', '/v1/records/ticket/t1', GET], ['POST', '/v1/classes', CLASSES], ['PUT', '/mcp', '/mcp']]) {
      const a = await request(t.url, method, url, { token: KEYS.alice });
      expectCode(a as any, 'METHOD_NOT_ALLOWED');
      expect(paths[template].description).toContain(`Allow: ${a.headers.get('allow')}`);
      expect(bodyOf('MethodNotAllowed')(a.body), JSON.stringify(a.body)).toBe(true);
    }
    const missing = await request(t.url, 'GET', '/v1/nothing-here', { token: KEYS.alice });
    expectCode(missing as any, 'NOT_FOUND');
    expect(bodyOf('NotFound')(missing.body)).toBe(true);
    expect(missing.headers.get('x-request-id')).not.toBeNull();
  });

  test('INTERNAL: a broken table answers 500 with request_id, as documented', async () => {
    await admin(`alter table history add constraint openapi_boom check (field <> 'scratch') not valid`);
    try {
      expectCode(await call('alice', 'PUT', PUT, P('t1', 'scratch'), { value: 2 }), 'INTERNAL');
    } finally {
      await admin('alter table history drop constraint openapi_boom');
    }
  });

  test('UNAVAILABLE: a read held up by a lock past --db-timeout answers 503, as documented', async () => {
    const c = new pg.Client({ connectionString: t.db.url });
    await c.connect();
    try {
      await c.query('begin');
      await c.query('lock table fields in access exclusive mode');
      expectCode(await call('alice', 'GET', GET, '/v1/records/ticket/t1'), 'UNAVAILABLE');
      await c.query('rollback');
    } finally {
      await c.end();
    }
    expect((await call('alice', 'GET', GET, '/v1/records/ticket/t1')).status).toBe(200);
  });

  // Last: it spends this address's budget of rejected credentials.
  test('RATE_LIMITED after the burst of rejected credentials, as documented', async () => {
    let limited: Answer | undefined;
    for (let i = 0; i < 2500 && !limited; i++) {
      const a = await request(t.url, 'GET', '/v1/classes', { token: 'no-such-key' });
      if (a.status === 429) limited = a;
    }
    expect(limited, 'no 429 after 2500 rejected credentials').toBeDefined();
    check('GET', CLASSES, limited!);
    expectCode(limited as any, 'RATE_LIMITED');
  });
});

describe('coverage of this file', () => {
  test('every operation had a success and an error answer validated, and every error code one answer', () => {
    for (const r of operationRoutes()) {
      const mine = seen.filter((s) => s.method === r.method && s.path === openApiPath(r.path));
      expect(mine.some((s) => s.status < 300), `${r.operationId}: no success answer checked`).toBe(true);
      expect(mine.some((s) => s.status >= 400), `${r.operationId}: no error answer checked`).toBe(true);
    }
    const codes = new Set(seen.map((s) => s.code).filter(Boolean));
    // METHOD_NOT_ALLOWED is answered for paths' other methods (checked above against components.responses).
    const missing = (Object.keys(ERROR_TABLE) as ErrorCode[]).filter((c) => c !== 'METHOD_NOT_ALLOWED' && !codes.has(c));
    expect(missing).toEqual([]);
  });
});
