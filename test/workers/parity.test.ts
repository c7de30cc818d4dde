/**
 * The Workers bundle in workerd answers as the Node gateway does, body for body, with both
 * database drivers: `pg` over TCP sockets and the Neon `Pool` over WebSocket (through
 * ws-proxy.ts). Each driver gets a twin pair of databases cloned from the same migrated
 * template (so the same cursor key) with the same classes; the same requests go, in the same
 * order, to the Node gateway on one and to the Worker on the other. Only what must differ is
 * normalised: timestamps and request ids.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { pcase, pduo } from '../fixtures/parity-classes.js';
import { freshDatabase, type TestDb } from '../setup/db.js';
import { KEYS, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { APIKEYS_YAML, startWorker, type TestWorker } from './miniflare.js';
import { startWsProxy, type WsProxy } from './ws-proxy.js';

/** A class whose records expire a second after their last write (the cron sweep's test). */
const pttl: ClassInput = {
  name: 'pttl',
  namespace: 'parity',
  spec: {
    ttl: '1s',
    fields: { note: { kind: 'versioned', type: 'string' } },
    roles: { keeper: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } },
  },
};
const CLASSES = [pcase, pduo, pttl];

type Call = [who: string | null, method: string, path: string, body?: unknown, headers?: Record<string, string>];

const R = '/v1/records/pcase/w1';
/** The representative set, in order (later steps see what earlier ones wrote). */
const SCENARIO: [name: string, call: Call][] = [
  ['healthz', [null, 'GET', '/healthz']],
  ['readyz', [null, 'GET', '/readyz']],
  ['classes', ['alice', 'GET', '/v1/classes']],
  ['class', ['alice', 'GET', '/v1/classes/pcase']],
  ['put creates (201)', ['alice', 'PUT', `${R}/fields/title`, { value: 'first', expected_version: 0, evidence: 'seen' }]],
  ['put updates (200)', ['alice', 'PUT', `${R}/fields/title`, { value: 'second', expected_version: 1 }]],
  ['put STALE with diff', ['carol', 'PUT', `${R}/fields/title`, { value: 'third', expected_version: 1 }]],
  ['append', ['alice', 'POST', `${R}/fields/notes/entries`, { entry: { text: 'looked at it' }, evidence: 'the logs' }]],
  ['append again', ['carol', 'POST', `${R}/fields/notes/entries`, { entry: { text: 'me too' }, evidence: 'the logs', based_on: [{ field: 'title', version: 2 }] }]],
  ['claim', ['alice', 'PUT', `${R}/fields/job/claim`, { lease_seconds: 60 }]],
  ['claim HELD', ['carol', 'PUT', `${R}/fields/job/claim`]],
  ['checkpoint save', ['alice', 'PUT', `${R}/checkpoint`, { document: { summary: 'half done', next_steps: 'the rest' } }]],
  ['checkpoint load', ['carol', 'GET', `${R}/checkpoint`]],
  ['get', ['alice', 'GET', R]],
  ['get as reviewer', ['bob', 'GET', R]],
  ['second record', ['carol', 'PUT', '/v1/records/pcase/w2/fields/status', { value: 'open', expected_version: 0 }]],
  ['query', ['alice', 'GET', '/v1/records/pcase?limit=1']],
  ['query by field', ['alice', 'GET', '/v1/records/pcase?status=open']],
  ['history', ['alice', 'GET', `${R}/history`]],
  ['401 no credential', [null, 'GET', R]],
  ['401 unknown key', ['nobody-key', 'GET', R]],
  ['403 NO_ROLE', ['dave', 'GET', R]],
  ['403 SCOPE_DENIED', ['bob', 'GET', `${R}?fields=severity`]],
  ['404 record', ['alice', 'GET', '/v1/records/pcase/nope']],
  ['404 class', ['alice', 'GET', '/v1/classes/nope']],
  ['404 path', ['alice', 'GET', '/v2/nothing']],
  ['400 MALFORMED json', ['alice', 'PUT', `${R}/fields/title`, '{"value":', { 'content-type': 'application/json' }]],
  ['400 MALFORMED type', ['alice', 'PUT', `${R}/fields/severity`, { value: 'high', expected_version: 0 }]],
  ['405', ['alice', 'DELETE', '/v1/classes']],
  ['422 EVIDENCE_REQUIRED', ['alice', 'POST', `${R}/fields/notes/entries`, { entry: { text: 'no source' } }]],
  ['OpenAPI document, no credential', [null, 'GET', '/v1/openapi.json']],
];

/** What SCENARIO answers, step by step. */
const EXPECTED = [
  '200', '200', '200', '200', '201', '200', '409 STALE', '200', '200', '200', '409 HELD', '200', '200', '200', '200', '201',
  '200', '200', '200', '401 UNAUTHENTICATED', '401 UNAUTHENTICATED', '403 NO_ROLE', '403 SCOPE_DENIED', '404 NOT_FOUND',
  '404 NOT_FOUND', '404 NOT_FOUND', '400 MALFORMED', '400 MALFORMED', '405 METHOD_NOT_ALLOWED', '422 EVIDENCE_REQUIRED',
  '200',
];

const TS_RE = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)/g;
const UUID_RE = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;

/**
 * Timestamps and request ids differ between any two runs, also inside messages and MCP's
 * text content; everything else must not.
 */
