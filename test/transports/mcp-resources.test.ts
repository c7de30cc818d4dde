/**
 * MCP resources (issue 16, discovery; docs/mcp.md "Resources") against a real gateway and
 * PostgreSQL, read with the SDK's own Client: a class, a record and a history are exactly the
 * HTTP bodies for the same identity and scope, and a refusal is a JSON-RPC error carrying the
 * spec's code in its message and the HTTP error body as its data.
 */
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, McpError } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { audited, incident } from '../fixtures/classes.js';
import { KEYS, startTestGateway, type TestGateway } from '../setup/gateway.js';
import { MAX_RESOURCE_URI_BYTES } from '../../runtime/http/mcp/resources.js';
import { TOOL_LIST } from '../../runtime/http/mcp/tools.js';

let t: TestGateway;
const clients: Client[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident, audited]);
  // A record with fields bob (reviewer: title, status, notes) may and may not read, and one
  // alice may write but not read (secret).
  const put = async (field: string, value: unknown, expected: number, evidence?: string) => {
    const r = await t.call('alice', 'PUT', `/v1/records/incident/r1/fields/${field}`, { value, expected_version: expected, ...(evidence ? { evidence } : {}) });
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  };
  await put('title', 'db outage', 0);
  await put('severity', 2, 0);
  await put('status', 'open', 0);
  await put('severity', 3, 1);
  await put('secret', 'hunter2', 0);
  await put('status', 'investigating', 1);
  const n = await t.call('alice', 'POST', '/v1/records/incident/r1/fields/notes/entries', { entry: { text: 'paged' }, evidence: 'pager' });
  expect(n.status).toBeLessThan(300);
  await put('title', 'db outage (eu)', 1);
  const a = await t.call('alice', 'PUT', '/v1/records/audited/a1/fields/decision', { value: 'ok', expected_version: 0, evidence: 'review' });
  expect(a.status).toBeLessThan(300);
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close().catch(() => undefined)));
  await t?.close();
});

