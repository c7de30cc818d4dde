/**
 * MCP servers are pooled (runtime/http/mcp/server.ts): a server serves one POST at a time and is
 * reused for the next, with that request's identity and scope. Concurrent calls from
 * different identities must each act as their own caller, and a server last used by one
 * identity must not lend it to the next.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { transportView } from '../../runtime/http/mcp/server.js';

let t: TestGateway;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident]);
});

afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await t?.close();
});

async function connect(who: string): Promise<Client> {
  const client = new Client({ name: `pool-${who}`, version: '0.0.0' });
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers: { authorization: `Bearer ${KEYS[who]}` } } }),
  );
  clients.push(client);
  return client;
}

test('60 concurrent tool calls from two identities each write as their caller', async () => {
  const alice = await connect('alice');
  const carol = await connect('carol');
  const calls = Array.from({ length: 60 }, (_, i) => {
    const who = i % 2 === 0 ? alice : carol;
    return who.callTool({ name: 'svc_put', arguments: { record: `incident/pool-${i}`, field: 'title', value: `v${i}`, expected_version: 0 } });
  });
  const results = await Promise.all(calls);
  expect(results.filter((r) => r.isError)).toEqual([]);
  for (let i = 0; i < 60; i++) {
    const got = await t.call('alice', 'GET', `/v1/records/incident/pool-${i}?fields=title`);
    expect(got.body.fields.title.author, `record ${i}`).toBe(i % 2 === 0 ? 'apikey:alice' : 'apikey:carol');
  }
});

test('a reused server answers the next caller with that caller\'s role, never the previous one\'s', async () => {
  const alice = await connect('alice');
  const bob = await connect('bob'); // reviewer: may not read severity
  await alice.callTool({ name: 'svc_put', arguments: { record: 'incident/pool-s', field: 'severity', value: 2, expected_version: 0 } });
  for (let i = 0; i < 10; i++) {
    const a = await alice.callTool({ name: 'svc_get', arguments: { record: 'incident/pool-s', fields: ['severity'] } });
    expect(a.isError).toBeFalsy();
    const b = await bob.callTool({ name: 'svc_get', arguments: { record: 'incident/pool-s', fields: ['severity'] } });
    expect(b.isError).toBe(true);
    expect((b.structuredContent as { error: string }).error).toBe('SCOPE_DENIED');
  }
});

/** A raw MCP POST over a real socket, as a client without the SDK sends it. */
async function post(headers: Record<string, string>, body: unknown): Promise<{ status: number; body: any }> {
  const res = await fetch(`${t.url}/mcp`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json', ...headers },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

const LIST = { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} };
const BOTH = 'application/json, text/event-stream';

// The transport gets a view of the request (runtime/http/mcp/server.ts, transportView): the headers
// it checks must still reach it.
test('the transport still checks Accept, Content-Type and MCP-Protocol-Version of a pooled POST', async () => {
  expect((await post({ accept: BOTH }, LIST)).status).toBe(200);
  const notAcceptable = await post({ accept: 'application/json' }, LIST);
  expect(notAcceptable.status).toBe(406);
  expect(notAcceptable.body.error.message).toMatch(/text\/event-stream/);
  const badVersion = await post({ accept: BOTH, 'mcp-protocol-version': '1999-01-01' }, LIST);
  expect(badVersion.status).toBe(400);
  expect(badVersion.body.error.message).toMatch(/Unsupported protocol version: 1999-01-01/);
});

test('closing pooled servers leaves Error.stackTraceLimit as it was', async () => {
  const before = Error.stackTraceLimit;
  const alice = await connect('alice');
  await Promise.all(Array.from({ length: 20 }, () => alice.callTool({ name: 'svc_get', arguments: { record: 'incident/pool-0' } })));
  await new Promise((r) => setTimeout(r, 20)); // the servers close on a later turn
  expect(Error.stackTraceLimit).toBe(before);
  expect(new Error('x').stack?.split('\n').length).toBeGreaterThan(1);
});

test('transportView lists only the headers the transport reads, and answers any by name', () => {
  const raw = new Request('http://x/mcp', {
    method: 'POST',
    headers: { accept: BOTH, 'content-type': 'application/json', authorization: 'Bearer secret', 'x-svc-scope': 's' },
  });
  const view = transportView(raw);
  expect(view.method).toBe('POST');
  expect(view.url).toBe('http://x/mcp');
  expect(Object.fromEntries((view.headers as unknown as Map<string, string>).entries())).toEqual({ accept: BOTH, 'content-type': 'application/json' });
  expect(view.headers.get('x-svc-scope')).toBe('s');
});
