/**
 * MCP resource subscriptions (issue 16; docs/mcp.md "Subscriptions") against a real gateway
 * and PostgreSQL, with the SDK's own Client and StreamableHTTPClientTransport on
 * /mcp/session: the client initializes (a session id), opens the GET event stream itself
 * after `notifications/initialized`, subscribes to a record and receives
 * `notifications/resources/updated` when another identity writes it over HTTP. The watch
 * handler's read scope decides what notifies; refusals are resources/read's; sessions and
 * subscriptions are capped and freed; /mcp stays stateless.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { LATEST_PROTOCOL_VERSION, McpError, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { incident } from '../fixtures/classes.js';
import { KEYS, quietLog, startTestGateway, type ClassInput, type TestGateway } from '../setup/gateway.js';
import { waitFor } from '../watch/sse.js';
import { CITUS } from '../setup/citus.js';

/**
 * On Citus (vitest.citus.config.ts) every subscribe's get and watch open go gateway ->
 * coordinator -> worker: on the loaded 2-core CI machine a subscribe took 65-100 ms there
 * against ~8 ms on plain PostgreSQL (a resources/read of one field 20-65 ms, of 1,300 names
 * about the same), so the slow-client case's 1,000 subscribes need more than a minute. On
 * plain PostgreSQL they outlasted 60 s too beside another suite (load average 7 on 2 cores).
 */

let t: TestGateway;
const open: Client[] = [];

beforeAll(async () => {
  t = await startTestGateway([incident], {
    extraArgs: ['--watch-poll-interval', '20ms', '--mcp-max-subscriptions', '3'],
  });
});
afterAll(async () => {
  await Promise.all(open.map((c) => c.close().catch(() => undefined)));
  await t?.close();
});

const hub = (g: TestGateway = t) => g.gw.services.watch;
let n = 0;
const fresh = () => `sub-${Date.now().toString(36)}-${n++}`;

interface Subscriber {
  client: Client;
  transport: StreamableHTTPClientTransport;
  /** The uris of every notifications/resources/updated received, in order. */
  updated: string[];
}

async function connect(who: string, opts: { url?: string; path?: string; scope?: string } = {}): Promise<Subscriber> {
  const headers: Record<string, string> = { authorization: `Bearer ${KEYS[who] ?? who}` };
  if (opts.scope) headers['x-svc-scope'] = opts.scope;
  const client = new Client({ name: 'kslate-subscribe-test', version: '0.0.0' });
  const updated: string[] = [];
  client.setNotificationHandler(ResourceUpdatedNotificationSchema, (msg) => {
    updated.push(msg.params.uri);
  });
  const transport = new StreamableHTTPClientTransport(new URL(`${opts.url ?? t.url}${opts.path ?? '/mcp/session'}`), { requestInit: { headers } });
  await client.connect(transport);
  open.push(client);
  return { client, transport, updated };
}

async function put(record: string, field: string, value: unknown, expected: number, g: TestGateway = t, who = 'carol') {
  const r = await g.call(who, 'PUT', `/v1/records/${record}/fields/${field}`, { value, expected_version: expected });
  expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
  return r.body;
}

async function read(client: Client, uri: string): Promise<any> {
  const res = await client.readResource({ uri });
  return JSON.parse((res.contents[0] as { text: string }).text);
}

async function refusal(p: Promise<unknown>): Promise<{ code: number; message: string; data: any }> {
  try {
    await p;
  } catch (e) {
    expect(e).toBeInstanceOf(McpError);
    const err = e as McpError;
    return { code: err.code, message: err.message, data: err.data };
  }
  throw new Error('expected a refusal');
}

const quiet = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function rawPost(url: string, body: unknown, headers: Record<string, string>): Promise<Response> {
  return fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers },
    body: JSON.stringify(body),
  });
}

