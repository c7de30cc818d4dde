/**
 * The direct path of /mcp (runtime/http/mcp/server.ts `commonToolCall`/`directToolCall`;
 * docs/performance.md "MCP direct path") answers exactly what the SDK answers. Two gateways,
 * each on its own fresh database with the same classes and the same cursor key, one with the
 * direct path (the default) and one with `mcp: { direct: false }` (every POST through the
 * SDK), get the same requests in the same order over real sockets. For every request: the
 * same status, the same headers (but Date, and an MCP session's id, which is random) and the
 * same body bytes once timestamps (each database's clock) and random ids are replaced. Each request also
 * says which path the direct gateway must have taken: the SDK's transport is counted.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js';
import { LATEST_PROTOCOL_VERSION } from '@modelcontextprotocol/sdk/types.js';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, test, vi } from 'vitest';
import { MAX_MCP_BODY_BYTES } from '../../runtime/http/mcp/server.js';
import { incident } from '../fixtures/classes.js';
import { tasks } from '../fixtures/task-classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

let direct: TestGateway;
let sdk: TestGateway;
const clients: Client[] = [];

/** The SDK transport's requests so far (both gateways run in this process). */
const viaSdk = vi.spyOn(WebStandardStreamableHTTPServerTransport.prototype, 'handleRequest');

beforeAll(async () => {
  [direct, sdk] = await Promise.all([startTestGateway([incident, tasks]), startTestGateway([incident, tasks], { gateway: { mcp: { direct: false } } })]);
  // Cursors are signed with the database's key: the same key makes the same cursors.
  const a = new pg.Client({ connectionString: direct.db.url });
  const b = new pg.Client({ connectionString: sdk.db.url });
  await Promise.all([a.connect(), b.connect()]);
  const key = (await a.query(`select value from kslate_meta where key = 'cursor_key'`)).rows[0].value as string;
  await b.query(`update kslate_meta set value = $1 where key = 'cursor_key'`, [key]);
  await Promise.all([a.end(), b.end()]);
}, 120_000);

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await Promise.all([direct?.close(), sdk?.close()]);
});

const TIMESTAMP = /\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)/g;
/** Transaction and checkpoint ids: random UUIDs. */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
const BOTH = 'application/json, text/event-stream';
const MCP_HEADERS = { 'content-type': 'application/json', accept: BOTH, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };

interface Answer {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/**
 * What must be equal: Date and session ids are not the gateway's choice; timestamps are each
 * database's clock and transaction ids random (both have a fixed length, so Content-Length
 * still compares).
 */
function comparable(a: Answer): Answer {
  const headers = { ...a.headers };
  delete headers.date;
  if (headers['mcp-session-id']) headers['mcp-session-id'] = '<session>';
  return { status: a.status, headers, body: a.body.replace(TIMESTAMP, '<ts>').replace(UUID, '<uuid>') };
}

async function answer(res: Response): Promise<Answer> {
  const headers: Record<string, string> = {};
  res.headers.forEach((value, name) => (headers[name] = value));
  return { status: res.status, headers, body: await res.text() };
}

let rid = 0;

interface Send {
  /** A JSON-RPC message (sent as its JSON), or the body text as it is. */
  body?: unknown;
  text?: string;
  /** Headers instead of the SDK's three; a function of the gateway for per-gateway values (a session id). */
  headers?: Record<string, string> | ((g: TestGateway) => Record<string, string>);
  who?: string | null;
  path?: string;
  method?: string;
}

/**
 * Send the same request to both gateways (the direct one first), assert the same answer, and
 * that the direct gateway took the direct path (`route: 'direct'`: no SDK transport) or the
 * SDK's (`'sdk'`: one transport request, as on the other gateway); `'none'` is answered before
 * any MCP method (credentials, the body limit). Returns the direct gateway's answer.
 */
async function same(route: 'direct' | 'sdk' | 'none', req: Send): Promise<Answer> {
  const id = `d-${++rid}`;
  const send = async (g: TestGateway) => {
    const headers = typeof req.headers === 'function' ? req.headers(g) : (req.headers ?? MCP_HEADERS);
    const who = req.who === undefined ? 'alice' : req.who;
    const before = viaSdk.mock.calls.length;
    const res = await fetch(`${g.url}${req.path ?? '/mcp'}`, {
      method: req.method ?? 'POST',
      headers: { ...headers, 'x-request-id': id, ...(who !== null ? { authorization: `Bearer ${KEYS[who] ?? who}` } : {}) },
      ...((req.method ?? 'POST') === 'POST' ? { body: req.text ?? JSON.stringify(req.body) } : {}),
    });
    const a = await answer(res);
    return { a, transports: viaSdk.mock.calls.length - before };
  };
  const d = await send(direct);
  const s = await send(sdk);
  expect(comparable(d.a), JSON.stringify(req.body ?? req.text)?.slice(0, 300)).toEqual(comparable(s.a));
  expect(d.a.headers['x-request-id']).toBe(id);
  if (route === 'direct') expect(d.transports, 'the direct gateway answered through the SDK').toBe(0);
  if (route === 'sdk') expect(d.transports, 'the direct gateway did not hand this POST to the SDK').toBe(1);
  if (route !== 'none') expect(s.transports).toBe(1);
  return d.a;
}

let callId = 0;
const call = (name: string, args?: unknown, extra: Record<string, unknown> = {}) => ({
  jsonrpc: '2.0',
  id: ++callId,
  method: 'tools/call',
  params: { name, ...(args !== undefined ? { arguments: args } : {}) },
  ...extra,
});

/** The tool result of a direct answer. */
const result = (a: Answer) => (JSON.parse(a.body) as { result: { isError?: boolean; structuredContent: any } }).result;

describe('the common tools/call: the direct path, the same answer', () => {
  test('every tool, successes and rejections', async () => {
    const put = result(await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'title', value: 'disk', expected_version: 0 }) }));
    expect(put.isError).toBeUndefined();
    expect(put.structuredContent).toMatchObject({ record: 'incident/a1', field: 'title', version: 1 });
    const stale = result(await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'title', value: 'x', expected_version: 0 }) }));
    expect(stale).toMatchObject({ isError: true, structuredContent: { error: 'STALE' } });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'title', value: 'y', expected_version: 1, dry_run: true }) });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'status', value: 'open', expected_version: 0, idempotency_key: 'k-1' }) });
    const replay = await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'status', value: 'open', expected_version: 0, idempotency_key: 'k-1' }) });
    expect(replay.body).toContain('kslate/idempotent-replayed');
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'status', value: 'closed', expected_version: 1, idempotency_key: 'k-1' }) });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'title', value: 'z', expected_version: 1, colour: 'red' }) });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'severity', value: 'high', expected_version: 0 }) });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', field: 'severity', value: 2, expected_version: 0 }), who: 'bob' });
    await same('direct', { body: call('svc_put', { record: 'incident/BAD', field: 'title', value: 'x', expected_version: 0 }) });
    await same('direct', { body: call('svc_put', { record: 'nope/a1', field: 'title', value: 'x', expected_version: 0 }) });
    await same('direct', { body: call('svc_put', { field: 'title', value: 'x' }) });
    await same('direct', { body: call('svc_put', { record: 'incident/a1', value: 'x' }) });

    await same('direct', { body: call('svc_get', { record: 'incident/a1' }) });
    await same('direct', { body: call('svc_get', { record: 'incident/a1', fields: ['title', 'status'] }) });
    await same('direct', { body: call('svc_get', { record: 'incident/a1', fields: ['severity'] }), who: 'bob' });
    await same('direct', { body: call('svc_get', { record: 'incident/none' }) });
    await same('direct', { body: call('svc_get', { record: 'incident/a1', min_lsn: 'not-an-lsn' }) });
    await same('direct', { body: call('svc_get', { record: 'incident/a1', bogus: 1 }) });

    await same('direct', { body: call('svc_append', { record: 'incident/a1', field: 'notes', entry: { text: 'paged' }, evidence: 'pager' }) });
    await same('direct', { body: call('svc_append', { record: 'incident/a1', field: 'notes', entry: { text: 'ack' }, evidence: 'slack' }) });
    await same('direct', { body: call('svc_append', { record: 'incident/a1', field: 'notes', entry: { text: 'no source' } }) });
    await same('direct', { body: call('svc_get', { record: 'incident/a1', fields: ['notes'], entries_limit: 1 }) });

    await same('direct', { body: call('svc_claim', { record: 'tasks/t1', field: 'job', lease_seconds: 120, invocation: { run: 'a' } }) });
    await same('direct', { body: call('svc_claim', { record: 'tasks/t1', field: 'job' }), who: 'bob' });
    await same('direct', { body: call('svc_claim', { record: 'tasks/t1', field: 'job', renew: true }) });
    await same('direct', { body: call('svc_claim', { record: 'tasks/t1', field: 'chore' }) });

    await same('direct', {
      body: call('svc_transaction', {
        record: 'tasks/t2',
        evidence: 'why',
        writes: [
          { op: 'put', field: 'title', value: 'a', expected_version: 0 },
          { op: 'append', field: 'notes', entry: { k: 1 } },
          { op: 'claim', field: 'job', lease_seconds: 30 },
        ],
      }),
    });
    await same('direct', { body: call('svc_transaction', { record: 'tasks/t2', writes: [{ op: 'put', field: 'title', value: 'b', expected_version: 0 }] }) });
    await same('direct', { body: call('svc_transaction', { record: 'tasks/t2', writes: 'all' }) });

    await same('direct', { body: call('svc_checkpoint', { record: 'incident/a1', action: 'save', document: { summary: 's', next_steps: 'n' } }) });
    await same('direct', { body: call('svc_checkpoint', { record: 'incident/a1', action: 'load' }) });
    await same('direct', { body: call('svc_checkpoint', { record: 'incident/a1', action: 'undo' }) });

    for (let i = 0; i < 3; i++) await same('direct', { body: call('svc_put', { record: `incident/q${i}`, field: 'status', value: 'open', expected_version: 0 }) });
    const page = result(await same('direct', { body: call('svc_query', { class: 'incident', filters: { status: 'open' }, limit: 2 }) }));
    expect(page.structuredContent.next_after).toEqual(expect.any(String));
    await same('direct', { body: call('svc_query', { class: 'incident', filters: { status: 'open' }, limit: 2, after: page.structuredContent.next_after }) });
    await same('direct', { body: call('svc_query', { class: 'incident', filters: { severity: { deep: [1] } } }) });
    await same('direct', { body: call('svc_query', { class: 'incident', filters: 'status=open' }) });
  });

  test('protocol errors: an unknown tool, params that do not match the tools/call schema', async () => {
    const unknown = await same('direct', { body: call('svc_delete', { record: 'incident/a1' }) });
    expect(JSON.parse(unknown.body).error.code).toBe(-32602);
    await same('direct', { body: { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { arguments: {} } } });
    await same('direct', { body: { jsonrpc: '2.0', id: 8, method: 'tools/call', params: { name: 42 } } });
    await same('direct', { body: call('svc_get', ['incident/a1']) });
    await same('direct', { body: call('svc_get', 'incident/a1') });
    await same('direct', { body: { jsonrpc: '2.0', id: 9, method: 'tools/call' } });
    await same('direct', { body: { jsonrpc: '2.0', id: 10, method: 'tools/call', params: { name: 'svc_get', arguments: { record: 'incident/a1' }, _meta: { progressToken: 'p' } } } });
  });

  test('ids: strings, zero, large numbers are echoed as the SDK echoes them', async () => {
    await same('direct', { body: { ...call('svc_get', { record: 'incident/a1' }), id: 'req-α' } });
    await same('direct', { body: { ...call('svc_get', { record: 'incident/a1' }), id: '' } });
    await same('direct', { body: { ...call('svc_get', { record: 'incident/a1' }), id: 0 } });
    await same('direct', { body: { ...call('svc_get', { record: 'incident/a1' }), id: Number.MAX_SAFE_INTEGER } });
    await same('direct', { body: { ...call('svc_get', { record: 'incident/a1' }), id: -3 } });
  });

  test('odd arguments: a __proto__ key, unknown params keys, a deeply nested value', async () => {
    await same('direct', {
      text: `{"jsonrpc":"2.0","id":77,"method":"tools/call","params":{"name":"svc_put","arguments":{"record":"incident/p1","field":"blob","value":{"__proto__":{"x":1},"y":2},"expected_version":0,"__proto__":{"z":3}}}}`,
    });
    await same('direct', { body: call('svc_get', { record: 'incident/p1' }) });
    await same('direct', { body: { jsonrpc: '2.0', id: 78, method: 'tools/call', params: { name: 'svc_get', arguments: { record: 'incident/p1' }, extra: true } } });
    const deep = `${'['.repeat(5000)}1${']'.repeat(5000)}`;
    await same('direct', {
      text: `{"jsonrpc":"2.0","id":79,"method":"tools/call","params":{"name":"svc_put","arguments":{"record":"incident/p2","field":"blob","value":${deep},"expected_version":0}}}`,
    });
    await same('direct', {
      text: `{"jsonrpc":"2.0","id":80,"method":"tools/call","params":{"name":"svc_query","arguments":{"class":"incident","filters":{"blob":${deep}}}}}`,
    });
  });

  test('the SDK\'s own Client: initialize and list through the SDK, tool calls direct, the same bytes', async () => {
    const record = async (g: TestGateway) => {
      const seen: Answer[] = [];
      const recording: typeof fetch = async (input, init) => {
        const res = await fetch(input, init);
        const a = await answer(res.clone());
        seen.push({ ...a, headers: { ...a.headers, method: init?.method ?? 'GET' } });
        return res;
      };
      const client = new Client({ name: 'kslate-direct', version: '0.0.0' });
      clients.push(client);
      await client.connect(
        new StreamableHTTPClientTransport(new URL(`${g.url}/mcp`), {
          requestInit: { headers: { authorization: `Bearer ${KEYS.alice}`, 'x-request-id': 'via-client' } },
          fetch: recording,
        }),
      );
      await client.listTools();
      const before = viaSdk.mock.calls.length;
      await client.callTool({ name: 'svc_put', arguments: { record: 'incident/c1', field: 'title', value: 'via client', expected_version: 0 } });
      await client.callTool({ name: 'svc_get', arguments: { record: 'incident/c1' } });
      await client.callTool({ name: 'svc_put', arguments: { record: 'incident/c1', field: 'title', value: 'again', expected_version: 0 } });
      const err = await client.callTool({ name: 'svc_nothing', arguments: {} }).catch((e: Error) => e.message);
      expect(err).toMatch(/Unknown tool/);
      const transports = viaSdk.mock.calls.length - before;
      await client.close();
      return { seen: seen.map(comparable), transports };
    };
    const d = await record(direct);
    const s = await record(sdk);
    expect(d.seen).toEqual(s.seen);
    expect(d.seen.length).toBeGreaterThanOrEqual(7);
    expect(d.transports).toBe(0);
    expect(s.transports).toBe(4);
  });
});

