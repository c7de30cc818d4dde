/**
 * MCP servers are pooled (runtime/mcp/server.ts): a server serves one POST at a time and is
 * reused for the next, with that request's identity and scope. Concurrent calls from
 * different identities must each act as their own caller, and a server last used by one
 * identity must not lend it to the next.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { afterAll, beforeAll, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';

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