const INITIALIZE = {
  jsonrpc: '2.0',
  id: 1,
  method: 'initialize',
  params: { protocolVersion: LATEST_PROTOCOL_VERSION, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
};

describe('subscribe', () => {
  test('a write by another identity notifies the subscriber with the uri; reading the resource shows the new value', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 'first', 0);
    const alice = await connect('alice');
    expect(alice.client.getServerCapabilities()?.resources?.subscribe).toBe(true);
    expect(alice.transport.sessionId).toMatch(/^[0-9a-f-]{36}$/);
    const uri = `kslate://records/incident/${id}`;
    const before = hub().open;
    await alice.client.subscribeResource({ uri });
    expect(hub().open).toBe(before + 1);

    await put(`incident/${id}`, 'title', 'second', 1);
    await waitFor(() => alice.updated.length > 0, 10_000, () => 'the notification');
    expect(alice.updated[0]).toBe(uri);
    const body = await read(alice.client, uri);
    expect(body.fields.title).toMatchObject({ value: 'second', version: 2, author: 'apikey:carol' });

    // Subscribing again is a no-op: one watch, one notification per change.
    await alice.client.subscribeResource({ uri });
    expect(hub().open).toBe(before + 1);
    alice.updated.length = 0;
    await put(`incident/${id}`, 'status', 'open', 0);
    await waitFor(() => alice.updated.length > 0, 10_000, () => 'the second notification');
    await quiet(200);
    expect(alice.updated).toEqual([uri]);
  });

  test('a change only to a field outside the role’s read scope does not notify; a readable one does', async () => {
    const id = fresh();
    const uri = `kslate://records/incident/${id}`;
    await put(`incident/${id}`, 'title', 't', 0);
    // bob (reviewer) reads title, status, notes: not severity. alice reads severity: the control.
    const bob = await connect('bob');
    const alice = await connect('alice');
    await bob.client.subscribeResource({ uri });
    await alice.client.subscribeResource({ uri });

    await put(`incident/${id}`, 'severity', 2, 0);
    await waitFor(() => alice.updated.length > 0, 10_000, () => 'alice’s notification of severity');
    await quiet(300);
    expect(bob.updated).toEqual([]);

    await put(`incident/${id}`, 'status', 'investigating', 0);
    await waitFor(() => bob.updated.length > 0, 10_000, () => 'bob’s notification of status');
    await quiet(200);
    expect(bob.updated).toEqual([uri]);
  });

  test('?fields=a,b on the uri: only changes of those fields notify', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 't', 0);
    const alice = await connect('alice');
    const control = `kslate://records/incident/${id}`;
    const only = `kslate://records/incident/${id}?fields=status`;
    await alice.client.subscribeResource({ uri: only });
    await alice.client.subscribeResource({ uri: control });
    await put(`incident/${id}`, 'title', 't2', 1);
    await waitFor(() => alice.updated.includes(control), 10_000, () => 'the control notification');
    await quiet(300);
    expect(alice.updated).not.toContain(only);
    await put(`incident/${id}`, 'status', 'open', 0);
    await waitFor(() => alice.updated.includes(only), 10_000, () => 'the status notification');
  });

  test('unsubscribe stops notifications and frees the watch', async () => {
    const a = fresh();
    const b = fresh();
    await put(`incident/${a}`, 'title', 'a', 0);
    await put(`incident/${b}`, 'title', 'b', 0);
    const alice = await connect('alice');
    const ua = `kslate://records/incident/${a}`;
    const ub = `kslate://records/incident/${b}`;
    await alice.client.subscribeResource({ uri: ua });
    await alice.client.subscribeResource({ uri: ub });
    const before = hub().open;
    await alice.client.unsubscribeResource({ uri: ua });
    expect(hub().open).toBe(before - 1);
    // Unsubscribing from what is not subscribed is a no-op.
    await alice.client.unsubscribeResource({ uri: ua });

    await put(`incident/${a}`, 'title', 'a2', 1);
    await put(`incident/${b}`, 'title', 'b2', 1);
    await waitFor(() => alice.updated.includes(ub), 10_000, () => 'the notification of the record still subscribed');
    await quiet(300);
    expect(alice.updated).not.toContain(ua);
  });
});