async function connect(who: string, scope?: string): Promise<Client> {
  const headers: Record<string, string> = { authorization: `Bearer ${KEYS[who]}` };
  if (scope) headers['x-svc-scope'] = scope;
  const client = new Client({ name: 'kslate-resources-test', version: '0.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${t.url}/mcp`), { requestInit: { headers } }));
  clients.push(client);
  return client;
}

/** One resource read: its single JSON content, parsed (checks uri and mimeType). */
async function read(client: Client, uri: string): Promise<any> {
  const res = await client.readResource({ uri });
  expect(res.contents).toHaveLength(1);
  const [c] = res.contents as { uri: string; mimeType?: string; text?: string }[];
  expect(c.uri).toBe(uri);
  expect(c.mimeType).toBe('application/json');
  expect(typeof c.text).toBe('string');
  return JSON.parse(c.text!);
}

/** A refused read: the McpError the SDK client throws, with the JSON-RPC code and the body. */
async function refused(client: Client, uri: string): Promise<{ code: number; message: string; body: any }> {
  try {
    await client.readResource({ uri });
  } catch (e) {
    expect(e).toBeInstanceOf(McpError);
    const err = e as McpError;
    return { code: err.code, message: err.message, body: err.data };
  }
  throw new Error(`${uri} was read, expected a refusal`);
}

/** What HTTP answers `who` for the same path (and scope). */
async function http(who: string, path: string, scope?: string) {
  return t.call(who, 'GET', path, undefined, scope ? { 'x-svc-scope': scope } : {});
}

describe('listing', () => {
  test('resources/list gives one resource per class the caller may see, as GET /v1/classes decides', async () => {
    for (const who of ['alice', 'bob', 'dave']) {
      const client = await connect(who);
      const { resources } = await client.listResources();
      const classes = (await http(who, '/v1/classes')).body.classes.map((c: { name: string }) => c.name);
      expect(resources.map((r) => r.name), who).toEqual(classes);
      for (const r of resources) {
        expect(r.uri).toBe(`kslate://classes/${r.name}`);
        expect(r.mimeType).toBe('application/json');
        expect(r.description).toContain(`GET /v1/classes/${r.name}`);
      }
    }
    // alice has roles in both, bob only in incident, dave in none.
    expect((await (await connect('alice')).listResources()).resources.map((r) => r.name)).toEqual(['audited', 'incident']);
    expect((await (await connect('bob')).listResources()).resources.map((r) => r.name)).toEqual(['incident']);
    expect((await (await connect('dave')).listResources()).resources).toEqual([]);
  });

  test('resources/templates/list gives the record and history templates', async () => {
    const client = await connect('bob');
    const { resourceTemplates } = await client.listResourceTemplates();
    expect(resourceTemplates.map((r) => [r.name, r.uriTemplate, r.mimeType])).toEqual([
      ['record', 'kslate://records/{class}/{id}', 'application/json'],
      ['record-history', 'kslate://records/{class}/{id}/history', 'application/json'],
    ]);
  });

  test('the server declares resources without subscribe or listChanged, and the six tools are unchanged (svc_transaction added beside them, issue 33)', async () => {
    const client = await connect('alice');
    expect(client.getServerCapabilities()?.resources).toEqual({});
    expect(client.getServerCapabilities()?.tools).toEqual({});
    const { tools } = await client.listTools();
    expect(tools).toEqual(TOOL_LIST);
    expect(tools.map((x) => x.name).sort()).toEqual(['svc_append', 'svc_checkpoint', 'svc_claim', 'svc_get', 'svc_put', 'svc_query', 'svc_transaction']);
  });
});

describe('reading: the contents are the HTTP body for the same identity', () => {
  test('a class', async () => {
    for (const who of ['alice', 'bob']) {
      const body = await read(await connect(who), 'kslate://classes/incident');
      expect(body, who).toEqual((await http(who, '/v1/classes/incident')).body);
      expect(body.fields.status.enum).toEqual(['open', 'investigating', 'resolved']);
      expect(Object.keys(body.roles).sort()).toEqual(['responder', 'reviewer']);
    }
    expect(await read(await connect('alice'), 'kslate://classes/audited')).toEqual((await http('alice', '/v1/classes/audited')).body);
  });

  test('a record, with the fields outside the read scope left out exactly as in GET', async () => {
    const alice = await read(await connect('alice'), 'kslate://records/incident/r1');
    const bob = await read(await connect('bob'), 'kslate://records/incident/r1');
    expect(alice).toEqual((await http('alice', '/v1/records/incident/r1')).body);
    expect(bob).toEqual((await http('bob', '/v1/records/incident/r1')).body);
    expect(Object.keys(alice.fields).sort()).toEqual(['notes', 'severity', 'status', 'title']); // secret: written, not readable
    expect(Object.keys(bob.fields).sort()).toEqual(['notes', 'status', 'title']);
    expect(bob.fields.title.value).toBe('db outage (eu)');
    expect(bob.record_version).toBe(alice.record_version);
  });

  test("the query parameters of GET work on a record's URI", async () => {
    const client = await connect('alice');
    for (const q of ['?fields=severity,status', '?entries_limit=0', '?fields=title']) {
      expect(await read(client, `kslate://records/incident/r1${q}`), q).toEqual((await http('alice', `/v1/records/incident/r1${q}`)).body);
    }
  });

  test('a history, newest page, with rows of unreadable fields left out exactly as in GET .../history', async () => {
    const alice = await read(await connect('alice'), 'kslate://records/incident/r1/history');
    const bob = await read(await connect('bob'), 'kslate://records/incident/r1/history');
    expect(alice).toEqual((await http('alice', '/v1/records/incident/r1/history')).body);
    expect(bob).toEqual((await http('bob', '/v1/records/incident/r1/history')).body);
    const fieldsOf = (h: { history: { field: string }[] }) => [...new Set(h.history.map((r) => r.field))].sort();
    expect(fieldsOf(alice)).toEqual(['notes', 'severity', 'status', 'title']);
    expect(fieldsOf(bob)).toEqual(['notes', 'status', 'title']);
    expect(alice.history.length).toBeGreaterThan(bob.history.length);
  });

  test('history pages with limit and before, and a field filter, as on HTTP', async () => {
    const client = await connect('alice');
    let before: string | undefined;
    const seen: number[] = [];
    for (let page = 0; page < 20; page++) {
      const q = `?limit=2${before ? `&before=${encodeURIComponent(before)}` : ''}`;
      const body = await read(client, `kslate://records/incident/r1/history${q}`);
      expect(body, q).toEqual((await http('alice', `/v1/records/incident/r1/history${q}`)).body);
      seen.push(...body.history.map((r: { seq: number }) => r.seq));
      before = body.next_before;
      if (!before) break;
    }
    const all = (await http('alice', '/v1/records/incident/r1/history')).body.history.map((r: { seq: number }) => r.seq);
    expect(seen).toEqual(all);
    expect(seen.length).toBeGreaterThan(2);
    const status = await read(client, 'kslate://records/incident/r1/history?field=status');
    expect(status).toEqual((await http('alice', '/v1/records/incident/r1/history?field=status')).body);
    expect(status.history.map((r: { field: string }) => r.field)).toEqual(['status', 'status']);
  });

  test('a scope: reads under the caller’s X-Svc-Scope are its reads (the same answer as HTTP with the header)', async () => {
    const scope = `res-scope-${Date.now()}`;
    const body = await read(await connect('alice', scope), 'kslate://records/incident/r1');
    expect(body).toEqual((await http('alice', '/v1/records/incident/r1', scope)).body);
  });

  test('a record read as a resource under X-Svc-Scope counts as a read of that scope: a later put infers it as a premise', async () => {
    const scope = `res-infer-${Date.now()}`;
    const w = await t.call('alice', 'PUT', '/v1/records/incident/inf/fields/severity', { value: 1, expected_version: 0 });
    expect(w.status).toBe(201);
    await read(await connect('alice', scope), 'kslate://records/incident/inf?fields=severity');
    const put = await t.call('alice', 'PUT', '/v1/records/incident/inf/fields/status', { value: 'open', expected_version: 0 }, { 'x-svc-scope': scope });
    expect(put.status, JSON.stringify(put.body)).toBe(200);
    const got = await http('alice', '/v1/records/incident/inf?fields=status');
    expect(got.body.fields.status.based_on).toEqual([{ field: 'severity', version: 1, inferred: true }]);
  });

  test('a pooled server answers each caller with that caller’s role', async () => {
    const alice = await connect('alice');
    const bob = await connect('bob');
    const reads = await Promise.all(
      Array.from({ length: 40 }, (_, i) => read(i % 2 === 0 ? alice : bob, 'kslate://records/incident/r1').then((b) => [i, b] as const)),
    );
    for (const [i, b] of reads) expect('severity' in b.fields, `read ${i}`).toBe(i % 2 === 0);
  });
});

describe('refusals: a JSON-RPC error with the code in its message and the HTTP body as data', () => {
  const cases: [string, string, string, string, number][] = [
    // who, uri, HTTP path, code, JSON-RPC code
    ['alice', 'kslate://classes/nope', '/v1/classes/nope', 'NOT_FOUND', -32002],
    ['alice', 'kslate://records/nope/x', '/v1/records/nope/x', 'NOT_FOUND', -32002],
    ['alice', 'kslate://records/incident/never', '/v1/records/incident/never', 'NOT_FOUND', -32002],
    ['alice', 'kslate://records/incident/never/history', '/v1/records/incident/never/history', 'NOT_FOUND', -32002],
    ['bob', 'kslate://classes/audited', '/v1/classes/audited', 'NO_ROLE', -32000],
    ['bob', 'kslate://records/audited/a1', '/v1/records/audited/a1', 'NO_ROLE', -32000],
    ['dave', 'kslate://records/incident/r1/history', '/v1/records/incident/r1/history', 'NO_ROLE', -32000],
    ['bob', 'kslate://records/incident/r1?fields=severity', '/v1/records/incident/r1?fields=severity', 'SCOPE_DENIED', -32000],
    ['bob', 'kslate://records/incident/r1/history?field=severity', '/v1/records/incident/r1/history?field=severity', 'SCOPE_DENIED', -32000],
    ['alice', 'kslate://records/incident/BAD_ID', '/v1/records/incident/BAD_ID', 'MALFORMED', -32602],
    ['alice', 'kslate://records/incident/a%2Fb', '/v1/records/incident/a%2Fb', 'MALFORMED', -32602],
    ['alice', 'kslate://records/incident/r1/history?limit=0', '/v1/records/incident/r1/history?limit=0', 'MALFORMED', -32602],
    ['alice', 'kslate://records/incident/r1/history?before=forged', '/v1/records/incident/r1/history?before=forged', 'MALFORMED', -32602],
    ['alice', 'kslate://records/incident/r1?colour=red', '/v1/records/incident/r1?colour=red', 'MALFORMED', -32602],
    ['alice', 'kslate://classes/incident?x=1', '/v1/classes/incident?x=1', 'MALFORMED', -32602],
  ];
  test.each(cases)('%s reads %s: %s', async (who, uri, path, code, rpcCode) => {
    const r = await refused(await connect(who), uri);
    const h = await http(who, path);
    expect(h.body.error).toBe(code);
    expect(r.code).toBe(rpcCode);
    expect(r.body).toEqual(h.body);
    expect(r.message).toContain(`${code}: ${h.body.message}`);
  });

  test('an X-Svc-Scope that belongs to another identity is IDENTITY_MISMATCH, as on HTTP', async () => {
    const scope = `owned-${Date.now()}`;
    expect((await http('alice', '/v1/records/incident/r1', scope)).status).toBe(200);
    const r = await refused(await connect('bob', scope), 'kslate://records/incident/r1');
    const h = await http('bob', '/v1/records/incident/r1', scope);
    expect(h.body.error).toBe('IDENTITY_MISMATCH');
    expect(r.body).toEqual(h.body);
    expect(r.code).toBe(-32000);
    expect(r.message).toContain('IDENTITY_MISMATCH: ');
    const hist = await refused(await connect('bob', scope), 'kslate://records/incident/r1/history');
    expect(hist.body).toEqual((await http('bob', '/v1/records/incident/r1/history', scope)).body);
  });

  test('a URI no resource answers to is NOT_FOUND (-32002), like an unroutable HTTP path', async () => {
    const client = await connect('alice');
    for (const uri of [
      'kslate://classes',
      'kslate://classes/incident/extra',
      'kslate://records/incident',
      'kslate://records/incident/r1/checkpoint',
      'kslate://records/incident/r1/history/more',
      'kslate://elsewhere/x',
      'https://example.com/classes/incident',
      'kslate://records/incident/r1#frag',
    ]) {
      const r = await refused(client, uri);
      expect(r.code, uri).toBe(-32002);
      expect(r.body, uri).toMatchObject({ error: 'NOT_FOUND' });
      expect(r.message).toContain('NOT_FOUND: No resource');
    }
  });

  test('an overlong URI and an invalid percent-encoding are MALFORMED', async () => {
    const client = await connect('alice');
    const long = await refused(client, `kslate://records/incident/r1?fields=${'a'.repeat(MAX_RESOURCE_URI_BYTES)}`);
    expect(long.code).toBe(-32602);
    expect(long.body).toMatchObject({ error: 'MALFORMED' });
    expect(long.body.message).toContain(String(MAX_RESOURCE_URI_BYTES));
    const bad = await refused(client, 'kslate://records/incident/%E0%A4%A');
    expect(bad.code).toBe(-32602);
    expect(bad.body.message).toContain('percent-encoding');
  });

  test('without a credential nothing is listed or read: 401 before any MCP method', async () => {
    const res = await fetch(`${t.url}/mcp`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/read', params: { uri: 'kslate://classes/incident' } }),
    });
    expect(res.status).toBe(401);
    expect(await res.json()).toMatchObject({ error: 'UNAUTHENTICATED' });
  });
});