describe('every other POST: the SDK, as before', () => {
  test('other methods, initialize, notifications, batches', async () => {
    await same('sdk', { body: { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 2, method: 'ping' } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 3, method: 'resources/list', params: {} } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 4, method: 'no/such', params: {} } });
    await same('sdk', {
      body: {
        jsonrpc: '2.0',
        id: 5,
        method: 'initialize',
        params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
      },
    });
    await same('sdk', { body: { jsonrpc: '2.0', method: 'notifications/initialized' } });
    // tools/call without an id is a notification: 202, and nothing runs.
    await same('sdk', { body: { jsonrpc: '2.0', method: 'tools/call', params: { name: 'svc_put', arguments: { record: 'incident/n1', field: 'title', value: 'x', expected_version: 0 } } } });
    await same('direct', { body: call('svc_get', { record: 'incident/n1' }) });
    // The SDK runs a batch's messages at once, in no set order (JSON-RPC allows it), so the
    // batch's get reads a record its put does not touch: a get of incident/b1 here raced the
    // put and answered NOT_FOUND on one gateway and the value on the other.
    await same('sdk', { body: [call('svc_put', { record: 'incident/b1', field: 'title', value: 'x', expected_version: 0 }), call('svc_get', { record: 'incident/n1' })] });
    await same('sdk', { body: [call('svc_get', { record: 'incident/b1' })] });
    await same('sdk', { body: [call('svc_get', { record: 'incident/b1' }), { jsonrpc: '2.0', method: 'notifications/initialized' }] });
    await same('sdk', { body: [] });
    await same('sdk', { body: Array.from({ length: 101 }, () => call('svc_get', { record: 'incident/b1' })) });
  });

  test('malformed messages', async () => {
    await same('sdk', { text: '{"jsonrpc":"2.0","id":1,"method":"tools/call",' });
    await same('sdk', { text: '' });
    await same('sdk', { body: null });
    await same('sdk', { body: 'tools/call' });
    await same('sdk', { body: { ...call('svc_get', { record: 'incident/a1' }), jsonrpc: '1.0' } });
    await same('sdk', { body: { ...call('svc_get', { record: 'incident/a1' }), id: null } });
    await same('sdk', { body: { ...call('svc_get', { record: 'incident/a1' }), id: 1.5 } });
    await same('sdk', { body: { ...call('svc_get', { record: 'incident/a1' }), id: { n: 1 } } });
    await same('sdk', { body: { ...call('svc_get', { record: 'incident/a1' }), extra: 1 } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: null } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: [1] } });
    await same('sdk', { body: { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'svc_get', _meta: { progressToken: { no: 1 } } } } });
  });

  test('tasks: a task-augmented call and a related task', async () => {
    await same('sdk', { body: { ...call('svc_get'), params: { name: 'svc_get', arguments: { record: 'incident/a1' }, task: { ttl: 1000 } } } });
    await same('sdk', {
      body: { ...call('svc_get'), params: { name: 'svc_get', arguments: { record: 'incident/a1' }, _meta: { 'io.modelcontextprotocol/related-task': { taskId: 't-1' } } } },
    });
  });

  test('headers the SDK refuses, or accepts otherwise than the common POST', async () => {
    const get = call('svc_get', { record: 'incident/a1' });
    const h = (over: Record<string, string | undefined>) => {
      const out: Record<string, string> = {};
      for (const [k, v] of Object.entries({ ...MCP_HEADERS, ...over })) if (v !== undefined) out[k] = v;
      return out;
    };
    await same('sdk', { body: get, headers: h({ accept: 'application/json' }) });
    await same('sdk', { body: get, headers: h({ accept: 'text/event-stream' }) });
    await same('sdk', { body: get, headers: h({ accept: undefined }) });
    await same('sdk', { body: get, headers: h({ accept: '*/*' }) });
    await same('sdk', { body: get, headers: h({ 'content-type': 'text/plain' }) });
    await same('sdk', { body: get, headers: h({ 'content-type': 'text/plain; a=application/json' }) });
    await same('sdk', { body: get, headers: h({ 'content-type': 'application/json; charset=utf-8' }) });
    await same('sdk', { body: get, headers: h({ 'content-type': 'Application/JSON' }) });
    await same('sdk', { body: get, headers: h({ 'mcp-protocol-version': '1999-01-01' }) });
    await same('sdk', { body: get, headers: h({ 'mcp-protocol-version': '' }) });
    await same('sdk', { body: get, headers: h({ 'mcp-protocol-version': undefined }) });
    await same('direct', { body: get, headers: h({ 'mcp-protocol-version': '2025-03-26' }) });
    await same('direct', { body: get, headers: h({ accept: 'text/event-stream, application/json;q=0.9' }) });
    await same('sdk', { body: get, headers: h({ 'mcp-session-id': 'some-session' }) });
  });

  test('before any MCP method: credentials, the body limit, GET and DELETE', async () => {
    const get = call('svc_get', { record: 'incident/a1' });
    await same('none', { body: get, who: null });
    await same('none', { body: get, who: 'not-a-key' });
    const big = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"svc_put","arguments":{"record":"incident/a1","field":"blob","value":"${'x'.repeat(MAX_MCP_BODY_BYTES)}"}}}`;
    await same('none', { text: big });
    await same('none', { method: 'GET' });
    await same('none', { method: 'DELETE' });
  });

  test('MCP sessions (/mcp/session): the SDK on both', async () => {
    const init = {
      jsonrpc: '2.0',
      id: 1,
      method: 'initialize',
      params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
    };
    const sessions = new Map<TestGateway, string>();
    const opened = await same('sdk', { path: '/mcp/session', body: init });
    expect(opened.headers['mcp-session-id']).toEqual(expect.any(String));
    // `same` sent both initializes; learn each gateway's session id by opening one more on each.
    for (const g of [direct, sdk]) {
      const res = await fetch(`${g.url}/mcp/session`, {
        method: 'POST',
        headers: { ...MCP_HEADERS, authorization: `Bearer ${KEYS.alice}` },
        body: JSON.stringify(init),
      });
      await res.text();
      sessions.set(g, res.headers.get('mcp-session-id')!);
    }
    const withSession = (g: TestGateway) => ({ ...MCP_HEADERS, 'mcp-session-id': sessions.get(g)! });
    await same('sdk', { path: '/mcp/session', headers: withSession, body: call('svc_put', { record: 'incident/s1', field: 'title', value: 's', expected_version: 0 }) });
    await same('sdk', { path: '/mcp/session', headers: withSession, body: call('svc_nothing', {}) });
    await same('none', { path: '/mcp/session', body: call('svc_get', { record: 'incident/s1' }) });
    await same('none', { path: '/mcp/session', headers: { ...MCP_HEADERS, 'mcp-session-id': 'unknown' }, body: call('svc_get', { record: 'incident/s1' }) });
  });
});