describe('refusals', () => {
  test('NO_ROLE, SCOPE_DENIED, NOT_FOUND and MALFORMED refuse the subscribe with resources/read’s JSON-RPC errors', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 't', 0);
    const dave = await connect('dave');
    const bob = await connect('bob');
    const alice = await connect('alice');
    const before = hub().open;
    const cases: [Subscriber, string, string, number][] = [
      [dave, `kslate://records/incident/${id}`, 'NO_ROLE', -32000],
      [bob, `kslate://records/incident/${id}?fields=severity`, 'SCOPE_DENIED', -32000],
      [alice, `kslate://records/incident/nothing-here-${id}`, 'NOT_FOUND', -32002],
      [alice, 'kslate://classes/incident', 'MALFORMED', -32602],
      [alice, `kslate://records/incident/${id}/history`, 'MALFORMED', -32602],
      [alice, 'kslate://nowhere', 'NOT_FOUND', -32002],
    ];
    for (const [who, uri, code, jsonrpc] of cases) {
      const err = await refusal(who.client.subscribeResource({ uri }));
      expect(err.code, uri).toBe(jsonrpc);
      expect(err.message, uri).toContain(`${code}:`);
      expect(err.data, uri).toMatchObject({ error: code });
    }
    // A refused read's answer is the same as resources/read's.
    const read = await refusal(dave.client.readResource({ uri: `kslate://records/incident/${id}` }));
    const sub = await refusal(dave.client.subscribeResource({ uri: `kslate://records/incident/${id}` }));
    expect(sub).toEqual(read);
    expect(hub().open).toBe(before);
  });

  test('X-Svc-Scope of another identity: IDENTITY_MISMATCH from the watch handler', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 't', 0);
    const scope = `sub-scope-${id}`;
    await t.call('carol', 'GET', `/v1/records/incident/${id}`, undefined, { 'x-svc-scope': scope });
    const alice = await connect('alice', { scope });
    const err = await refusal(alice.client.subscribeResource({ uri: `kslate://records/incident/${id}` }));
    expect(err.data).toMatchObject({ error: 'IDENTITY_MISMATCH' });
  });

  test('/mcp stays stateless: no subscribe capability, no session id, and resources/subscribe is not a method there', async () => {
    const stateless = await connect('alice', { path: '/mcp' });
    expect(stateless.client.getServerCapabilities()?.resources).toEqual({});
    expect(stateless.transport.sessionId).toBeUndefined();
    const res = await rawPost(
      `${t.url}/mcp`,
      { jsonrpc: '2.0', id: 3, method: 'resources/subscribe', params: { uri: 'kslate://records/incident/x' } },
      { authorization: `Bearer ${KEYS.alice}`, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    );
    expect(res.status).toBe(200);
    expect((await res.json()).error).toMatchObject({ code: -32601 });
    // And a stateless tool call answers as before.
    const call = await stateless.client.callTool({ name: 'svc_get', arguments: { record: 'incident/none-such' } });
    expect(call.isError).toBe(true);
  });

  test('/mcp/session: a request without a session id that is not initialize answers 400; an unknown or another identity’s session 404', async () => {
    const headers = { authorization: `Bearer ${KEYS.alice}`, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
    const list = { jsonrpc: '2.0', id: 2, method: 'resources/list', params: {} };
    const none = await rawPost(`${t.url}/mcp/session`, list, headers);
    expect(none.status).toBe(400);
    expect((await none.json()).error.message).toContain('Mcp-Session-Id');

    const unknown = await rawPost(`${t.url}/mcp/session`, list, { ...headers, 'mcp-session-id': '00000000-0000-4000-8000-000000000000' });
    expect(unknown.status).toBe(404);
    expect((await unknown.json()).error).toMatchObject({ code: -32001, message: 'Session not found' });

    const alice = await connect('alice');
    const sid = alice.transport.sessionId!;
    const ok = await rawPost(`${t.url}/mcp/session`, list, { ...headers, 'mcp-session-id': sid });
    expect(ok.status).toBe(200);
    const carol = await rawPost(`${t.url}/mcp/session`, list, { ...headers, authorization: `Bearer ${KEYS.carol}`, 'mcp-session-id': sid });
    expect(carol.status).toBe(404);
    // Without a credential, 401 before anything else, as on /mcp.
    expect((await fetch(`${t.url}/mcp/session`, { method: 'GET' })).status).toBe(401);
  });

  test('at most --mcp-max-subscriptions per session: one more is refused with UNAVAILABLE', async () => {
    const alice = await connect('alice');
    const ids = [fresh(), fresh(), fresh(), fresh()];
    for (const id of ids) await put(`incident/${id}`, 'title', 't', 0);
    for (const id of ids.slice(0, 3)) await alice.client.subscribeResource({ uri: `kslate://records/incident/${id}` });
    const err = await refusal(alice.client.subscribeResource({ uri: `kslate://records/incident/${ids[3]}` }));
    expect(err.code).toBe(-32000);
    expect(err.data).toMatchObject({ error: 'UNAVAILABLE' });
    expect(err.message).toContain('--mcp-max-subscriptions');
    await alice.client.unsubscribeResource({ uri: `kslate://records/incident/${ids[0]}` });
    await alice.client.subscribeResource({ uri: `kslate://records/incident/${ids[3]}` });
  });
});