function normalise(x: unknown): unknown {
  if (typeof x === 'string') return x.replace(TS_RE, '<time>').replace(UUID_RE, '<uuid>');
  if (Array.isArray(x)) return x.map(normalise);
  if (x && typeof x === 'object') {
    // A write's WAL position (docs/ha.md) differs between two databases: its presence and form must not.
    return Object.fromEntries(
      Object.entries(x).map(([k, v]) => [k, k === 'kslate.dev/lsn' && typeof v === 'string' && /^[0-9A-F]+\/[0-9A-F]+$/.test(v) ? '<lsn>' : normalise(v)]),
    );
  }
  return x;
}

/** A database with CLASSES applied: a Node gateway reconciles them at start (then closes unless kept). */
async function twin(): Promise<TestDb> {
  const db = await freshDatabase();
  const gw = await startTestGateway(CLASSES, { db });
  await gw.close();
  return db;
}

async function mcpClient(url: string, who: string): Promise<Client> {
  const client = new Client({ name: 'kslate-workers-parity', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS[who]}` } } }));
  return client;
}

describe.each(['pg', 'neon'] as const)('Workers bundle in workerd, driver %s', (driver) => {
  let node: TestGateway;
  let worker: TestWorker;
  let workerDb: TestDb;
  let proxy: WsProxy | undefined;

  beforeAll(async () => {
    node = await startTestGateway(CLASSES);
    workerDb = await twin();
    const bindings: Record<string, string> = { DATABASE_URL: workerDb.url, KSLATE_APIKEYS: APIKEYS_YAML, KSLATE_DB_DRIVER: driver };
    if (driver === 'neon') {
      proxy = await startWsProxy();
      bindings.KSLATE_NEON_WS_PROXY = `127.0.0.1:${proxy.port}`;
    }
    worker = await startWorker(bindings);
  });

  afterAll(async () => {
    await worker?.close();
    await proxy?.close();
    await node?.close();
    await workerDb?.drop();
  });

  test('HTTP/JSON: the representative set answers body for body as the Node gateway', async () => {
    const answers: string[] = [];
    for (const [name, call] of SCENARIO) {
      const a = await node.call(...call);
      const b = await worker.call(...call);
      expect({ name, status: b.status, body: normalise(b.body) }).toEqual({ name, status: a.status, body: normalise(a.body) });
      answers.push(`${a.status} ${(a.body as { error?: string })?.error ?? ''}`.trim());
    }
    // The set covers what it says it does (on both, since they agree).
    expect(answers).toEqual(EXPECTED);
    // The STALE answer carries the diff; HELD the owner: the comparison above covered them, this keeps them there.
    const stale = await worker.call('carol', 'PUT', `${R}/fields/title`, { value: 'third', expected_version: 1 });
    expect(stale.body).toMatchObject({ error: 'STALE', current_value: 'second' });
    expect(JSON.stringify(stale.body)).toContain('diff');
    if (driver === 'neon') expect(proxy!.connections).toBeGreaterThan(0);
  });

  test('MCP: initialize, tools/list and tools/call svc_put/svc_get through the SDK client answer as on Node', async () => {
    const [a, b] = await Promise.all([mcpClient(node.url, 'alice'), mcpClient(worker.url, 'alice')]);
    try {
      expect(b.getServerVersion()).toEqual(a.getServerVersion());
      expect(b.getInstructions()).toEqual(a.getInstructions());
      expect(b.getServerCapabilities()).toEqual(a.getServerCapabilities());
      expect(await b.listTools()).toEqual(await a.listTools());
      const calls = [
        { name: 'svc_put', arguments: { record: 'pcase/m1', field: 'title', value: 'over mcp', expected_version: 0 } },
        { name: 'svc_put', arguments: { record: 'pcase/m1', field: 'title', value: 'late', expected_version: 0 } },
        { name: 'svc_get', arguments: { record: 'pcase/m1' } },
        { name: 'svc_put', arguments: { record: 'pcase/m1', field: 'severity', value: 'high', expected_version: 0 } },
        { name: 'svc_get', arguments: { record: 'nopecls/x' } },
      ];
      const codes: string[] = [];
      for (const call of calls) {
        const ra = await a.callTool(call);
        const rb = await b.callTool(call);
        expect({ call: call.name, ...(normalise(rb) as object) }).toEqual({ call: call.name, ...(normalise(ra) as object) });
        codes.push(ra.isError ? String((ra.structuredContent as { error?: string })?.error) : 'OK');
      }
      expect(codes).toEqual(['OK', 'STALE', 'OK', 'MALFORMED', 'NOT_FOUND']);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  test('scheduled(): the cron sweep expires a record past its class ttl', async () => {
    const put = await worker.call('alice', 'PUT', '/v1/records/pttl/old/fields/note', { value: 'soon gone', expected_version: 0 });
    expect(put.status).toBe(201);
    const c = new pg.Client({ connectionString: workerDb.url });
    await c.connect();
    try {
      await c.query(`update records set last_write_at = now() - interval '1 hour' where class = 'pttl' and rid = 'old'`);
    } finally {
      await c.end();
    }
    expect(await worker.scheduled()).toEqual({ outcome: 'ok' });
    expect((await worker.call('alice', 'GET', '/v1/records/pttl/old')).status).toBe(404);
  });
});