describe('sessions', () => {
  let g: TestGateway;
  beforeAll(async () => {
    g = await startTestGateway([incident], {
      db: t.db,
      log: quietLog,
      extraArgs: ['--watch-poll-interval', '20ms', '--mcp-max-sessions', '2', '--mcp-session-idle', '500ms'],
    });
  });
  afterAll(async () => {
    await g?.close().catch(() => undefined);
  });
  test('at most --mcp-max-sessions per process: one more initialize answers 503 UNAVAILABLE; DELETE ends a session and frees its watch', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 't', 0, g);
    const a = await connect('alice', { url: g.url });
    const b = await connect('alice', { url: g.url });
    await a.client.subscribeResource({ uri: `kslate://records/incident/${id}` });
    expect(hub(g).open).toBe(1);
    const refused = await rawPost(`${g.url}/mcp/session`, INITIALIZE, { authorization: `Bearer ${KEYS.alice}` });
    expect(refused.status).toBe(503);
    const body = await refused.json();
    expect(body).toMatchObject({ error: 'UNAVAILABLE' });
    expect(body.message).toContain('--mcp-max-sessions');
    // /mcp does not count: it holds no session.
    const stateless = await rawPost(`${g.url}/mcp`, INITIALIZE, { authorization: `Bearer ${KEYS.alice}` });
    expect(stateless.status).toBe(200);
    expect(stateless.headers.get('mcp-session-id')).toBeNull();

    await a.transport.terminateSession();
    await waitFor(() => hub(g).open === 0, 5_000, () => 'the subscription’s watch to end');
    await b.transport.terminateSession();
    const again = await connect('alice', { url: g.url });
    expect(again.transport.sessionId).toBeDefined();
    await again.transport.terminateSession();
  });

  test('a client gone (its GET stream closed) frees its session and subscriptions after --mcp-session-idle; the session id then answers 404', async () => {
    const id = fresh();
    await put(`incident/${id}`, 'title', 't', 0, g);
    const a = await connect('alice', { url: g.url });
    await a.client.subscribeResource({ uri: `kslate://records/incident/${id}` });
    expect(hub(g).open).toBe(1);
    const sid = a.transport.sessionId!;
    await a.client.close();
    await waitFor(() => hub(g).open === 0, 5_000, () => `the gone client’s watch to end (open: ${hub(g).open})`);
    const res = await rawPost(
      `${g.url}/mcp/session`,
      { jsonrpc: '2.0', id: 2, method: 'resources/list', params: {} },
      { authorization: `Bearer ${KEYS.alice}`, 'mcp-session-id': sid, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    );
    expect(res.status).toBe(404);
  });

  test('a session lives on the replica that opened it: another replica answers its id with 404', async () => {
    const a = await connect('alice', { url: g.url });
    const res = await rawPost(
      `${t.url}/mcp/session`,
      { jsonrpc: '2.0', id: 2, method: 'resources/list', params: {} },
      { authorization: `Bearer ${KEYS.alice}`, 'mcp-session-id': a.transport.sessionId!, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION },
    );
    expect(res.status).toBe(404);
    await a.transport.terminateSession();
  });

  test('a change while no GET stream is open is owed: the stream, once opened, starts with its notification', async () => {
    // On the first gateway (the default --mcp-session-idle, 60 s): this one's 500 ms ended the
    // session before its GET stream opened when the put and the pause below took longer (a
    // Citus run at load average ~19 answered the GET 404), and idling is not what this checks.
    const open = hub(t).open;
    const id = fresh();
    const uri = `kslate://records/incident/${id}`;
    await put(`incident/${id}`, 'title', 't', 0, t);
    const base = { authorization: `Bearer ${KEYS.alice}` };
    const init = await rawPost(`${t.url}/mcp/session`, INITIALIZE, base);
    expect(init.status).toBe(200);
    const sid = init.headers.get('mcp-session-id')!;
    expect(sid).toBeTruthy();
    expect((await init.json()).result.capabilities.resources).toEqual({ subscribe: true });
    const headers = { ...base, 'mcp-session-id': sid, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
    expect((await rawPost(`${t.url}/mcp/session`, { jsonrpc: '2.0', method: 'notifications/initialized' }, headers)).status).toBe(202);
    const sub = await rawPost(`${t.url}/mcp/session`, { jsonrpc: '2.0', id: 2, method: 'resources/subscribe', params: { uri } }, headers);
    expect(await sub.json()).toMatchObject({ id: 2, result: {} });
    await put(`incident/${id}`, 'title', 't2', 1, t);
    await quiet(200); // the change reaches the session before any stream is open

    const ac = new AbortController();
    const get = await fetch(`${t.url}/mcp/session`, { headers: { ...headers, accept: 'text/event-stream' }, signal: ac.signal });
    expect(get.status).toBe(200);
    expect(get.headers.get('content-type')).toContain('text/event-stream');
    const reader = get.body!.pipeThrough(new TextDecoderStream()).getReader();
    let text = '';
    while (!text.includes('\n\n')) text += (await reader.read()).value ?? '';
    const data = JSON.parse(/^data: (.*)$/m.exec(text)![1]);
    expect(data).toEqual({ jsonrpc: '2.0', method: 'notifications/resources/updated', params: { uri } });
    // Only one GET stream per session (the SDK's 409).
    const second = await fetch(`${t.url}/mcp/session`, { headers: { ...headers, accept: 'text/event-stream' } });
    expect(second.status).toBe(409);
    ac.abort();
    await fetch(`${t.url}/mcp/session`, { method: 'DELETE', headers });
    await waitFor(() => hub(t).open === open, 5_000, () => 'the watch to end');
  });

  test('a subscriber removed from the class’s roles loses the subscription (its watch ends revoked)', async () => {
    const id = fresh();
    const uri = `kslate://records/incident/${id}`;
    await put(`incident/${id}`, 'title', 't', 0, g);
    const bob = await connect('bob', { url: g.url });
    await bob.client.subscribeResource({ uri });
    expect(hub(g).open).toBe(1);
    const without = { ...incident, spec: { ...incident.spec, roles: { responder: incident.spec.roles.responder } } };
    g.writeClasses([without]);
    try {
      await g.gw.services.reconcileOnce();
      await quiet(1_100); // the watch re-reads roles at most once a second
      await put(`incident/${id}`, 'title', 'hidden now', 1, g);
      await waitFor(() => hub(g).open === 0, 5_000, () => 'the revoked watch to end');
      await quiet(200);
      expect(bob.updated).toEqual([]);
    } finally {
      g.writeClasses([incident]);
      await g.gw.services.reconcileOnce();
    }
    await bob.transport.terminateSession();
  });

  test('shutdown ends every session at once: GET streams close, watches stop, the drain does not wait for them', async () => {
    const g2 = await startTestGateway([incident], { db: t.db, log: quietLog, extraArgs: ['--watch-poll-interval', '20ms'] });
    try {
      const id = fresh();
      await put(`incident/${id}`, 'title', 't', 0, g2);
      const a = await connect('alice', { url: g2.url });
      await a.client.subscribeResource({ uri: `kslate://records/incident/${id}` });
      expect(hub(g2).open).toBe(1);
      const started = Date.now();
      await g2.gw.shutdown(10_000);
      expect(Date.now() - started).toBeLessThan(5_000);
      expect(hub(g2).open).toBe(0);
    } finally {
      await g2.close().catch(() => undefined);
    }
  });
});

describe('a record that expires and is written again', () => {
  test('notifies, and the subscription follows the new record', async () => {
    const brief = {
      name: 'brief',
      spec: { ttl: '1s', fields: { title: { kind: 'versioned', type: 'string' } }, roles: { writer: { subjects: ['apikey:alice'], read: ['*'], write: ['*'] } } },
    } as ClassInput;
    const g = await startTestGateway([incident, brief], { log: quietLog, extraArgs: ['--watch-poll-interval', '20ms'] });
    try {
      const at = async (v: number) => {
        const r = await g.call('alice', 'PUT', '/v1/records/brief/x/fields/title', { value: `v${v}`, expected_version: v });
        expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
        return r.body;
      };
      await at(0);
      await at(1);
      const uri = 'kslate://records/brief/x';
      const alice = await connect('alice', { url: g.url });
      await alice.client.subscribeResource({ uri });
      await quiet(1_300);
      expect((await g.gw.services.sweepOnce()).expired?.records).toBe(1);
      expect((await at(0)).record_version).toBe(1);
      await waitFor(() => alice.updated.length > 0, 10_000, () => 'the notification of the new record');
      expect((await read(alice.client, uri)).fields.title).toMatchObject({ value: 'v0', version: 1 });
      // The new record's next change notifies too: the watch follows it.
      alice.updated.length = 0;
      await at(1);
      await waitFor(() => alice.updated.length > 0, 10_000, () => 'the notification of the next change');
      expect(hub(g).open).toBe(1);
      await alice.client.close();
    } finally {
      await g.close();
    }
  });
});

describe('a slow client', () => {
  test('a client that leaves notifications untaken for --mcp-session-idle loses its session and subscriptions; notifications are coalesced meanwhile', async () => {
    const ended: unknown[] = [];
    const log = { ...quietLog, info: (msg: string, fields?: unknown) => void (msg === 'mcp session ended' && ended.push(fields)) };
    const g = await startTestGateway([incident], {
      db: t.db,
      log,
      extraArgs: ['--watch-poll-interval', '20ms', '--watch-max-streams', '2000', '--watch-max-streams-per-identity', '2000', '--mcp-max-subscriptions', '1000', '--mcp-session-idle', '1s', '--max-conns', '4096'],
    });
    let res: IncomingMessage | undefined;
    try {
      const id = fresh();
      await put(`incident/${id}`, 'title', 't', 0, g);
      const base = { authorization: `Bearer ${KEYS.alice}` };
      const init = await rawPost(`${g.url}/mcp/session`, INITIALIZE, base);
      const sid = init.headers.get('mcp-session-id')!;
      const headers = { ...base, 'mcp-session-id': sid, 'mcp-protocol-version': LATEST_PROTOCOL_VERSION };
      // A GET stream whose client reads nothing, opened first: with a stream open the session
      // is not idle, so however long the 1000 subscribes take on a loaded machine, only the
      // untaken notifications below can end it (without the stream, a pause of 1 s between
      // subscribes ended it as idle and a subscribe answered 404).
      const url = new URL(`${g.url}/mcp/session`);
      res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = httpRequest(url, { headers: { ...headers, accept: 'text/event-stream' } }, resolve);
        req.on('error', reject);
        req.end();
      });
      expect(res.statusCode).toBe(200);
      res.pause();
      // 1000 distinct uris of the same record, about 8 KiB each (?fields= a different mix of
      // title and notes, repeated; get accepts repeats): one write makes about 8 MB of
      // notifications, more than the socket buffers of a client that does not read hold.
      const N = 1000;
      const mix = (i: number) => Array.from({ length: 1300 }, (_, k) => ((i >> (k % 10)) & 1 ? 'title' : 'notes')).join(',');
      const subscribe = async (i: number) => {
        const uri = `kslate://records/incident/${id}?fields=${mix(i)}`;
        const r = await rawPost(`${g.url}/mcp/session`, { jsonrpc: '2.0', id: 10 + i, method: 'resources/subscribe', params: { uri } }, headers);
        expect((await r.json()).result, uri.slice(0, 80)).toEqual({});
      };
      for (let i = 0; i < N; i += 25) await Promise.all(Array.from({ length: 25 }, (_, k) => subscribe(i + k)));
      expect(hub(g).open).toBe(N);
      await put(`incident/${id}`, 'title', 't2', 1, g);
      // More changes while notifications wait: coalesced, nothing more is queued.
      await put(`incident/${id}`, 'title', 't3', 2, g);
      await waitFor(() => hub(g).open === 0, 15_000, () => `the slow session to end (open watches: ${hub(g).open})`);
      expect(ended).toEqual([{ reason: 'slow', author: 'apikey:alice', subscriptions: N }]);
      const after = await rawPost(`${g.url}/mcp/session`, { jsonrpc: '2.0', id: 2, method: 'resources/list', params: {} }, headers);
      expect(after.status).toBe(404);
    } finally {
      res?.destroy();
      await g.close().catch(() => undefined);
    }
  }, CITUS ? 240_000 : 120_000);
});
